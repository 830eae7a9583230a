#pragma once

#include <CLI/CLI.hpp>

namespace vaecodec::app {

// The whole command line: parses argv, runs the command, prints any error as one line. Returns the exit
// status (0, 1 for a failed run, 2 for a usage error). main() is this; tests call it in-process to run the
// CLI with model families they register themselves.
int run_cli(int argc, char** argv);

// Each command adds its subcommand and options to the CLI and sets the callback that runs it. A command
// reports failure by throwing vaecodec::Error; main prints it as one line and exits non-zero.
void add_info_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_roundtrip_command(CLI::App& app);  // app/cmd_run.cpp
void add_encode_command(CLI::App& app);     // app/cmd_run.cpp
void add_decode_command(CLI::App& app);     // app/cmd_run.cpp
void add_bench_command(CLI::App& app);
void add_plan_command(CLI::App& app);     // app/cmd_plan.cpp
void add_presets_command(CLI::App& app);  // app/cmd_plan.cpp
void add_compare_command(CLI::App& app);

}  // namespace vaecodec::app
