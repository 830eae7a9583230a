#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/planner.h"
#include "core/sizes.h"

namespace vaecodec::core {

// Note [Presets]
// A preset is a GPU tier written down as data: a memory budget a little below the card's memory (the CUDA
// context, cuDNN's handles and the display take the rest), the dtype, and the planner's engine options. The
// built-in ones are the files in presets/, compiled into the binary at build time
// (cmake/embed_presets.cmake), so the files a user reads and copies are exactly what --preset NAME uses.
// Format, one JSON object per file:
//   {"name": "rtx4090-24g", "description": "...", "gpu": "RTX 4090", "device": "cuda",
//    "budget": "22.5GiB", "dtype": "bf16", "engine": {"max_chunk": 4, "tiling": true, "tile_overlap": 8}}
// The engine options are PlannerOptions' of the same names (max_chunk, tiling, tile_overlap, norm_context,
// min_tile, offload, margin); a preset's norm_context is the planner's to take or leave, as the default's.
// "budget" is a size (parse_size) or a number of bytes, or "none" for no budget; "gpu" is a piece of the
// device name that `vaecodec info` uses to choose between tiers of the same budget. Unknown keys are errors,
// so a misspelt option is not silently ignored.
struct Preset {
  std::string name;
  std::string description;
  std::string gpu;              // part of the CUDA device name this tier is named after; empty: none
  std::string device = "cuda";  // "cuda" or "cpu"
  std::string dtype = "bf16";   // "fp32", "bf16" or "fp16"
  PlannerOptions planner;       // budget_bytes and the engine options
  std::string source;           // "built-in" or the file it was read from
};

// A preset from its JSON; `origin` names the file in errors.
Preset parse_preset(const nlohmann::json& j, const std::string& origin);
Preset load_preset_file(const std::filesystem::path& path);

// The presets compiled into the binary, in budget order (cpu first).
const std::vector<Preset>& builtin_presets();
// The built-in preset called `name`; throws listing every valid name.
const Preset& find_preset(const std::string& name);
std::string preset_names();  // "cpu, rtx4060-8g, ..."

// The tier to suggest for a GPU: the largest budget that fits in `total_bytes`; among tiers of that budget
// the one whose "gpu" occurs in `device_name`, else the first. nullopt when no GPU tier fits.
std::optional<std::string> suggest_preset(int64_t total_bytes, const std::string& device_name);

// The raw (file name, text) pairs of presets/*.json, generated at build time.
const std::vector<std::pair<std::string, std::string>>& builtin_preset_texts();

}  // namespace vaecodec::core
