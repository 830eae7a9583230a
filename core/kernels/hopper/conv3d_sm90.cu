#include "core/kernels/conv3d_sm90.h"

// Built with CUTLASS's Hopper collectives only for sm_90a (core/kernels/hopper/CMakeLists.txt); without them
// the entry points below say so and the engine keeps cuDNN.
#if defined(VAECODEC_HAVE_CUTLASS)

namespace vaecodec::core::kernels {
namespace hopper {
// Instantiated one per file (tile_*.cu, made by CMake from VAECODEC_CONV_TILES); declared here without
// CUTLASS's headers.
template <int TileM, int TileN, int TileK, bool Fp8>
cudaError_t run_tile(const Conv3dProblem& problem, cudaStream_t stream);
}  // namespace hopper

bool conv3d_sm90_built() {
  return true;
}

cudaError_t launch_conv3d_sm90(const Conv3dProblem& problem, ConvTile tile, cudaStream_t stream) {
  switch (tile) {
#define VAECODEC_TILE_CASE(e, m, n, k, fp8, name) \
  case ConvTile::e:                               \
    return hopper::run_tile<m, n, k, fp8>(problem, stream);
    VAECODEC_CONV_TILES(VAECODEC_TILE_CASE)
#undef VAECODEC_TILE_CASE
    default:
      return cudaErrorNotSupported;
  }
}

}  // namespace vaecodec::core::kernels

#else

namespace vaecodec::core::kernels {

bool conv3d_sm90_built() {
  return false;
}

cudaError_t launch_conv3d_sm90(const Conv3dProblem&, ConvTile, cudaStream_t) {
  return cudaErrorNotSupported;
}

}  // namespace vaecodec::core::kernels

#endif

namespace vaecodec::core::kernels {

const char* conv_tile_name(ConvTile tile) {
  switch (tile) {
#define VAECODEC_TILE_NAME(e, m, n, k, fp8, name) \
  case ConvTile::e:                               \
    return name;
    VAECODEC_CONV_TILES(VAECODEC_TILE_NAME)
#undef VAECODEC_TILE_NAME
    default:
      return "none";
  }
}

bool conv_tile_fp8(ConvTile tile) {
  switch (tile) {
#define VAECODEC_TILE_FP8(e, m, n, k, fp8, name) \
  case ConvTile::e:                              \
    return fp8;
    VAECODEC_CONV_TILES(VAECODEC_TILE_FP8)
#undef VAECODEC_TILE_FP8
    default:
      return false;
  }
}

}  // namespace vaecodec::core::kernels
