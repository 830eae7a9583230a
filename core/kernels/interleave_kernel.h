#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "core/kernels/element_type.h"

namespace vaecodec::core::kernels {

// The upsampler's last step (Note [Upsampling on the input grid] in core/models/wan/wan_blocks.cpp): phases
// is [frames, height + 1, width + 1, 4 * C] and out [frames, 2 * height, 2 * width, C], both contiguous
// channels-last; out[f, 2i + a, 2j + b, c] = phases[f, i + a, j + b, (2a + b) * C + c] + bias[c] (bias may be
// null). cudaErrorInvalidValue (nothing written) unless C is a multiple of 16 bytes' worth of elements and
// both pointers are 16-byte aligned.
cudaError_t launch_interleave_phases(const void* phases, const float* bias, void* out, ElementType type,
                                     int64_t frames, int64_t height, int64_t width, int64_t channels,
                                     int processors, cudaStream_t stream);

}  // namespace vaecodec::core::kernels
