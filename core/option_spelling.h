#pragma once

#include <string>

namespace vaecodec::core {

// Note [Option spellings]
// Core's messages tell the user which option to give ("give --vram 3.2G or more"), and the user reads them in
// the front end that called: the CLI's flags (--vram 8G) or the Python package's keywords (vram='8G'). The
// front end passes how it spells its options (PlannerOptions::spelling, resolve_options) and the messages
// are written through it. An option the front end does not have (Python has no --vram-force) is an empty
// name: the advice that would name it is left out.
struct OptionSpelling {
  bool keywords = false;  // Python's `name='value'`; else the CLI's `--name value`
  std::string device = "--device";
  std::string dtype = "--dtype";
  std::string preset = "--preset";
  std::string preset_file = "--preset-file";
  std::string vram = "--vram";
  std::string vram_force = "--vram-force";
  std::string vram_margin = "--vram-margin";
  std::string host_memory = "--host-memory";
  std::string chunk = "--chunk";
  std::string tile = "--tile";
  std::string tile_overlap = "--tile-overlap";
  std::string norm_context = "--norm-context";
  std::string tile_norms = "--tile-norms";

  static const OptionSpelling& cli();
  static const OptionSpelling& python();  // vaecodec.load()'s keywords

  // The option as advice names it: "--vram" or "vram=".
  std::string name(const std::string& option) const;
  // The option with a value to give: "--vram 3.2G" or "vram='3.2G'".
  std::string give(const std::string& option, const std::string& value) const;
  // A value the user gave, as an error quotes it: "--device gpu:0" or "device 'gpu:0'".
  std::string given(const std::string& option, const std::string& value) const;
};

}  // namespace vaecodec::core
