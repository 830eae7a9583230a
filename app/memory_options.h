#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "core/planner.h"
#include "core/presets.h"

namespace vaecodec::app {

// The memory options of the commands that run a model (roundtrip, encode, decode, bench, plan): a preset, a
// budget, fixed tiles, their overlap and norm context. CLI11 fills the strings; at the end of parsing they
// are resolved into `planner` (Note [Presets] in core/presets.h) and the preset's device and dtype are filled
// in where the command line gave none.
struct MemoryOptions {
  std::string preset;         // --preset NAME: a built-in tier
  std::string preset_file;    // --preset-file F: a tier in a JSON file of the same format
  std::string vram;           // --vram 8G: the budget, over the preset's
  std::string tile;           // --tile 64 or 80x48: fixed tiles in latent pixels
  std::string host_memory;    // --host-memory 16G: what a GPU run may keep in host memory
  int64_t tile_overlap = -1;  // --tile-overlap 16: latent pixels neighbouring tiles share; -1: not given
  int64_t norm_context = -1;  // --norm-context 16: latent pixels tiles' norms see around them; -1: not given
  std::string tile_norms;     // --tile-norms crop|frame: what SeedVR2's tiles' norms see
  double margin = -1;  // --vram-margin 0.1: the share of the budget kept for fragmentation; -1: not given
  bool force = false;  // --vram-force: plan for the budget even where the device has less free
  // Resolved after parsing.
  std::optional<core::Preset> chosen;  // the preset, if one was named
  bool device_from_preset = false;     // the device is the preset's (no --device given)
  core::PlannerOptions planner;
};

// A UsageError when the device is the preset's CUDA and there is none here: the refusal names the preset,
// not a --device the user never typed.
void check_preset_device(const MemoryOptions& memory, const std::string& device);

// Adds --preset, --preset-file, --vram, --vram-margin, --host-memory, --tile, --tile-overlap,
// --norm-context and --tile-norms to `sub`. `device`, `dtype` and `chunk` are
// the command's own options (already added): a preset sets device and dtype unless --device/--dtype were
// given, and --chunk, when given, fixes the chunk length instead of letting the planner choose up to the
// preset's max_chunk.
void add_memory_options(CLI::App& sub, MemoryOptions& memory, std::string& device, std::string& dtype,
                        int64_t& chunk);

// Resolves the strings into memory.chosen and memory.planner (what add_memory_options runs after parsing).
// device/dtype are replaced by the preset's when `device_given`/`dtype_given` are false.
void resolve_memory_options(MemoryOptions& memory, std::string& device, std::string& dtype, bool device_given,
                            bool dtype_given, int64_t chunk, bool chunk_given);

// One line per preset (name, budget, dtype, max chunk, description), or a JSON array.
std::string describe_presets(bool json);

}  // namespace vaecodec::app
