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

// The Wan2.2 VAE config (the reference's WanVAE_ arguments). Released (TI2V-5B): dim 160, dec_dim 256, z 48.
struct Wan22Config : WanConfig {
  Wan22Config() {
    family = "wan2.2-vae";
    dim = 160;
    dec_dim = 256;
    z_dim = 48;
    patch_size = 2;
  }
  explicit Wan22Config(const WanConfig& c) : WanConfig(c) {}
  static Wan22Config from_json(const nlohmann::json& j) {
    return Wan22Config(WanConfig::from_json(j, Wan22Config()));
  }
};

// Note [Wan2.2 stage shortcuts]
// Every Wan2.2 stage adds a parameter-free path to its blocks' output.
// Encoder (AvgDown3D): each output voxel is a mean over the input voxels it covers. The input is cut into
//   blocks of factor_t frames x factor_s x factor_s pixels; a block's C * factor values, ordered (channel,
//   frame, row, column), are split into `out` runs of equal length and each run is averaged. On the first
//   chunk frame 0 is preceded by factor_t - 1 zero frames (the reference encodes frame 0 alone and pads it at
//   the front), so frame 0 is averaged with zeros and later frames pair as (1, 2), (3, 4), ...; every later
//   chunk must then hold a multiple of factor_t frames.
// Decoder (DupUp3D): the inverse layout: every input channel repeated, the (channel, frame, row, column) runs
//   unfolded into blocks of factor_t frames x factor_s x factor_s pixels. On the first chunk the first
//   factor_t - 1 output frames are dropped, as the main path does not double frame 0.
// Only the frame-0 flags live in the run's cache; nothing else carries across chunks.

// AvgDown3D. Takes a cache slot (for its frame-0 flag) only when it halves time.
class Wan22AvgDown : public CausalModule {
 public:
  Wan22AvgDown(int64_t in, int64_t out, int64_t factor_t, int64_t factor_s);
  // x: [B, in, T, H, W] -> [B, out, T', H / factor_s, W / factor_s]
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;

 private:
  int64_t out_, factor_t_, factor_s_, group_;
};

// DupUp3D. Takes a cache slot (for its frame-0 flag) only when it doubles time.
class Wan22DupUp : public CausalModule {
 public:
  Wan22DupUp(int64_t in, int64_t out, int64_t factor_t, int64_t factor_s);
  // x: [B, in, T, h, w] -> [B, out, T * factor_t, h * factor_s, w * factor_s], less factor_t - 1 frames on
  // the first chunk
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;

 private:
  int64_t out_, factor_t_, factor_s_, repeats_;
};

// Down_ResidualBlock: residual blocks and a resampler (keys downsamples.M), plus the AvgDown3D shortcut.
class Wan22DownStage : public CausalModule {
 public:
  Wan22DownStage(int64_t in, int64_t out, int64_t res_blocks, bool down_time, bool down_space);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;
  // The blocks' (the averaging shortcut reads only the 2x2 blocks its output covers).
  Reach reach() const override { return downsamples_->reach(); }

 private:
  std::shared_ptr<CausalSequence> downsamples_;
  std::shared_ptr<Wan22AvgDown> shortcut_;
};

// Up_ResidualBlock: residual blocks and a resampler (keys upsamples.M), plus DupUp3D where it upsamples.
class Wan22UpStage : public CausalModule {
 public:
  Wan22UpStage(int64_t in, int64_t out, int64_t res_blocks, bool up_time, bool up_space);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;
  // The blocks' (the duplicating shortcut is per pixel).
  Reach reach() const override { return upsamples_->reach(); }

 private:
  std::shared_ptr<CausalSequence> upsamples_;
  std::shared_ptr<Wan22DupUp> shortcut_;  // null for the last stage
};

// Encoder: conv1 (patchified input), downsamples.N (stages), middle, head.
class Wan22Encoder : public CausalModule {
 public:
  explicit Wan22Encoder(const Wan22Config& config);
  // x: [B, 3 * p * p, T, H / p, W / p] -> [B, 2z, T', H / 16, W / 16] (released p = 2)
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;
  // Exact tiles (Note [Exact tiles] in core/trunk.h): conv1 and the stages are the trunk; the middle and the
  // head run on the whole frame.
  const Trunk& trunk() const { return trunk_; }
  torch::Tensor whole_frame(const torch::Tensor& features, CausalCache& cache);

 private:
  std::shared_ptr<CausalConv3d> conv1_;
  std::shared_ptr<CausalSequence> downsamples_, middle_;
  std::shared_ptr<WanHead> head_;
  Trunk trunk_;
};

// Decoder: conv1, middle, upsamples.N (stages), head (to the patchified 3 * p * p channels); unclamped.
class Wan22Decoder : public CausalModule {
 public:
  explicit Wan22Decoder(const Wan22Config& config);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;
  // Exact tiles: conv1 and the middle run on the whole frame; the stages and the head are the trunk.
  torch::Tensor whole_frame(const torch::Tensor& x, CausalCache& cache);
  const Trunk& trunk() const { return trunk_; }

 private:
  std::shared_ptr<CausalConv3d> conv1_;
  std::shared_ptr<CausalSequence> middle_, upsamples_;
  std::shared_ptr<WanHead> head_;
  Trunk trunk_;
};

// The whole VAE: patchify, encoder, conv1 (2z -> 2z: mean and log-variance), conv2 (z -> z), decoder,
// unpatchify; latents normalized per channel as Wan2.1's (Note [Latent normalization] in
// core/models/wan/wan_latents.h).
class Wan22Vae : public VaeModel {
 public:
  explicit Wan22Vae(const Wan22Config& config);
  const ModelInfo& info() const override { return info_; }
  torch::Tensor encode_chunk(const torch::Tensor& x, CausalCache& cache) override;
  torch::Tensor decode_chunk(const torch::Tensor& z, CausalCache& cache) override;
  const Trunk* trunk(bool encode) const override { return encode ? &encoder_->trunk() : &decoder_->trunk(); }
  torch::Tensor decode_features_chunk(const torch::Tensor& z, CausalCache& cache) override;
  torch::Tensor encode_features_chunk(const torch::Tensor& features, CausalCache& cache) override;
  torch::Tensor to_trunk_input(const torch::Tensor& x) const override;
  int64_t feature_channels(bool encode) const override {
    return (encode ? config_.dim : config_.dec_dim) * config_.dim_mult.back();
  }
  torch::Tensor from_trunk_output(const torch::Tensor& y) const override;

  // Recognises a Wan2.2 state dict (original layout) and reads its config from the tensor shapes.
  static std::optional<Wan22Config> detect(const StateDict& tensors);
  // What a model of `config` is (family, latent channels, factors, statistics), without building it.
  static ModelInfo describe(const Wan22Config& config);

 private:
  Wan22Config config_;
  ModelInfo info_;
  std::shared_ptr<Wan22Encoder> encoder_;
  std::shared_ptr<Wan22Decoder> decoder_;
  std::shared_ptr<CausalConv3d> conv1_, conv2_;
  std::optional<WanLatentStats> latents_;  // Note [Latent normalization]
};

// The 48 published per-channel latent statistics of the Wan2.2 VAE.
const std::vector<float>& wan22_latent_mean();
const std::vector<float>& wan22_latent_std();

}  // namespace vaecodec::core
