// The 256x96x64 tile of the Hopper convolution (hopper_conv.cuh).
#include "core/kernels/hopper/hopper_conv.cuh"

namespace vaecodec::core::kernels::hopper {
template cudaError_t run_tile<256, 96, 64, false>(const Conv3dProblem&, cudaStream_t);
}  // namespace vaecodec::core::kernels::hopper
