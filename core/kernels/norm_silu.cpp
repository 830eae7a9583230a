#include "core/kernels/norm_silu.h"

#include <string>

#include <c10/cuda/CUDAStream.h>

#include "core/error.h"
#include "core/kernels/norm_silu_kernel.h"

namespace vaecodec::core::kernels {

namespace {

// Whether index (b, c, t, h, w) lands on the same element offset in a and b (dims of size 1 do not matter).
bool same_layout(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.size(d) > 1 && a.stride(d) != b.stride(d)) return false;
  return true;
}

}  // namespace

bool rms_norm_silu_into(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& out) {
  if (!x.is_cuda() || x.dim() != 5 || out.device() != x.device() || out.scalar_type() != x.scalar_type())
    return false;
  ElementType type;
  switch (x.scalar_type()) {
    case torch::kFloat: type = ElementType::kFloat32; break;
    case torch::kBFloat16: type = ElementType::kBFloat16; break;
    case torch::kHalf: type = ElementType::kFloat16; break;
    default: return false;
  }
  const bool channels_last = x.is_contiguous(torch::MemoryFormat::ChannelsLast3d) && x.size(1) > 1;
  if (!channels_last && !x.is_contiguous()) return false;
  if (!same_layout(x, out)) return false;
  const int64_t batch = x.size(0), channels = x.size(1), spatial = x.numel() / std::max<int64_t>(1, batch * channels);
  if (channels_last && channels > 1024) return false;
  auto g = gamma.to(torch::kFloat).contiguous().reshape({channels});
  const auto stream = c10::cuda::getCurrentCUDAStream(x.device().index());
  const cudaError_t err = launch_rms_norm_silu(x.data_ptr(), g.data_ptr<float>(), out.data_ptr(), type, batch,
                                               channels, spatial, channels_last, stream.stream());
  if (err != cudaSuccess) throw Error(std::string("RMSNorm+SiLU kernel launch failed: ") + cudaGetErrorString(err));
  return true;
}

std::optional<torch::Tensor> rms_norm_silu(const torch::Tensor& x, const torch::Tensor& gamma) {
  if (!x.is_cuda()) return std::nullopt;
  auto y = torch::empty_like(x);  // keeps x's memory format
  if (!rms_norm_silu_into(x, gamma, y)) return std::nullopt;
  return y;
}

}  // namespace vaecodec::core::kernels
