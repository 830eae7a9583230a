#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "core/kernels/element_type.h"

namespace vaecodec::core::kernels {

// y = silu(v / max(||v||, 1e-12) * sqrt(C) * gamma) with v = x + bias (bias may be null), norm over C;
// with mean_eps >= 0 LTX-2's form instead, y = silu(v * rsqrt(mean_c(v^2) + mean_eps) * gamma) (Note [Two RMS
// norms] in norm_silu_kernel.cu); gamma null: 1. Without the SiLU when !with_silu. `channels_last`: C is the
// innermost axis (voxel v, channel c at v * C + c); otherwise planar per batch item (b, c, s at (b * C + c) *
// S + s). With `tail`, the voxels from `tail_from` on are written there as well, packed (a causal buffer's
// last frames, kept as the next chunk's history: Note [History written by the norm] in core/layers.cpp); only
// the vectorised channels-last kernel does that: otherwise cudaErrorInvalidValue and nothing is written. With
// `fp8_scale` (a float on the device) y and tail are e4m3, each value multiplied by *fp8_scale and rounded
// with saturation (Note [FP8 convolutions] in core/kernels/conv3d.cpp); only the vectorised channels-last
// kernel does that.
cudaError_t launch_rms_norm_silu(const void* x, const float* gamma, const float* bias, void* y,
                                 ElementType type, int64_t batch, int64_t channels, int64_t spatial,
                                 bool channels_last, float mean_eps, bool with_silu, void* tail,
                                 int64_t tail_from, const float* fp8_scale, cudaStream_t stream);

// y += s + bias (bias per channel, may be null) over `elements` channels-last elements of C channels, in
// float32, rounded once. y and s: 16-byte aligned, C a multiple of 16 bytes' worth of elements; otherwise
// cudaErrorInvalidValue and nothing is written.
cudaError_t launch_add_residual(void* y, const void* s, const float* bias, ElementType type, int64_t elements,
                                int64_t channels, int processors, cudaStream_t stream);

}  // namespace vaecodec::core::kernels
