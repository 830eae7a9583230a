#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "core/models/ltx2/ltx2_blocks.h"
#include "core/models/ltx2/ltx2_config.h"
#include "core/vae_model.h"

namespace vaecodec::core {

// Encoder (causal): patchify, conv_in, down_blocks.N (res_x and downsamplers alternating), pixel norm, SiLU,
// conv_out (-> latent channels + one shared log-variance).
class LTX2Encoder : public torch::nn::Module {
 public:
  explicit LTX2Encoder(const LTX2Config& config);
  // x: [B, 3, t, H, W] -> the posterior mean [B, z, t', H/f, W/f] (raw, not normalised).
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache);

 private:
  std::shared_ptr<LTX2Conv> conv_in_, conv_out_;
  std::vector<std::shared_ptr<LTX2Module>> blocks_;
  int64_t patch_size_, latent_channels_;
};

// Decoder (looks one frame ahead at every conv: Note [LTX-2 decoder lag]): conv_in, up_blocks.N (latent side
// first), pixel norm, SiLU, conv_out, unpatchify. Output unclamped.
class LTX2Decoder : public torch::nn::Module {
 public:
  explicit LTX2Decoder(const LTX2Config& config);
  // z: raw latents [B, z, n, h, w] -> the frames this chunk settles, [B, 3, t, h*f, w*f]; with `end`, also
  // every frame held back.
  torch::Tensor forward(const torch::Tensor& z, CausalCache& cache, bool end);

 private:
  std::shared_ptr<LTX2Conv> conv_in_, conv_out_;
  std::vector<std::shared_ptr<LTX2Module>> blocks_;
  int64_t patch_size_;
};

// Note [LTX-2 latent statistics]
// The original encoder normalises its mean per channel, (mu - mean) / std, with the checkpoint's
// per_channel_statistics (mean-of-means, std-of-means), and its decoder undoes it; vaecodec's encode() and
// decode() do the same, so LTX-2 latents are exchanged normalised, as Wan's. Detection reads the two tensors
// into the config (latents_mean, latents_std: diffusers' names, which a diffusers folder's config.json may
// replace), so that ModelInfo and latent files carry them; a model built from a config without them uses
// its loaded tensors. The files' other statistics (channel, mean-of-stds, ...) are unused and dropped on
// loading.
class LTX2Vae : public VaeModel {
 public:
  explicit LTX2Vae(const LTX2Config& config);
  const ModelInfo& info() const override { return info_; }

  static std::optional<LTX2Config> detect(const StateDict& tensors) { return detect_ltx2(tensors); }
  static ModelInfo describe(const LTX2Config& config);

 protected:
  torch::Tensor encode_chunk(const torch::Tensor& x, CausalCache& cache) override;
  torch::Tensor decode_chunk(const torch::Tensor& z, CausalCache& cache) override;
  torch::Tensor decode_end_chunk(CausalCache& cache) override;

 private:
  // The per-channel statistics as [1, z, 1, 1, 1] in `like`'s dtype and device.
  std::pair<torch::Tensor, torch::Tensor> statistics(const torch::Tensor& like) const;

  LTX2Config config_;
  ModelInfo info_;
  std::shared_ptr<LTX2Encoder> encoder_;
  std::shared_ptr<LTX2Decoder> decoder_;
  torch::Tensor mean_, std_;  // per_channel_statistics.mean-of-means, std-of-means [z]
};

}  // namespace vaecodec::core
