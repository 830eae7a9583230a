#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/layers.h"
#include "core/models/wan/wan_blocks.h"
#include "core/models/wan/wan_config.h"
#include "core/models/wan/wan_vae.h"

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

// The Wan2.2 VAE: the Wan skeleton (Note [One Wan skeleton] in core/models/wan/wan_vae.h) with paths of
// nested stages and their shortcuts, a decoder of its own width, and 2x2 pixels folded into channels.
class Wan22Vae : public WanVae {
 public:
  explicit Wan22Vae(const Wan22Config& config);

  // Recognises a Wan2.2 state dict (original layout) and reads its config from the tensor shapes.
  static std::optional<Wan22Config> detect(const StateDict& tensors);
  // What a model of `config` is (family, latent channels, factors, statistics), without building it.
  static ModelInfo describe(const Wan22Config& config);
};

// The 48 published per-channel latent statistics of the Wan2.2 VAE.
const std::vector<float>& wan22_latent_mean();
const std::vector<float>& wan22_latent_std();

}  // namespace vaecodec::core
