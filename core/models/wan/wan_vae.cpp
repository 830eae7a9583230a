#include "core/models/wan/wan_vae.h"

#include <algorithm>

#include "core/stage_timer.h"

namespace vaecodec::core {
namespace {

// Note [Wan2.2 patchify]
// Before the encoder every p x p block of pixels is folded into channels,
// `b c f (h q) (w r) -> b (c r q) f h w`: channel (c * p + r) * p + q holds row q, column r of colour c's
// block (the column offset is the slower one). The decoder's 3 * p * p output channels unfold the same way.

// x: [B, C, T, H, W] -> [B, C * p * p, T, H / p, W / p]
torch::Tensor patchify(const torch::Tensor& x, int64_t p) {
  if (p == 1) return x;
  const int64_t b = x.size(0), c = x.size(1), t = x.size(2), h = x.size(3) / p, w = x.size(4) / p;
  return x.reshape({b, c, t, h, p, w, p}).permute({0, 1, 6, 4, 2, 3, 5}).reshape({b, c * p * p, t, h, w});
}

// x: [B, C * p * p, T, h, w] -> [B, C, T, h * p, w * p]
torch::Tensor unpatchify(const torch::Tensor& x, int64_t p) {
  if (p == 1) return x;
  const int64_t b = x.size(0), c = x.size(1) / (p * p), t = x.size(2), h = x.size(3), w = x.size(4);
  return x.reshape({b, c, p, p, t, h, w}).permute({0, 1, 4, 5, 3, 6, 2}).reshape({b, c, t, h * p, w * p});
}

}  // namespace

WanEncoder::WanEncoder(int64_t in_channels, const WanPaths& paths, int64_t out_channels) {
  conv1_ = register_module("conv1", wan_conv3(in_channels, paths.encoder_in));
  downsamples_ = register_module("downsamples", paths.down);
  middle_ = register_module("middle", wan_middle(paths.encoder_out));
  head_ = register_module("head", std::make_shared<WanHead>(paths.encoder_out, out_channels));
  trunk_.add(conv1_.get());
  trunk_.add_each(*downsamples_);
}

torch::Tensor WanEncoder::whole_frame(const torch::Tensor& features, CausalCache& cache) {
  auto h = timed_stage("encoder.middle", [&] { return middle_->forward(features, cache); });
  return timed_stage("encoder.head", [&] { return head_->forward(h, cache); });
}

torch::Tensor WanEncoder::forward(const torch::Tensor& x, CausalCache& cache) {
  auto h = timed_stage("encoder.conv1", [&] { return conv1_->forward(x, cache); });
  h = downsamples_->forward_stages(h, cache, "encoder.downsamples");
  return whole_frame(h, cache);
}

WanDecoder::WanDecoder(int64_t z_dim, const WanPaths& paths, int64_t out_channels) {
  conv1_ = register_module("conv1", wan_conv3(z_dim, paths.decoder_in));
  middle_ = register_module("middle", wan_middle(paths.decoder_in));
  upsamples_ = register_module("upsamples", paths.up);
  head_ = register_module("head", std::make_shared<WanHead>(paths.decoder_out, out_channels));
  trunk_.add_each(*upsamples_);
  trunk_.add(head_.get());
}

torch::Tensor WanDecoder::whole_frame(const torch::Tensor& x, CausalCache& cache) {
  auto h = timed_stage("decoder.conv1", [&] { return conv1_->forward(x, cache); });
  return timed_stage("decoder.middle", [&] { return middle_->forward(h, cache); });
}

torch::Tensor WanDecoder::forward(const torch::Tensor& x, CausalCache& cache) {
  auto h = whole_frame(x, cache);
  h = upsamples_->forward_stages(h, cache, "decoder.upsamples");
  return timed_stage("decoder.head", [&] { return head_->forward(h, cache); });
}

ModelInfo describe_wan(const WanConfig& config, const std::vector<float>& released_mean,
                       const std::vector<float>& released_std) {
  ModelInfo info;
  info.family = config.family;
  info.config = config.to_json();
  info.latent_channels = config.z_dim;
  info.spatial_factor = std::max<int64_t>(config.patch_size, 1) << (config.dim_mult.size() - 1);
  int64_t tf = 1;
  for (bool t : config.temporal_downsample) tf *= t ? 2 : 1;
  info.temporal_factor = tf;
  info.encode_attention = config.dim * config.dim_mult.back();
  info.decode_attention = (config.dec_dim > 0 ? config.dec_dim : config.dim) * config.dim_mult.back();
  if (config.z_dim == static_cast<int64_t>(released_mean.size())) {
    info.latent_mean = released_mean;
    info.latent_std = released_std;
  } else {
    info.latent_mean.assign(config.z_dim, 0.f);
    info.latent_std.assign(config.z_dim, 1.f);
  }
  if (config.latents_mean) info.latent_mean = *config.latents_mean;
  if (config.latents_std) info.latent_std = *config.latents_std;
  return info;
}

WanVae::WanVae(const WanConfig& config, ModelInfo info, const WanPaths& paths)
    : info_(std::move(info)),
      patch_(std::max<int64_t>(config.patch_size, 1)),
      encoder_out_(paths.encoder_out),
      decoder_in_(paths.decoder_in) {
  const int64_t pixels = 3 * patch_ * patch_;  // channels of a patchified frame
  encoder_ = register_module("encoder", std::make_shared<WanEncoder>(pixels, paths, 2 * config.z_dim));
  conv1_ = register_module("conv1", wan_conv1(2 * config.z_dim, 2 * config.z_dim));
  conv2_ = register_module("conv2", wan_conv1(config.z_dim, config.z_dim));
  decoder_ = register_module("decoder", std::make_shared<WanDecoder>(config.z_dim, paths, pixels));
  latents_.emplace(info_.latent_mean, info_.latent_std);
}

// Note [Latent normalization] in core/models/wan/wan_latents.h.
torch::Tensor WanVae::encode_chunk(const torch::Tensor& x, CausalCache& cache) {
  cache.rewind();
  return latents_->normalized(conv1_->forward(encoder_->forward(patchify(x, patch_), cache), cache));
}

torch::Tensor WanVae::decode_chunk(const torch::Tensor& z, CausalCache& cache) {
  cache.rewind();
  return unpatchify(decoder_->forward(conv2_->forward(latents_->raw(z, dtype()), cache), cache), patch_);
}

torch::Tensor WanVae::decode_features_chunk(const torch::Tensor& z, CausalCache& cache) {
  cache.rewind();
  return decoder_->whole_frame(conv2_->forward(latents_->raw(z, dtype()), cache), cache);
}

torch::Tensor WanVae::encode_features_chunk(const torch::Tensor& features, CausalCache& cache) {
  cache.rewind();
  return latents_->normalized(conv1_->forward(encoder_->whole_frame(features, cache), cache));
}

torch::Tensor WanVae::to_trunk_input(const torch::Tensor& x) const {
  return patchify(x, patch_);
}

torch::Tensor WanVae::from_trunk_output(const torch::Tensor& y) const {
  return unpatchify(y, patch_);
}

}  // namespace vaecodec::core
