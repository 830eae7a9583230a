#include "core/option_spelling.h"

namespace vaecodec::core {

const OptionSpelling& OptionSpelling::cli() {
  static const OptionSpelling spelling;
  return spelling;
}

const OptionSpelling& OptionSpelling::python() {
  static const OptionSpelling spelling = [] {
    OptionSpelling s;
    s.keywords = true;
    s.device = "device";
    s.dtype = "dtype";
    s.preset = "preset";
    s.preset_file.clear();
    s.vram = "vram";
    s.vram_force.clear();
    s.vram_margin.clear();
    s.host_memory.clear();
    s.chunk = "chunk";
    s.tile = "tile";
    s.tile_overlap = "tile_overlap";
    s.norm_context = "norm_context";
    s.tile_norms = "tile_norms";
    return s;
  }();
  return spelling;
}

std::string OptionSpelling::name(const std::string& option) const {
  return keywords ? option + "=" : option;
}

std::string OptionSpelling::give(const std::string& option, const std::string& value) const {
  return keywords ? option + "='" + value + "'" : option + " " + value;
}

std::string OptionSpelling::given(const std::string& option, const std::string& value) const {
  return keywords ? option + " '" + value + "'" : option + " " + value;
}

}  // namespace vaecodec::core
