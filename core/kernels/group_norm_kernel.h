#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "core/kernels/element_type.h"

namespace vaecodec::core::kernels {

// Channels up to this many vector lanes (channels / vector width) fit one block's row.
constexpr int64_t kFrameGroupNormMaxLanes = 256;

// GroupNorm with statistics per (batch item, frame, group) over that frame's pixels and the group's channels
// (Note [SeedVR2 GroupNorm per frame]), then y = (x - mean) / sqrt(var + eps) * weight + bias, and SiLU when
// `silu`. Frames are channels-last inside: pixel p, channel c of a frame at p * channels + c; where each
// frame starts is given by the batch and frame strides, separately for x and y (y may be a view into a larger
// buffer). Statistics in float32 for every storage type.
struct FrameGroupNormArgs {
  const void* x = nullptr;
  void* y = nullptr;
  const float* weight = nullptr;  // [channels]
  const float* bias = nullptr;    // [channels]
  void* workspace = nullptr;      // frame_group_norm_workspace_bytes(batch, frames, groups, splits)
  ElementType type = ElementType::kFloat32;
  int64_t batch = 0, frames = 0, pixels = 0, channels = 0, groups = 0;
  int64_t x_batch_stride = 0, x_frame_stride = 0, y_batch_stride = 0, y_frame_stride = 0;  // in elements
  int splits = 1;                                                                          // blocks per frame
  int vector_width =
      1;  // 1, or frame_group_norm_vector_width() when pointers and strides allow 16-byte access
  float eps = 1e-6f;
  bool silu = false;
};

// Channels per 16-byte access for this type, or 1 when channels do not divide into such packs.
int frame_group_norm_vector_width(ElementType type, int64_t channels);
size_t frame_group_norm_workspace_bytes(int64_t batch, int64_t frames, int64_t groups, int splits);
cudaError_t launch_frame_group_norm(const FrameGroupNormArgs& args, cudaStream_t stream);

// The two passes of launch_frame_group_norm one at a time, for statistics pooled between them from other
// parts of the same frames (bands across devices, Note [Bands across devices] in core/band_exchange.h). A
// partial is kFrameGroupPartialFloats float32 values: the count of its values, their mean and the sum of
// their squared deviations from it; partials are laid out [frame][split][group], frame = batch item * frames
// + frame. launch_frame_group_moments writes args.splits of them per frame and group into args.workspace;
// launch_frame_group_apply normalises x into y with `partials` [frame][partial_splits][group] (any number of
// sets concatenated along the split axis: their union is what each group's statistics are over).
constexpr int64_t kFrameGroupPartialFloats = 3;
cudaError_t launch_frame_group_moments(const FrameGroupNormArgs& args, cudaStream_t stream);
cudaError_t launch_frame_group_apply(const FrameGroupNormArgs& args, const float* partials,
                                     int partial_splits, cudaStream_t stream);

}  // namespace vaecodec::core::kernels
