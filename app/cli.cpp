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
namespace {

// Note [Exit status]
// One rule for every command, stated in --help and the README:
//   0    done
//   1    the run failed: an input or the weights missing, unreadable or damaged, an output that exists
//        (without -y) or cannot be written, out of memory, any input of a batch
//   2    the command line cannot work: an unknown command or option, a value that is malformed or out of
//        range, options that contradict each other, the input or this machine (--device cuda without a GPU)
//   128+N  stopped by signal N: 130 for Ctrl-C (SIGINT), 143 for SIGTERM (Note [Interrupts])
// vaecodec::UsageError is 2, every other error 1; CLI11's parse errors are 2.
constexpr const char* kExitStatus =
    "Exit status: 0 done; 1 the run failed (an input or the weights missing, unreadable or damaged, an "
    "output "
    "that exists without -y or cannot be written, out of memory, an input of a batch); 2 the command line "
    "cannot work (an unknown command or option, a malformed or out-of-range value, options that contradict "
    "each other or this machine); 130 interrupted (Ctrl-C), 143 terminated (SIGTERM).";

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The name among `names` closest to `typed`, when it is close enough to be what was meant; empty otherwise.
std::string closest(const std::string& typed, const std::vector<std::string>& names) {
  std::string best;
  size_t best_distance = std::string::npos;
  for (const std::string& name : names) {
    const size_t d = edit_distance(typed, name);
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  }
  return best_distance <= std::max<size_t>(2, typed.size() / 3) ? best : "";
}

// A mistyped command or option, named with what it was probably meant to be (CLI11 2.1 says "A subcommand is
// required" or "The following arguments were not expected"); empty when nothing was mistyped.
std::string did_you_mean(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands({})) commands.push_back(sub->get_name());
  CLI::App* sub = nullptr;
  int first = 1;
  for (; first < argc; ++first) {
    const std::string arg = argv[first];
    if (arg.starts_with("-")) continue;
    if (std::find(commands.begin(), commands.end(), arg) != commands.end()) {
      sub = app.get_subcommand(arg);
      break;
    }
    std::string list;
    for (const std::string& c : commands) list += (list.empty() ? "" : ", ") + c;
    const std::string guess = closest(arg, commands);
    return "unknown command '" + arg + "'" + (guess.empty() ? "" : "; did you mean '" + guess + "'?") +
           " (the commands: " + list + ")";
  }
  if (!sub) return "";
  std::vector<std::string> names;
  for (const CLI::Option* option : sub->get_options()) {
    for (const std::string& n : option->get_lnames()) names.push_back("--" + n);
    for (const std::string& n : option->get_snames()) names.push_back("-" + n);
  }
  for (int i = first + 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    const bool long_option = arg.starts_with("--") && arg.size() > 2;
    const bool short_option =
        arg.size() >= 2 && arg[0] == '-' && std::isalpha(static_cast<unsigned char>(arg[1]));
    if (!long_option && !short_option) continue;
    if (long_option) arg = arg.substr(0, arg.find('='));
    if (!long_option && arg.size() > 2) continue;  // -abc: CLI11 reads flags together
    if (std::find(names.begin(), names.end(), arg) != names.end()) continue;
    const std::string guess = closest(arg, names);
    return "unknown option " + arg + " for " + sub->get_name() +
           (guess.empty() ? "" : "; did you mean " + guess + "?") + " (vaecodec " + sub->get_name() +
           " --help lists its options)";
  }
  return "";
}

}  // namespace

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
  app.footer(kExitStatus);  // Note [Exit status]
  for (CLI::App* sub : app.get_subcommands({})) sub->footer(kExitStatus);

  // ffmpeg's -ss, a two-letter option after one dash, which CLI11 would read as -s -s.
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "-ss") argv[i] = const_cast<char*>("--start");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // One line, as for every other error; usage errors exit with 2.
    const std::string mistyped = did_you_mean(app, argc, argv);
    if (!mistyped.empty()) {
      std::cerr << "vaecodec: error: " << mistyped << "\n";
    } else {
      std::cerr << "vaecodec: error: " << e.what() << " (vaecodec --help lists the commands and options)\n";
    }
    return 2;
  } catch (const UsageError& e) {
    std::cerr << "vaecodec: error: " << e.what() << "\n";
    return 2;
  } catch (const RunInterrupted& e) {
    std::cerr << "vaecodec: " << e.what() << "\n";
    return e.code();
  } catch (...) {
    // Note [One-line errors]
    print_full_error(std::current_exception());
    std::cerr << "vaecodec: error: " << error_line(std::current_exception()) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace vaecodec::app
