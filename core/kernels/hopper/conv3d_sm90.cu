#include "core/kernels/conv3d_sm90.h"

#include <iterator>

// Built with CUTLASS's Hopper collectives only for sm_90a (core/kernels/hopper/CMakeLists.txt); without them
// the entry points below say so and the engine keeps cuDNN.
#if defined(VAECODEC_HAVE_CUTLASS)

namespace vaecodec::core::kernels {
namespace hopper {
// Instantiated one per file (tile_*.cu); declared here without CUTLASS's headers.
template <int TileM, int TileN, int TileK>
cudaError_t run_tile(const Conv3dProblem& problem, cudaStream_t stream);
}  // namespace hopper

bool conv3d_sm90_built() {
  return true;
}

cudaError_t launch_conv3d_sm90(const Conv3dProblem& problem, ConvTile tile, cudaStream_t stream) {
  switch (tile) {
    case ConvTile::k256x96x32:
      return hopper::run_tile<256, 96, 32>(problem, stream);
    case ConvTile::k256x96x64:
      return hopper::run_tile<256, 96, 64>(problem, stream);
    case ConvTile::k128x192x64:
      return hopper::run_tile<128, 192, 64>(problem, stream);
    case ConvTile::k128x128x64:
      return hopper::run_tile<128, 128, 64>(problem, stream);
    case ConvTile::k128x32x32:
      return hopper::run_tile<128, 32, 32>(problem, stream);
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
  static constexpr const char* kNames[] = {"256x96x32", "256x96x64", "128x192x64", "128x128x64", "128x32x32"};
  static_assert(std::size(kNames) == static_cast<size_t>(ConvTile::kCount));
  const auto i = static_cast<size_t>(tile);
  return i < std::size(kNames) ? kNames[i] : "none";
}

}  // namespace vaecodec::core::kernels
