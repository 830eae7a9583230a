#pragma once

// The planner's models of memory and time, shared by core/planner.cpp and core/exact_plan.cpp; not for
// other callers.

#include <cstdint>
#include <string>
#include <vector>

#include "core/plan_types.h"

namespace vaecodec::core::plan_model {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Note [Plan cost]
// The planner ranks the plans that fit by a time model, in seconds per latent frame:
//   compute  = the model's FLOPs for the tiles' pixels (overlaps count twice) at kComputeRate, plus
//              kCallSeconds per model call (one per tile per chunk), plus the attention over whole latent
//              frames (ModelInfo::encode_attention): 4 x tokens^2 x channels per latent frame, where tokens
//              are a frame's (or a blended tile's) latent pixels, at kAttentionRate
//              - the rest of the FLOPs grow with the pixels, these with their square: at 720p they are 1%
//              of Wan2.1's decode, at 4K 9%, and they run at under half the convolutions' rate (one head
//              wider than 256 channels: Note [Attention wider than the fused kernels] in core/layers.cpp)
//   transfer = offloaded only: every tile's cache (untiled: the streamed part of the cache, Note [Caches
//              streamed slot by slot]) goes up and comes back once per chunk, so
//              (host cache) / chunk each way at kCopyRate; the two directions run on their own streams,
//              beside the model (Note [Offloaded caches]), so the plan takes the longer of compute and
//              transfer and kOverlapLoss of the shorter (copies and kernels share the memory bus and the
//              host's cores)
// The rates are the H100's (Wan2.1 decode runs at about 265 TFLOP/s; the offloaded plans' extra time measured
// 37-40 GB/s of cache copies, docs/benchmarks.md). Only their ratio matters for the choice, and consumer
// cards have a similar one (less compute, and PCIe 4.0 instead of 5.0). The model is coarse on purpose: it
// only has to tell plans apart whose costs differ by tens of percent (tile overlap, cache copies), and where
// two plans cost within kCostTolerance of each other the one with the smaller peak wins.
constexpr double kComputeRate = 400e12;  // FLOP/s where the calibration row has no measured time
constexpr double kCopyRate = 35e9;       // bytes/s, host <-> device
constexpr double kCallSeconds = 2e-3;    // fixed cost of one model call
// FLOP/s of the attention over a whole latent frame in blocks of queries (SeedVR2's 512-channel head on the
// H100: 194 TFLOP/s at 1080p, 186 at 4K; the memory-efficient kernel before them 118 and 77); the
// calibration's measured rate is the rest's.
constexpr double kAttentionRate = 185e12;
constexpr double kOverlapLoss = 0.3;
// Bytes/s of host memory locked for a streamed cache's buffers, once per run (cudaHostAlloc on the H200's
// host: 0.40 s per GiB, Note [Pinned buffers kept for the next run] in core/device/device.cpp).
constexpr double kPinRate = 2.5 * 1024 * 1024 * 1024;
// A streamed whole frame (Note [Caches streamed slot by slot]) wins over tiles only within this much of the
// untiled time, pinning counted: beyond it tiles through time run, unless none fits (Note [Planner]).
constexpr double kStreamedCostLimit = 1.5;
constexpr double kCostTolerance = 0.03;
// Tiles whose norms see less than the frame: time given up for norms that see more (Note [What a plan's
// norms see] in core/planner.cpp).
constexpr double kNormTolerance = 0.10;

// Note [Memory model]
// The peak device memory of a run, in parts (MemoryEstimate):
//   weights     = parameters x dtype size (the whole model: encoder and decoder are loaded together)
//   cache       = cache_elements x dtype size x the pixels of every tile (each carries its own causal cache;
//                 offloaded, three tiles': Note [Offloaded caches]), summed over encoder and decoder for a
//                 round trip; untiled and streamed, its resident part and stream_window_elements' window
//   activations = a x (pixels of one tile) x (frames in flight: temporal_factor x chunk), the largest model
//                 call's working set (the larger of encoder and decoder for a round trip)
//   io          = the chunk's input and output in the model dtype, and a float32 accumulator when tiled
//   reserved    = what the caller holds on the device besides the run (bench keeps the whole clip there)
// cache_elements is structural: the channels x history frames of every causal layer, per output pixel. It
// does not depend on the GPU and is checked against the model's real cache on the CPU
// (tests/test_planner.cpp). `a` is calibrated from one measured peak per (family, op, dtype): the
// measurement's other parts are subtracted and the rest divided by its pixels and frames in flight.
// Everything scales linearly in pixels and chunk length; that is the assumption the GPU runs check
// (docs/memory.md).
constexpr double kAssumedLatentFrames = 21;      // a clip of unknown length is planned as 81 frames
constexpr int64_t kHostBase = int64_t{1} << 30;  // the process itself: its libraries, the weights as read

int64_t element_size(torch::ScalarType dtype);
// The bytes LibTorch's pinned allocator takes for a block of `bytes`: the next power of two (Note [Pinned
// blocks] in core/plan_model.cpp).
double pinned_block(double bytes);
// The calibration row for a single op (encode or decode), with a note on how it applies.
struct Coefficients {
  double cache_elements = 0;          // per pixel
  double stream_window_elements = 0;  // per pixel (MemoryCalibration's)
  double activation_bytes = 0;        // per pixel and frame in flight, in the request's dtype
  double flops = 0;                   // per pixel and frame
  double rate = kComputeRate;         // FLOP/s of the calibration run, its whole-frame attention left out
  std::string note;
};

Coefficients coefficients(const PlanRequest& request, Op op);
int64_t ceil_div(int64_t a, int64_t b);
// Sum of the tiles' pixels (with overlaps), in latent pixels.
int64_t tiled_area(const TileGrid& g);
// The ops a request runs: both networks for a round trip.
std::vector<Op> ops_of(Op op);
// The model's compute time per pixel and frame of the request at the calibrated rates.
double seconds_per_pixel(const PlanRequest& request);
// The time of the attention over whole latent frames for one latent frame of `latent_pixels`, all ops of the
// request (Note [Plan cost]).
double attention_seconds(const PlanRequest& request, double latent_pixels);
// The same for `op` alone.
double attention_seconds(const PlanRequest& request, Op op, double latent_pixels);
// A plan's time per latent frame (Note [Plan cost]); `per_pixel` from seconds_per_pixel.
double plan_cost(const PlanRequest& request, double per_pixel, int64_t chunk, const TileGrid& tiles,
                 const MemoryEstimate& estimate);

// Exact tiles (core/exact_plan.cpp): every grid, chunk and window the options allow, with estimates and
// costs; `untiled_seconds` is the whole-frame plan's time of the clip.
std::vector<Plan> exact_plans(const PlanRequest& request, const PlannerOptions& options, int64_t min_chunk,
                              int64_t max_chunk, double untiled_seconds);

}  // namespace vaecodec::core::plan_model
