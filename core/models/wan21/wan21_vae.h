#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/models/wan/wan_config.h"
#include "core/models/wan/wan_vae.h"

namespace vaecodec::core {

// The Wan2.1 VAE config (the reference's WanVAE_ arguments). Released: dim 96, z 16.
struct Wan21Config : WanConfig {
  Wan21Config() { family = "wan2.1-vae"; }
  explicit Wan21Config(const WanConfig& c) : WanConfig(c) {}
  static Wan21Config from_json(const nlohmann::json& j) {
    return Wan21Config(WanConfig::from_json(j, Wan21Config()));
  }
};

// The Wan2.1 VAE: the Wan skeleton (Note [One Wan skeleton] in core/models/wan/wan_vae.h) with flat paths
// of residual blocks, attention where attn_scales asks, and resamplers.
class Wan21Vae : public WanVae {
 public:
  explicit Wan21Vae(const Wan21Config& config);

  // Recognises a Wan2.1 state dict (original layout) and reads its config from the tensor shapes.
  static std::optional<Wan21Config> detect(const StateDict& tensors);
  // What a model of `config` is (family, latent channels, factors, statistics), without building it.
  static ModelInfo describe(const Wan21Config& config);
};

// The 16 published per-channel latent statistics of the Wan2.1 VAE.
const std::vector<float>& wan21_latent_mean();
const std::vector<float>& wan21_latent_std();

}  // namespace vaecodec::core
