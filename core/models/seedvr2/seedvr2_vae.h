#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/layers.h"
#include "core/models/seedvr2/seedvr2_blocks.h"
#include "core/trunk.h"
#include "core/vae_model.h"

namespace vaecodec::core {

// The SeedVR2 VAE config (the reference's `s8_c16_t4_inflation_sd3` arguments, as in the golden meta.json).
// Released: block_out_channels 128, 256, 512, 512; 2 resnets per encoder block (decoder blocks: one more);
// 32 norm groups; 16 latent channels; time halved twice.
struct SeedVR2Config {
  std::vector<int64_t> block_out_channels = {128, 256, 512, 512};
  int64_t layers_per_block = 2;
  int64_t norm_num_groups = 32;
  int64_t latent_channels = 16;
  int64_t temporal_scale_num = 2;  // encoder blocks that halve time (the last ones before the final block)
  // The weights' own latent scale (Note [Latent statistics in the config]); unset: the released 0.9152.
  std::optional<double> scaling_factor;

  nlohmann::json to_json() const;
  // Throws for configs vaecodec does not implement (quant convs, no attention, another inflation mode).
  static SeedVR2Config from_json(const nlohmann::json& j);
};

// Encoder: conv_in, down_blocks.N (resnets, downsamplers.0), mid_block, conv_norm_out, SiLU, conv_out
// (-> 2 * latent channels: posterior mean and log-variance).
class SeedVR2Encoder : public CausalModule {
 public:
  explicit SeedVR2Encoder(const SeedVR2Config& config);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;
  // Tiles through time (Note [Norms of tiles through time] in core/split/exact_tiles.h): conv_in and every
  // down block that halves space are the trunk; the last block's resnets, the middle and the head run on the
  // whole frame, at latent resolution. Empty for a config of one block.
  const Trunk& trunk() const { return trunk_; }
  torch::Tensor whole_frame(const torch::Tensor& features, CausalCache& cache);

 private:
  std::shared_ptr<CausalConv3d> conv_in_, conv_out_;
  std::shared_ptr<CausalSequence> down_blocks_;
  std::vector<std::shared_ptr<SeedVR2Stage>> stages_;  // down_blocks_'s
  std::shared_ptr<SeedVR2MidBlock> mid_block_;
  std::shared_ptr<FrameGroupNorm> conv_norm_out_;
  Trunk trunk_;
};

// Decoder: conv_in, mid_block, up_blocks.N (resnets, upsamplers.0), conv_norm_out, SiLU, conv_out. Output
// unclamped.
class SeedVR2Decoder : public CausalModule {
 public:
  explicit SeedVR2Decoder(const SeedVR2Config& config);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;
  // Tiles through time: conv_in, the middle and the first up block's resnets run on the whole frame, at
  // latent resolution; from its upsampler on, the up path and the head are the trunk.
  const Trunk& trunk() const { return trunk_; }
  torch::Tensor whole_frame(const torch::Tensor& z, CausalCache& cache);

 private:
  std::shared_ptr<CausalConv3d> conv_in_, conv_out_;
  std::shared_ptr<SeedVR2MidBlock> mid_block_;
  std::shared_ptr<CausalSequence> up_blocks_;
  std::vector<std::shared_ptr<SeedVR2Stage>> stages_;  // up_blocks_'s
  std::shared_ptr<FrameGroupNorm> conv_norm_out_;
  std::shared_ptr<SeedVR2Head> head_;  // conv_norm_out_ and conv_out_ as a trunk block
  Trunk trunk_;
};

// Note [SeedVR2 latents]
// encode() returns the posterior mean (the first half of the encoder's channels) unscaled, in float32
// (float64 for a float64 model), and decode() takes such raw latents. SeedVR2's diffusion model works on raw
// * 0.9152 (ModelInfo::latent_scale); the scaling belongs to whoever exchanges latents with it.
class SeedVR2Vae : public VaeModel {
 public:
  explicit SeedVR2Vae(const SeedVR2Config& config);
  const ModelInfo& info() const override { return info_; }
  torch::Tensor encode_chunk(const torch::Tensor& x, CausalCache& cache) override;
  torch::Tensor decode_chunk(const torch::Tensor& z, CausalCache& cache) override;

  // Recognises a SeedVR2 state dict and reads its config off the tensor shapes. The number of norm groups
  // leaves no trace in the shapes: it is the released 32 (ModelOptions::config can say otherwise).
  static std::optional<SeedVR2Config> detect(const StateDict& tensors);
  // What a model of `config` is (family, latent channels, factors, statistics), without building it.
  static ModelInfo describe(const SeedVR2Config& config);
  int64_t feature_channels(bool encode) const override;

 protected:
  const Trunk* trunk(bool encode) const override;
  torch::Tensor decode_features_chunk(const torch::Tensor& z, CausalCache& cache) override;
  torch::Tensor encode_features_chunk(const torch::Tensor& features, CausalCache& cache) override;

 private:
  torch::Tensor mean_of(const torch::Tensor& moments) const;

  SeedVR2Config config_;
  ModelInfo info_;
  std::shared_ptr<SeedVR2Encoder> encoder_;
  std::shared_ptr<SeedVR2Decoder> decoder_;
};

}  // namespace vaecodec::core
