#include "app/memory_options.h"

#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>

#include <torch/cuda.h>

#include "core/error.h"
#include "core/json_text.h"
#include "core/resolve_options.h"
#include "core/sizes.h"

namespace vaecodec::app {

void add_memory_options(CLI::App& sub, MemoryOptions& memory, std::string& device, std::string& dtype,
                        int64_t& chunk) {
  sub.add_option(
      "--preset", memory.preset,
      "GPU tier: budget, dtype and engine options (vaecodec presets lists them), e.g. rtx4090-24g");
  sub.add_option("--preset-file", memory.preset_file, "a preset in a JSON file (format: see presets/*.json)");
  sub.add_option("--vram", memory.vram, "peak GPU memory budget, e.g. 8G, 7.5GiB, 512M (over the preset's)");
  sub.add_flag("--vram-force", memory.force,
               "plan for --vram (or the preset's budget) even when the GPU has less free: by default such a "
               "budget is refused, and without one the budget is the memory free when the run starts");
  sub.add_option(
      "--vram-margin", memory.margin,
      "share of the budget kept free for the allocator's fragmentation (default 0.15, or the preset's)");
  sub.add_option("--host-memory", memory.host_memory,
                 "host memory a GPU run may keep (window frames, parked caches), e.g. 16G (default: what the "
                 "host has available when the run starts, less a margin)");
  sub.add_option(
      "--tile", memory.tile,
      "fixed spatial tiles in latent pixels, 64 or WIDTHxHEIGHT (default: the planner's, only when "
      "needed); one input split across --devices takes its width for the bands' columns");
  sub.add_option(
         "--tile-overlap", memory.tile_overlap,
         "latent pixels neighbouring blended tiles share and blend (default 8, or the preset's; exact "
         "tiles have none)")
      ->check(CLI::Range(int64_t{0}, core::kMaxTileMargin));
  sub.add_option("--norm-context", memory.norm_context,
                 "SeedVR2's tiles: latent pixels around each tile that its norms' statistics also see (more "
                 "is closer to the untiled run, and slower; default: none or 8, the planner's choice)")
      ->check(CLI::Range(int64_t{0}, core::kMaxTileMargin));
  sub.add_option(
         "--tile-norms", memory.tile_norms,
         "SeedVR2's tiles: crop (each tile runs the whole model on its crop and context, every norm over "
         "that), frame (the latent-resolution blocks on the whole frame, the tiles above), or auto "
         "(default: crop tiles decode, frame tiles encode)")
      ->check(CLI::IsMember({"auto", "crop", "frame"}));
  CLI::Option* device_option = sub.get_option_no_throw("--device");
  CLI::Option* dtype_option = sub.get_option_no_throw("--dtype");
  CLI::Option* chunk_option = sub.get_option_no_throw("--chunk");
  sub.parse_complete_callback([&memory, &device, &dtype, &chunk, device_option, dtype_option, chunk_option] {
    auto given = [](const CLI::Option* o) { return o != nullptr && o->count() > 0; };
    resolve_memory_options(memory, device, dtype, given(device_option), given(dtype_option), chunk,
                           given(chunk_option));
  });
}

void check_preset_device(const MemoryOptions& memory, const std::string& device) {
  if (!memory.device_from_preset || device == "cpu" || torch::cuda::is_available()) return;
  throw UsageError("--preset " + memory.chosen->name + " is a tier for a CUDA GPU (it sets --device " +
                   device + "), and no CUDA device is available here; add --device cpu to run on the CPU");
}

void resolve_memory_options(MemoryOptions& memory, std::string& device, std::string& dtype, bool device_given,
                            bool dtype_given, int64_t chunk, bool chunk_given) {
  core::GivenOptions given;
  if (device_given) given.device = device;
  if (dtype_given) given.dtype = dtype;
  given.preset = memory.preset;
  given.preset_file = memory.preset_file;
  given.vram = memory.vram;
  given.vram_force = memory.force;
  if (memory.margin != -1) given.vram_margin = memory.margin;
  given.host_memory = memory.host_memory;
  if (chunk_given) given.chunk = chunk;
  given.tile = memory.tile;
  if (memory.tile_overlap >= 0) given.tile_overlap = memory.tile_overlap;
  if (memory.norm_context >= 0) given.norm_context = memory.norm_context;
  given.tile_norms = memory.tile_norms;
  core::ResolvedOptions resolved = core::resolve_options(given, core::OptionSpelling::cli());
  memory.chosen = std::move(resolved.preset);
  memory.device_from_preset = resolved.device_from_preset;
  if (resolved.device) device = *resolved.device;
  if (resolved.dtype) dtype = *resolved.dtype;
  memory.planner = resolved.planner;
}

std::string describe_presets(bool json) {
  const auto& presets = core::builtin_presets();
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& p : presets)
      out.push_back({{"name", p.name},
                     {"description", p.description},
                     {"gpu", p.gpu},
                     {"device", p.device},
                     {"budget_bytes", p.planner.budget_bytes},
                     {"dtype", p.dtype},
                     {"max_chunk", p.planner.max_chunk},
                     {"tiling", p.planner.tiling},
                     {"tile_overlap", p.planner.tile_overlap},
                     {"norm_context", p.planner.norm_context},
                     {"margin", p.planner.margin}});
    return core::json_text(out) + "\n";
  }
  std::ostringstream s;
  s << std::left << std::setw(15) << "name" << std::setw(11) << "budget" << std::setw(6) << "dtype"
    << std::setw(7) << "chunk" << std::setw(7) << "tiles"
    << "description\n";
  for (const auto& p : presets) {
    const std::string budget =
        p.planner.budget_bytes > 0 ? core::format_size(p.planner.budget_bytes) : "none";
    s << std::setw(15) << p.name << std::setw(11) << budget << std::setw(6) << p.dtype << std::setw(7)
      << ("<= " + std::to_string(p.planner.max_chunk)) << std::setw(7) << (p.planner.tiling ? "yes" : "no")
      << p.description << "\n";
  }
  return s.str();
}

}  // namespace vaecodec::app
