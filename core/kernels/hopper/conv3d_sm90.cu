#include "core/kernels/conv3d_sm90.h"

#include <iterator>

// Built with CUTLASS's Hopper collectives only for sm_90a (core/kernels/hopper/CMakeLists.txt); without them
// the entry points below say so and the engine keeps cuDNN.
#if defined(VAECODEC_HAVE_CUTLASS)

namespace vaecodec::core::kernels {
namespace hopper {
// Instantiated one per file (tile_*.cu); declared here without CUTLASS's headers.
template <int TileM, int TileN, int TileK, bool Fp8>
cudaError_t run_tile(const Conv3dProblem& problem, cudaStream_t stream);
}  // namespace hopper

bool conv3d_sm90_built() {
  return true;
}

cudaError_t launch_conv3d_sm90(const Conv3dProblem& problem, ConvTile tile, cudaStream_t stream) {
  switch (tile) {
    case ConvTile::k256x96x32:
      return hopper::run_tile<256, 96, 32, false>(problem, stream);
    case ConvTile::k256x96x64:
      return hopper::run_tile<256, 96, 64, false>(problem, stream);
    case ConvTile::k128x192x64:
      return hopper::run_tile<128, 192, 64, false>(problem, stream);
    case ConvTile::k128x128x64:
      return hopper::run_tile<128, 128, 64, false>(problem, stream);
    case ConvTile::k128x32x32:
      return hopper::run_tile<128, 32, 32, false>(problem, stream);
    case ConvTile::kFp8_256x96x64:
      return hopper::run_tile<256, 96, 64, true>(problem, stream);
    case ConvTile::kFp8_128x192x64:
      return hopper::run_tile<128, 192, 64, true>(problem, stream);
    case ConvTile::kFp8_128x128x64:
      return hopper::run_tile<128, 128, 64, true>(problem, stream);
    case ConvTile::kFp8_128x192x128:
      return hopper::run_tile<128, 192, 128, true>(problem, stream);
    case ConvTile::kFp8_256x96x32:
      return hopper::run_tile<256, 96, 32, true>(problem, stream);
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
  // In ConvTile's order.
  static constexpr const char* kNames[] = {
      "256x96x32",     "256x96x64",      "128x192x64",     "128x128x64",      "128x32x32",
      "256x96x64 fp8", "128x192x64 fp8", "128x128x64 fp8", "128x192x128 fp8", "256x96x32 fp8"};
  static_assert(std::size(kNames) == static_cast<size_t>(ConvTile::kCount));
  const auto i = static_cast<size_t>(tile);
  return i < std::size(kNames) ? kNames[i] : "none";
}

bool conv_tile_fp8(ConvTile tile) {
  return tile >= ConvTile::kFp8_256x96x64 && tile < ConvTile::kCount;
}

}  // namespace vaecodec::core::kernels
