// The 128x32x32 tile of the Hopper convolution (hopper_conv.cuh): few output channels (an RGB head, a
// latent projection), padded up to 32 by the caller (Note [Padded channels] in core/kernels/conv3d.cpp).
#include "core/kernels/hopper/hopper_conv.cuh"

namespace vaecodec::core::kernels::hopper {
template cudaError_t run_tile<128, 32, 32, false>(const Conv3dProblem&, cudaStream_t);
}  // namespace vaecodec::core::kernels::hopper
