#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace vaecodec::core::kernels {

enum class ElementType { kFloat32, kBFloat16, kFloat16 };

// y = silu(x / max(||x||, 1e-12) * sqrt(C) * gamma), norm over C. `channels_last`: C is the innermost axis
// (voxel v, channel c at v * C + c); otherwise planar per batch item (b, c, s at (b * C + c) * S + s).
cudaError_t launch_rms_norm_silu(const void* x, const float* gamma, void* y, ElementType type, int64_t batch,
                                 int64_t channels, int64_t spatial, bool channels_last, cudaStream_t stream);

}  // namespace vaecodec::core::kernels
