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

// The tiles compiled (M output pixels x N output channels x K reduction slice per step), one line each:
// X(ENUM, M, N, K, FP8, NAME). ConvTile, the names, the launcher's switch and one instance file per tile
// (core/kernels/hopper/CMakeLists.txt reads these lines) are made from this list alone. The launcher refuses
// a problem whose channels a tile does not divide. The fp8 tiles take e4m3 activations and weights
// (Note [FP8 convolutions] in core/kernels/conv3d.cpp).
// clang-format off
#define VAECODEC_CONV_TILES(X)                               \
  X(k256x96x32, 256, 96, 32, false, "256x96x32")             \
  X(k256x96x64, 256, 96, 64, false, "256x96x64")             \
  X(k128x192x64, 128, 192, 64, false, "128x192x64")          \
  X(k128x128x64, 128, 128, 64, false, "128x128x64")          \
  X(k128x32x32, 128, 32, 32, false, "128x32x32")             \
  X(kFp8_256x96x64, 256, 96, 64, true, "256x96x64 fp8")      \
  X(kFp8_128x192x64, 128, 192, 64, true, "128x192x64 fp8")   \
  X(kFp8_128x128x64, 128, 128, 64, true, "128x128x64 fp8")   \
  X(kFp8_128x192x128, 128, 192, 128, true, "128x192x128 fp8") \
  X(kFp8_256x96x32, 256, 96, 32, true, "256x96x32 fp8")
// clang-format on

enum class ConvTile {
#define VAECODEC_TILE_ENUM(e, m, n, k, fp8, name) e,
  VAECODEC_CONV_TILES(VAECODEC_TILE_ENUM)
#undef VAECODEC_TILE_ENUM
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
