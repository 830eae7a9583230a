#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <torch/torch.h>

#include "core/option_spelling.h"
#include "core/planner.h"
#include "core/presets.h"

namespace vaecodec::core {

// Note [One resolver for every front end]
// The CLI and the Python package take the same options (a device, a dtype, a preset, a budget, fixed tiles
// and their margins) and resolve them here, the same way: a preset fills the planner's options and, where
// none were given, the device and dtype; what was given goes over it. The front end keeps its own defaults
// and parsing (CLI11's validators, Python's types) and its spelling of the options for the messages
// (Note [Option spellings]).

// What a front end was given, as the user wrote it; nullopt or empty: not given.
struct GivenOptions {
  std::optional<std::string> device, dtype;
  std::string preset;       // a built-in tier's name
  std::string preset_file;  // a tier in a JSON file
  std::string vram;         // the budget, a size ("8G")
  // A size without a unit is bytes (Python's vram=8 << 30); the CLI refuses one ("--vram 8" meant 8 GiB).
  bool bare_sizes_are_bytes = false;
  bool vram_force = false;  // plan for the budget even where the device has less free
  std::optional<double> vram_margin;
  std::string host_memory;       // what a GPU run may keep in host memory, a size
  std::optional<int64_t> chunk;  // latent frames per model call; 0: the planner's
  std::string tile;              // fixed tiles, "64" or "80x48"
  std::optional<int64_t> tile_overlap, norm_context;
  std::string tile_norms;  // "crop" or "frame" (PlannerOptions::tile_norms)
};

struct ResolvedOptions {
  std::optional<Preset> preset;
  // The device and dtype given, else the preset's; nullopt: neither (the front end's default).
  std::optional<std::string> device, dtype;
  bool device_from_preset = false;  // the device is the preset's
  PlannerOptions planner;           // with the front end's spelling
};

// Resolves `given` (Note [One resolver for every front end]); throws UsageError naming the option as
// `spelling` does.
ResolvedOptions resolve_options(const GivenOptions& given, const OptionSpelling& spelling);

// "auto" (cuda when available), "cpu", "cuda", "cuda:N": the device, refused where it is not here.
torch::Device resolve_device(const std::string& device, const OptionSpelling& spelling);
// "fp32", "bf16", "fp16", "fp8" (bf16 with the norm-fed convolutions on e4m3 tiles, Note [FP8 convolutions]
// in core/kernels/conv3d.cpp), "auto" (bf16 on CUDA, fp32 on the CPU).
torch::ScalarType resolve_dtype(const std::string& dtype, torch::Device device,
                                const OptionSpelling& spelling);

}  // namespace vaecodec::core
