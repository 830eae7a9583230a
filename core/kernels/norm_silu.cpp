#include "core/kernels/norm_silu.h"

#include <string>

#include <c10/cuda/CUDAStream.h>

#include "core/error.h"
#include "core/kernels/norm_silu_kernel.h"

namespace vaecodec::core::kernels {

std::optional<torch::Tensor> rms_norm_silu(const torch::Tensor& x, const torch::Tensor& gamma) {
  if (!x.is_cuda() || x.dim() != 5) return std::nullopt;
  ElementType type;
  switch (x.scalar_type()) {
    case torch::kFloat: type = ElementType::kFloat32; break;
    case torch::kBFloat16: type = ElementType::kBFloat16; break;
    case torch::kHalf: type = ElementType::kFloat16; break;
    default: return std::nullopt;
  }
  const bool channels_last = x.is_contiguous(torch::MemoryFormat::ChannelsLast3d) && x.size(1) > 1;
  if (!channels_last && !x.is_contiguous()) return std::nullopt;
  const int64_t batch = x.size(0), channels = x.size(1), spatial = x.numel() / std::max<int64_t>(1, batch * channels);
  if (channels_last && channels > 1024) return std::nullopt;
  auto g = gamma.to(torch::kFloat).contiguous().reshape({channels});
  auto y = torch::empty_like(x);  // keeps x's memory format
  const auto stream = c10::cuda::getCurrentCUDAStream(x.device().index());
  const cudaError_t err = launch_rms_norm_silu(x.data_ptr(), g.data_ptr<float>(), y.data_ptr(), type, batch, channels,
                                               spatial, channels_last, stream.stream());
  if (err != cudaSuccess) throw Error(std::string("RMSNorm+SiLU kernel launch failed: ") + cudaGetErrorString(err));
  return y;
}

}  // namespace vaecodec::core::kernels
