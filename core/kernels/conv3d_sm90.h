#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace vaecodec::core::kernels {

// One 3-D convolution for the Hopper kernels (Note [Own convolutions] in core/kernels/conv3d.h): bf16
// activations and weights (or e4m3 on the fp8 tiles), float32 accumulation, bf16 output, cross-correlation,
// one group, no dilation.
struct Conv3dProblem {
  const void* x = nullptr;  // [N, D, H, W, C] in memory: C innermost (stride 1), other strides given
  int64_t n = 0, d = 0, h = 0, w = 0, c = 0;
  int64_t x_stride[4] = {};      // elements between neighbours along N, D, H, W
  const void* weight = nullptr;  // [K, T, R, S, C], packed
  int64_t k = 0, t = 0, r = 0, s = 0;
  const float* bias = nullptr;     // [K], or null
  const float* alpha = nullptr;    // [K]: the fp8 tiles' scale of each output channel's sum; required there
  const void* residual = nullptr;  // [N, Z, P, Q, K], packed, added to the output; or null
  void* y = nullptr;               // [N, Z, P, Q, K], packed
  int pad[3] = {};                 // zero padding on both sides of D, H, W
  int stride[3] = {1, 1, 1};       // along D, H, W
};

// The tiles compiled (M output pixels x N output channels x K reduction slice per step); the launcher
// refuses a problem whose channels a tile does not divide. The fp8 tiles take e4m3 activations and weights
// (Note [FP8 convolutions] in core/kernels/conv3d.cpp).
enum class ConvTile {
  k256x96x32,
  k256x96x64,
  k128x192x64,
  k128x128x64,
  k128x32x32,
  kFp8_256x96x64,
  kFp8_128x192x64,
  kFp8_128x128x64,
  kFp8_128x192x128,
  kFp8_256x96x32,
  kCount
};
const char* conv_tile_name(ConvTile tile);
bool conv_tile_fp8(ConvTile tile);

// Whether this build holds the kernels (CUTLASS found and sm_90a among the architectures).
bool conv3d_sm90_built();

// Runs the convolution on `stream`. cudaErrorNotSupported when the tile does not take the problem (channels,
// alignment, padding limits of the tensor-memory-accelerator's im2col mode) or the build has no kernels;
// nothing is written then.
cudaError_t launch_conv3d_sm90(const Conv3dProblem& problem, ConvTile tile, cudaStream_t stream);

}  // namespace vaecodec::core::kernels
