#include "core/models/wan/wan_latents.h"

namespace vaecodec::core {

WanLatentStats::WanLatentStats(const std::vector<float>& mean, const std::vector<float>& std)
    : channels_(static_cast<int64_t>(mean.size())),
      mean_(torch::tensor(mean).reshape({1, channels_, 1, 1, 1})),
      std_(torch::tensor(std).reshape({1, channels_, 1, 1, 1})) {}

void WanLatentStats::move_to(const torch::Device& device) {
  if (mean_.device() == device) return;
  mean_ = mean_.to(device);
  std_ = std_.to(device);
}

torch::Tensor WanLatentStats::normalized(const torch::Tensor& h) {
  move_to(h.device());
  auto mu = h.narrow(1, 0, channels_).to(torch::promote_types(h.scalar_type(), torch::kFloat));
  return (mu - mean_) / std_;
}

torch::Tensor WanLatentStats::raw(const torch::Tensor& z, torch::ScalarType dtype) {
  move_to(z.device());
  return (z.to(torch::promote_types(dtype, torch::kFloat)) * std_ + mean_).to(dtype);
}

}  // namespace vaecodec::core
