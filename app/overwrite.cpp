#include "app/overwrite.h"

#include <unistd.h>

#include <iostream>
#include <string>

#include "core/error.h"

namespace vaecodec::app {
namespace fs = std::filesystem;

namespace {

// ffmpeg's question on stderr, the answer a line of stdin: y or yes (any case) replaces.
bool ask_terminal(const std::string& question) {
  if (!::isatty(STDIN_FILENO)) return false;
  std::cerr << question << std::flush;
  std::string answer;
  if (!std::getline(std::cin, answer)) {
    std::cerr << "\n";
    return false;
  }
  for (char& c : answer) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return answer == "y" || answer == "yes";
}

}  // namespace

void add_overwrite_options(CLI::App& sub, OverwriteOptions& options) {
  CLI::Option* yes =
      sub.add_flag("-y,--overwrite", options.yes, "replace outputs that exist (as ffmpeg's -y)");
  CLI::Option* no = sub.add_flag(
      "-n,--no-overwrite", options.no,
      "never replace an output: stop if one exists (as ffmpeg's -n); without -y or -n an existing output is "
      "asked about in a terminal and refused otherwise");
  yes->excludes(no);
}

void check_overwrite(const std::vector<fs::path>& outputs, const OverwriteOptions& options,
                     const std::function<bool(const std::string&)>& ask) {
  if (options.yes) return;
  std::vector<fs::path> existing;
  for (const fs::path& output : outputs) {
    std::error_code error;
    if (!output.empty() && fs::exists(fs::symlink_status(output, error)) &&
        std::find(existing.begin(), existing.end(), output) == existing.end())
      existing.push_back(output);
  }
  if (existing.empty()) return;
  const std::string more =
      existing.size() == 1 ? "" : " and " + std::to_string(existing.size() - 1) + " more outputs of this run";
  const std::string what = existing.front().string() + more;
  if (!options.no &&
      (ask ? ask : ask_terminal)("vaecodec: " + what + (existing.size() == 1 ? " exists" : " exist") +
                                 ". Overwrite? [y/N] "))
    return;
  if (options.no)
    throw Error(what + (existing.size() == 1 ? " exists" : " exist") +
                " and -n keeps existing outputs; nothing was written");
  throw Error(what + (existing.size() == 1 ? " exists" : " exist") +
              "; pass -y to replace, or write elsewhere (a batch: --skip-existing skips finished outputs)");
}

}  // namespace vaecodec::app
