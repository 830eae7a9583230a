// The planner's models of memory and time (Note [Memory model], Note [Plan cost]), shared by the plans of
// whole frames, blended tiles (core/planner.cpp) and exact tiles (core/exact_plan.cpp).
#include "core/plan_model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace vaecodec::core::plan_model {

// Note [Pinned blocks]
// A window's frames in host memory are page-locked through LibTorch's pinned allocator, which rounds every
// block up to a power of two (and keeps freed blocks for reuse): an encode window of 4K frames arrives in
// pieces of four frames in bf16, 190 MiB each, and takes 256 MiB for each, 5.06 GiB for 3.75 GiB of frames.
// Page-locked memory is resident, so the rounding is host RSS: the estimate counts it (the H200's 4K file
// encode held 2.3 GiB over an estimate that did not, docs/benchmarks.md, "On one H200 at 051e5a3").
double pinned_block(double bytes) {
  return bytes > 0 ? std::exp2(std::ceil(std::log2(bytes))) : 0.0;
}

int64_t element_size(torch::ScalarType dtype) {
  return static_cast<int64_t>(c10::elementSize(dtype));
}

namespace {

// 4 x tokens^2 x channels: the scores and the weighted sum of one latent frame (Note [Plan cost]).
double attention_flops_per_frame(const PlanRequest& request, Op op, double latent_pixels) {
  const int64_t channels = op == Op::kEncode ? request.encode_attention : request.decode_attention;
  return 4.0 * latent_pixels * latent_pixels * static_cast<double>(channels);
}

}  // namespace

Coefficients coefficients(const PlanRequest& request, Op op) {
  // Every registered family has a row for each op (register_model_family checks it) and the request carries
  // them: the request's dtype, else one scaled by element size from the family's own measurement.
  const MemoryCalibration* row = nullptr;
  std::string note;
  for (const auto& c : request.calibration)
    if (c.op == op && c.dtype == request.dtype) row = &c;
  if (row) note = row->source;
  if (!row) {
    for (const auto& c : request.calibration)
      if (c.op == op && (!row || c.dtype == torch::kBFloat16)) row = &c;
    if (!row) throw Error("no memory calibration of " + op_name(op) + " for " + request.family);
    note = std::string("derived from ") +
           (row->dtype == torch::kBFloat16 ? "bf16" : c10::toString(row->dtype)) + " (" + row->source + ")";
  }
  Coefficients k;
  k.cache_elements = row->cache_elements;
  k.stream_window_elements = row->stream_window_elements;
  k.note = note;
  // Split the measured peak of the calibration run into its parts and keep what is left for activations.
  const double size = static_cast<double>(element_size(row->dtype));
  const double pixels = static_cast<double>(row->width * row->height);
  const double weights = static_cast<double>(row->parameters) * size;
  const double cache = row->cache_elements * size * pixels;
  const double frames = static_cast<double>(request.temporal_factor * row->chunk);
  const double io = (3.0 + 3.0) * frames * pixels * size;  // the chunk in and out, one frame set each
  const double rest = row->peak_gib * kGiB - row->resident_gib * kGiB - weights - cache - io;
  k.activation_bytes =
      std::max(rest, 0.0) / (pixels * frames) * (static_cast<double>(element_size(request.dtype)) / size);
  // The calibration's attention over whole latent frames (Note [Plan cost]) is left out of its FLOPs and
  // time.
  const double f2 = static_cast<double>(request.spatial_factor * request.spatial_factor);
  const double latent_frames = static_cast<double>(1 + (row->frames - 1) / request.temporal_factor);
  const double attention_flops = attention_flops_per_frame(request, op, pixels / f2) * latent_frames;
  const double flops = std::max(row->tflop * 1e12 - attention_flops, 0.0);
  k.flops = flops / (pixels * static_cast<double>(row->frames));
  const double seconds = row->seconds - attention_flops / kAttentionRate;
  if (row->seconds > 0 && row->tflop > 0 && seconds > 0) k.rate = flops / seconds;
  return k;
}

double attention_seconds(const PlanRequest& request, double latent_pixels) {
  double seconds = 0;
  for (Op op : ops_of(request.op)) seconds += attention_seconds(request, op, latent_pixels);
  return seconds;
}

double attention_seconds(const PlanRequest& request, Op op, double latent_pixels) {
  return attention_flops_per_frame(request, op, latent_pixels) / kAttentionRate;
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Sum of the tiles' pixels (with overlaps), in latent pixels.
int64_t tiled_area(const TileGrid& g) {
  return g.count() * g.tile_height * g.tile_width;
}

std::vector<Op> ops_of(Op op) {
  if (op == Op::kRoundtrip) return {Op::kEncode, Op::kDecode};
  return {op};
}

// The model's compute time per pixel and frame of the request at the calibrated rates (both networks for a
// round trip).
double seconds_per_pixel(const PlanRequest& request) {
  double seconds = 0;
  for (Op op : ops_of(request.op)) {
    const Coefficients k = coefficients(request, op);
    seconds += k.flops / k.rate;
  }
  return seconds;
}

// The plan's time per latent frame (Note [Plan cost]); `per_pixel` from seconds_per_pixel.
double plan_cost(const PlanRequest& request, double per_pixel, int64_t chunk, const TileGrid& tiles,
                 const MemoryEstimate& estimate) {
  const double f2 = static_cast<double>(request.spatial_factor * request.spatial_factor);
  const double pixels = static_cast<double>(tiled_area(tiles)) * f2;
  const double frames = static_cast<double>(request.temporal_factor);
  const double compute =
      per_pixel * pixels * frames +
      static_cast<double>(tiles.count()) *
          attention_seconds(request, static_cast<double>(tiles.tile_height * tiles.tile_width)) +
      kCallSeconds * static_cast<double>(tiles.count() * ops_of(request.op).size()) /
          static_cast<double>(chunk);
  const double transfer = static_cast<double>(estimate.host_cache) / static_cast<double>(chunk) / kCopyRate;
  return std::max(compute, transfer) + kOverlapLoss * std::min(compute, transfer);
}

}  // namespace vaecodec::core::plan_model
