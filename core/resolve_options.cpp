#include "core/resolve_options.h"

#include <torch/cuda.h>

#include "core/error.h"
#include "core/host_memory.h"
#include "core/sizes.h"
#include "core/tile_grid.h"

namespace vaecodec::core {
namespace {

bool has_no_unit(const std::string& size) {
  return size.find_first_not_of("0123456789. ") == std::string::npos;
}

// A size the user gave for `option`.
int64_t given_size(const std::string& text, const std::string& option) {
  try {
    return parse_size(text);
  } catch (const Error& e) {
    throw UsageError(option + ": " + e.what());
  }
}

}  // namespace

ResolvedOptions resolve_options(const GivenOptions& given, const OptionSpelling& s) {
  ResolvedOptions r;
  if (!given.preset.empty() && !given.preset_file.empty())
    throw UsageError(s.preset + " and " + s.preset_file + " both name a preset; give one");
  if (!given.preset.empty()) r.preset = find_preset(given.preset);
  if (!given.preset_file.empty()) r.preset = load_preset_file(given.preset_file);
  r.device = given.device;
  r.dtype = given.dtype;
  PlannerOptions& planner = r.planner;
  if (r.preset) {
    planner = r.preset->planner;
    if (!given.device) r.device = r.preset->device;
    r.device_from_preset = !given.device;
    if (!given.dtype) r.dtype = r.preset->dtype;
  }
  planner.spelling = s;
  const std::string& vram = given.vram;
  if (!vram.empty()) {
    // A bare number would be bytes: "--vram 8" meant 8 GiB, not a budget nothing fits in.
    if (!given.bare_sizes_are_bytes && has_no_unit(vram))
      throw UsageError(s.given(s.vram, vram) + " has no unit: write " + vram + "G for GiB or " + vram +
                       "GB for 10^9 bytes (" + vram + "B, if bytes are meant)");
    planner.budget_bytes = given_size(vram, s.vram);
  }
  const std::string& host_memory = given.host_memory;
  if (!host_memory.empty()) {
    if (!given.bare_sizes_are_bytes && has_no_unit(host_memory))
      throw UsageError(s.given(s.host_memory, host_memory) + " has no unit: write " + host_memory +
                       "G for GiB or " + host_memory + "GB for 10^9 bytes");
    planner.host_budget_bytes = given_size(host_memory, s.host_memory);
    const int64_t host = host_memory_bytes();
    if (host > 0 && planner.host_budget_bytes > host)
      throw UsageError(s.given(s.host_memory, host_memory) + " is more than the " + format_size(host) +
                       " of memory this host has");
    planner.host_budget_note = s.name(s.host_memory);
    planner.host_budget_given = true;
  }
  if (given.chunk) {
    if (*given.chunk < 0 || *given.chunk > kMaxChunk)
      throw UsageError(s.chunk + " " + std::to_string(*given.chunk) + ": at most " +
                       std::to_string(kMaxChunk) + " latent frames per call (0: the planner's choice)");
    if (*given.chunk > 0) planner.chunk = *given.chunk;
  }
  if (!given.tile.empty()) {
    try {
      planner.tile = parse_tile(given.tile);
    } catch (const UsageError&) {
      if (!s.keywords) throw;  // parse_tile's message names --tile
      throw UsageError(s.given(s.tile, given.tile) +
                       " is not a tile size: give 64, (80, 48) or '80x48' (width, height in latent pixels)");
    }
  }
  for (const auto& [name, value] :
       {std::pair{&s.tile_overlap, given.tile_overlap}, std::pair{&s.norm_context, given.norm_context}})
    if (value && (*value < 0 || *value > kMaxTileMargin))
      throw UsageError(*name + " " + std::to_string(*value) + ": from 0 to " +
                       std::to_string(kMaxTileMargin) + " latent pixels");
  if (given.tile_overlap) planner.tile_overlap = *given.tile_overlap;
  if (!given.tile_norms.empty()) {
    const std::optional<TileNorms> norms = parse_tile_norms(given.tile_norms);
    if (!norms)
      throw UsageError(s.given(s.tile_norms, given.tile_norms) +
                       ": auto, crop (each tile's crop at every resolution) or frame (the whole frame at "
                       "latent resolution)");
    planner.tile_norms = *norms;
  }
  if (given.norm_context) {
    planner.norm_context = *given.norm_context;
    planner.norm_context_fixed = true;
  }
  if (given.vram_margin) {
    if (!(*given.vram_margin >= 0 && *given.vram_margin < 1))
      throw UsageError(s.vram_margin +
                       ": expected the share of the budget to keep free, from 0 to below 1, got " +
                       std::to_string(*given.vram_margin));
    planner.margin = *given.vram_margin;
  }
  planner.budget_forced = given.vram_force;
  return r;
}

torch::Device resolve_device(const std::string& device, const OptionSpelling& s) {
  if (device == "auto") return torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::kCPU;
  torch::Device parsed(torch::kCPU);
  try {
    parsed = torch::Device(device);
  } catch (const c10::Error&) {
    throw UsageError(s.given(s.device, device) + " is not a device (use cpu, cuda or cuda:N)");
  }
  if (parsed.is_cpu()) return parsed;
  if (!parsed.is_cuda()) throw UsageError(s.given(s.device, device) + ": vaecodec runs on cpu or cuda");
  if (!torch::cuda::is_available())
    throw UsageError(s.given(s.device, device) + ": no CUDA device is available here (" +
                     s.give(s.device, "cpu") + " runs on the CPU)");
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  if (parsed.has_index() && parsed.index() >= count)
    throw UsageError(s.given(s.device, device) + ": there are only " + std::to_string(count) +
                     " CUDA devices");
  return parsed.has_index() ? parsed : torch::Device(torch::kCUDA, 0);
}

torch::ScalarType resolve_dtype(const std::string& dtype, torch::Device device, const OptionSpelling& s) {
  if (dtype == "fp32") return torch::kFloat;
  if (dtype == "bf16" || dtype == "fp8") return torch::kBFloat16;
  if (dtype == "fp16") return torch::kHalf;
  if (dtype == "auto") return device.is_cuda() ? torch::kBFloat16 : torch::kFloat;
  throw UsageError(s.given(s.dtype, dtype) + " is not one of fp32, bf16, fp16, fp8");
}

}  // namespace vaecodec::core
