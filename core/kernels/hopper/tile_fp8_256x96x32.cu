// The 256x96x32 tile of the Hopper convolution (hopper_conv.cuh) with e4m3 inputs (Note [FP8 convolutions] in
// core/kernels/conv3d.cpp).
#include "core/kernels/hopper/hopper_conv.cuh"

namespace vaecodec::core::kernels::hopper {
template cudaError_t run_tile<256, 96, 32, true>(const Conv3dProblem&, cudaStream_t);
}  // namespace vaecodec::core::kernels::hopper
