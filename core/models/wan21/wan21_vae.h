#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/layers.h"
#include "core/models/wan/wan_blocks.h"
#include "core/models/wan/wan_config.h"
#include "core/models/wan/wan_latents.h"
#include "core/vae_model.h"

namespace vaecodec::core {

// The Wan2.1 VAE config (the reference's WanVAE_ arguments). Released: dim 96, z 16.
struct Wan21Config : WanConfig {
  Wan21Config() { family = "wan2.1-vae"; }
  explicit Wan21Config(const WanConfig& c) : WanConfig(c) {}
  static Wan21Config from_json(const nlohmann::json& j) {
    return Wan21Config(WanConfig::from_json(j, Wan21Config()));
  }
};

// Encoder: conv1, downsamples.N (residual blocks and resamplers), middle (RB, attention, RB), head.
class Wan21Encoder : public CausalModule {
 public:
  Wan21Encoder(const Wan21Config& config, int64_t out_channels);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;
  // Exact tiles (Note [Exact tiles] in core/trunk.h): conv1 and the down path are the trunk; the middle and
  // the head run on the whole frame at latent resolution.
  const Trunk& trunk() const { return trunk_; }
  torch::Tensor whole_frame(const torch::Tensor& features, CausalCache& cache);

 private:
  std::shared_ptr<CausalConv3d> conv1_;
  std::shared_ptr<CausalSequence> downsamples_, middle_;
  std::shared_ptr<WanHead> head_;
  Trunk trunk_;
};

// Decoder: conv1, middle, upsamples.N, head. Output unclamped.
class Wan21Decoder : public CausalModule {
 public:
  explicit Wan21Decoder(const Wan21Config& config);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;
  // Exact tiles: conv1 and the middle run on the whole frame; the up path and the head are the trunk.
  torch::Tensor whole_frame(const torch::Tensor& x, CausalCache& cache);
  const Trunk& trunk() const { return trunk_; }

 private:
  std::shared_ptr<CausalConv3d> conv1_;
  std::shared_ptr<CausalSequence> middle_, upsamples_;
  std::shared_ptr<WanHead> head_;
  Trunk trunk_;
};

// The whole VAE: encoder, conv1 (32 -> 32: mean and log-variance), conv2 (z -> z), decoder; the per-channel
// latent normalization (Note [Latent normalization]).
class Wan21Vae : public VaeModel {
 public:
  explicit Wan21Vae(const Wan21Config& config);
  const ModelInfo& info() const override { return info_; }
  torch::Tensor encode_chunk(const torch::Tensor& x, CausalCache& cache) override;
  torch::Tensor decode_chunk(const torch::Tensor& z, CausalCache& cache) override;
  const Trunk* trunk(bool encode) const override { return encode ? &encoder_->trunk() : &decoder_->trunk(); }
  torch::Tensor decode_features_chunk(const torch::Tensor& z, CausalCache& cache) override;
  torch::Tensor encode_features_chunk(const torch::Tensor& features, CausalCache& cache) override;
  int64_t feature_channels(bool) const override { return config_.dim * config_.dim_mult.back(); }

  // Recognises a Wan2.1 state dict (original layout) and reads its config from the tensor shapes.
  static std::optional<Wan21Config> detect(const StateDict& tensors);
  // What a model of `config` is (family, latent channels, factors, statistics), without building it.
  static ModelInfo describe(const Wan21Config& config);

 private:
  Wan21Config config_;
  ModelInfo info_;
  std::shared_ptr<Wan21Encoder> encoder_;
  std::shared_ptr<Wan21Decoder> decoder_;
  std::shared_ptr<CausalConv3d> conv1_, conv2_;
  std::optional<WanLatentStats> latents_;  // Note [Latent normalization]
};

// The 16 published per-channel latent statistics of the Wan2.1 VAE.
const std::vector<float>& wan21_latent_mean();
const std::vector<float>& wan21_latent_std();

}  // namespace vaecodec::core
