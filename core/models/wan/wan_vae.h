#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "core/layers.h"
#include "core/models/wan/wan_blocks.h"
#include "core/models/wan/wan_config.h"
#include "core/models/wan/wan_latents.h"
#include "core/vae_model.h"

namespace vaecodec::core {

// Note [One Wan skeleton]
// The Wan2.1 and Wan2.2 VAEs are one skeleton: the encoder runs conv1, its down path and a middle (residual
// block, attention, residual block) and a head; conv1 (2z -> 2z) gives the mean and log-variance, conv2
// (z -> z) leads into the decoder, which runs conv1, a middle, its up path and a head; latents are normalized
// per channel (Note [Latent normalization] in core/models/wan/wan_latents.h). What a family brings is its
// paths' blocks - Wan2.1 lists residual blocks and resamplers flat, Wan2.2 nests them in stages with
// parameter-free shortcuts (Note [Wan2.2 stage shortcuts]) - their widths, and the patch size: Wan2.2 folds
// 2x2 pixels into channels before the encoder and unfolds them after the decoder (Note [Wan2.2 patchify]).
// For exact tiles (Note [Exact tiles] in core/trunk.h) conv1 and the down path are the encoder's trunk, the
// up path and the head the decoder's; the middles and conv1/conv2 run on the whole frame.

// The blocks and widths a family gives the skeleton.
struct WanPaths {
  std::shared_ptr<CausalSequence> down;     // the encoder's path, keys encoder.downsamples.N
  std::shared_ptr<CausalSequence> up;       // the decoder's path, keys decoder.upsamples.N
  int64_t encoder_in = 0, encoder_out = 0;  // the down path's widths at its ends
  int64_t decoder_in = 0, decoder_out = 0;  // the up path's
};

// Encoder: conv1, downsamples.N, middle, head (to 2z channels).
class WanEncoder : public CausalModule {
 public:
  WanEncoder(int64_t in_channels, const WanPaths& paths, int64_t out_channels);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;
  const Trunk& trunk() const { return trunk_; }
  // The middle and the head: the part that runs on the whole frame, from the trunk's features.
  torch::Tensor whole_frame(const torch::Tensor& features, CausalCache& cache);

 private:
  std::shared_ptr<CausalConv3d> conv1_;
  std::shared_ptr<CausalSequence> downsamples_, middle_;
  std::shared_ptr<WanHead> head_;
  Trunk trunk_;
};

// Decoder: conv1, middle, upsamples.N, head (to out_channels). Output unclamped.
class WanDecoder : public CausalModule {
 public:
  WanDecoder(int64_t z_dim, const WanPaths& paths, int64_t out_channels);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;
  // conv1 and the middle: the part that runs on the whole frame, before the trunk.
  torch::Tensor whole_frame(const torch::Tensor& x, CausalCache& cache);
  const Trunk& trunk() const { return trunk_; }

 private:
  std::shared_ptr<CausalConv3d> conv1_;
  std::shared_ptr<CausalSequence> middle_, upsamples_;
  std::shared_ptr<WanHead> head_;
  Trunk trunk_;
};

// The whole VAE over a family's paths: [patchify,] encoder, conv1, conv2, decoder[, unpatchify].
class WanVae : public VaeModel {
 public:
  const ModelInfo& info() const override { return info_; }
  torch::Tensor encode_chunk(const torch::Tensor& x, CausalCache& cache) override;
  torch::Tensor decode_chunk(const torch::Tensor& z, CausalCache& cache) override;
  const Trunk* trunk(bool encode) const override { return encode ? &encoder_->trunk() : &decoder_->trunk(); }
  torch::Tensor decode_features_chunk(const torch::Tensor& z, CausalCache& cache) override;
  torch::Tensor encode_features_chunk(const torch::Tensor& features, CausalCache& cache) override;
  torch::Tensor to_trunk_input(const torch::Tensor& x) const override;
  torch::Tensor from_trunk_output(const torch::Tensor& y) const override;
  int64_t feature_channels(bool encode) const override { return encode ? encoder_out_ : decoder_in_; }

 protected:
  // `info` describes the model of `config`; `paths` are its family's blocks.
  WanVae(const WanConfig& config, ModelInfo info, const WanPaths& paths);

 private:
  ModelInfo info_;
  int64_t patch_;  // 1: none
  int64_t encoder_out_, decoder_in_;
  std::shared_ptr<WanEncoder> encoder_;
  std::shared_ptr<WanDecoder> decoder_;
  std::shared_ptr<CausalConv3d> conv1_, conv2_;
  std::optional<WanLatentStats> latents_;
};

// What a Wan model of `config` is: its family, latent channels, factors (the patch size included) and
// attention widths, and its latent statistics - the config's where it has them, else `released` ones where
// the channel count is theirs, else zero mean and unit deviation.
ModelInfo describe_wan(const WanConfig& config, const std::vector<float>& released_mean,
                       const std::vector<float>& released_std);

}  // namespace vaecodec::core
