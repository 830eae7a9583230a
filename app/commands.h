#pragma once

#include <CLI/CLI.hpp>

namespace vaecodec::app {

// Each command adds its subcommand and options to the CLI and sets the callback that runs it. A command
// reports failure by throwing vaecodec::Error; main prints it as one line and exits non-zero.
void add_info_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_roundtrip_command(CLI::App& app);
void add_encode_command(CLI::App& app);
void add_decode_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_plan_command(CLI::App& app);     // app/cmd_plan.cpp
void add_presets_command(CLI::App& app);  // app/cmd_plan.cpp

}  // namespace vaecodec::app
