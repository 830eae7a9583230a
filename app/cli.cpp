#include <csignal>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string_view>

#include <CLI/CLI.hpp>

#include "app/commands.h"
#include "app/devices.h"
#include "app/errors.h"
#include "app/record.h"
#include "core/device/device.h"
#include "core/error.h"

namespace vaecodec::app {

int run_cli(int argc, char** argv) {
  core::Device::use_default_allocator_settings();  // Note [Expandable segments] in core/device/peers.cpp
  CLI::App app{"vaecodec: run videos through causal video VAEs (encode, decode, round trip) on the GPU"};
  app.set_version_flag("--version", std::string("vaecodec ") + VAECODEC_VERSION);
  app.require_subcommand(1);
  set_command_line({argv, argv + argc});  // the manifest records it (app/record.h)

  add_info_command(app);
  add_inspect_command(app);
  add_roundtrip_command(app);
  add_encode_command(app);
  add_decode_command(app);
  add_bench_command(app);
  add_plan_command(app);
  add_presets_command(app);
  add_compare_command(app);

  // ffmpeg's -ss, a two-letter option after one dash, which CLI11 would read as -s -s.
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "-ss") argv[i] = const_cast<char*>("--start");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // One line, as for every other error; usage errors exit with 2.
    std::cerr << "vaecodec: error: " << e.what() << " (vaecodec --help lists the commands and options)\n";
    return 2;
  } catch (const UsageError& e) {
    std::cerr << "vaecodec: error: " << e.what() << "\n";
    return 2;
  } catch (...) {
    // Note [One-line errors]
    print_full_error(std::current_exception());
    std::cerr << "vaecodec: error: " << error_line(std::current_exception()) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace vaecodec::app
