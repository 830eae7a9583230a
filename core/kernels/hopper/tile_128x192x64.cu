// The 128x192x64 tile of the Hopper convolution (hopper_conv.cuh).
#include "core/kernels/hopper/hopper_conv.cuh"

namespace vaecodec::core::kernels::hopper {
template cudaError_t run_tile<128, 192, 64, false>(const Conv3dProblem&, cudaStream_t);
}  // namespace vaecodec::core::kernels::hopper
