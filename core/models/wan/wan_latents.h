#pragma once

#include <vector>

#include <torch/torch.h>

namespace vaecodec::core {

// Note [Latent normalization]
// Wan latents leave encode() normalized, (mu - mean) / std per channel, and decode() undoes it first, with
// the published statistics (or a config's own, Note [Latent statistics in the config]); this is the form
// diffusion pipelines exchange. The arithmetic is in float32 whatever the model's dtype (float64 for a
// float64 model), and the encoder's latents are returned so. Both Wan families hold one of these.
class WanLatentStats {
 public:
  WanLatentStats(const std::vector<float>& mean, const std::vector<float>& std);
  // conv1's output (mu, then the log-variance) -> the normalized mu.
  torch::Tensor normalized(const torch::Tensor& h);
  // Normalized latents -> raw ones in `dtype`, conv2's input.
  torch::Tensor raw(const torch::Tensor& z, torch::ScalarType dtype);

 private:
  // The statistics follow the tensors to their device once (not a host copy per chunk).
  void move_to(const torch::Device& device);

  int64_t channels_;
  torch::Tensor mean_, std_;  // [1, z, 1, 1, 1] float32, on the device last used
};

}  // namespace vaecodec::core
