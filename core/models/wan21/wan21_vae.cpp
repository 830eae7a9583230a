#include "core/models/wan21/wan21_vae.h"

#include "core/error.h"
#include "core/stage_timer.h"

namespace vaecodec::core {
namespace {

bool contains(const std::vector<double>& v, double x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

Wan21Encoder::Wan21Encoder(const Wan21Config& config, int64_t out_channels) {
  std::vector<int64_t> dims = {config.dim};
  for (auto m : config.dim_mult) dims.push_back(config.dim * m);
  conv1_ = register_module("conv1", wan_conv3(3, dims[0]));
  downsamples_ = register_module("downsamples", std::make_shared<CausalSequence>());
  double scale = 1.0;
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    int64_t in = dims[i];
    const int64_t out = dims[i + 1];
    for (int64_t r = 0; r < config.num_res_blocks; ++r) {
      downsamples_->append(std::make_shared<WanResidualBlock>(in, out));
      if (contains(config.attn_scales, scale)) downsamples_->append(std::make_shared<WanAttentionBlock>(out));
      in = out;
    }
    if (i != config.dim_mult.size() - 1) {
      const auto mode =
          config.temporal_downsample[i] ? ResampleMode::kDownsample3d : ResampleMode::kDownsample2d;
      downsamples_->append(std::make_shared<WanResample>(out, mode, out));
      scale /= 2.0;
    }
  }
  middle_ = register_module("middle", wan_middle(dims.back()));
  head_ = register_module("head", std::make_shared<WanHead>(dims.back(), out_channels));
  trunk_.add(conv1_.get());
  trunk_.add_each(*downsamples_);
}

torch::Tensor Wan21Encoder::whole_frame(const torch::Tensor& features, CausalCache& cache) {
  auto h = timed_stage("encoder.middle", [&] { return middle_->forward(features, cache); });
  return timed_stage("encoder.head", [&] { return head_->forward(h, cache); });
}

torch::Tensor Wan21Encoder::forward(const torch::Tensor& x, CausalCache& cache) {
  auto h = timed_stage("encoder.conv1", [&] { return conv1_->forward(x, cache); });
  h = downsamples_->forward_stages(h, cache, "encoder.downsamples");
  h = timed_stage("encoder.middle", [&] { return middle_->forward(h, cache); });
  return timed_stage("encoder.head", [&] { return head_->forward(h, cache); });
}

Wan21Decoder::Wan21Decoder(const Wan21Config& config) {
  const auto& mult = config.dim_mult;
  std::vector<int64_t> dims = {config.dim * mult.back()};
  for (auto it = mult.rbegin(); it != mult.rend(); ++it) dims.push_back(config.dim * *it);
  std::vector<bool> temporal_upsample(config.temporal_downsample.rbegin(), config.temporal_downsample.rend());
  double scale = 1.0 / static_cast<double>(1 << (mult.size() - 2));

  conv1_ = register_module("conv1", wan_conv3(config.z_dim, dims[0]));
  middle_ = register_module("middle", wan_middle(dims[0]));
  upsamples_ = register_module("upsamples", std::make_shared<CausalSequence>());
  int64_t out = dims[0];
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    // Each upsampler halves the width, so every stage after the first starts at half its predecessor's.
    int64_t in = i == 0 ? dims[i] : dims[i] / 2;
    out = dims[i + 1];
    for (int64_t r = 0; r < config.num_res_blocks + 1; ++r) {
      upsamples_->append(std::make_shared<WanResidualBlock>(in, out));
      if (contains(config.attn_scales, scale)) upsamples_->append(std::make_shared<WanAttentionBlock>(out));
      in = out;
    }
    if (i != mult.size() - 1) {
      const auto mode = temporal_upsample[i] ? ResampleMode::kUpsample3d : ResampleMode::kUpsample2d;
      upsamples_->append(std::make_shared<WanResample>(out, mode, out / 2));
      scale *= 2.0;
    }
  }
  head_ = register_module("head", std::make_shared<WanHead>(out, 3));
  trunk_.add_each(*upsamples_);
  trunk_.add(head_.get());
}

torch::Tensor Wan21Decoder::whole_frame(const torch::Tensor& x, CausalCache& cache) {
  auto h = timed_stage("decoder.conv1", [&] { return conv1_->forward(x, cache); });
  return timed_stage("decoder.middle", [&] { return middle_->forward(h, cache); });
}

torch::Tensor Wan21Decoder::forward(const torch::Tensor& x, CausalCache& cache) {
  auto h = timed_stage("decoder.conv1", [&] { return conv1_->forward(x, cache); });
  h = timed_stage("decoder.middle", [&] { return middle_->forward(h, cache); });
  h = upsamples_->forward_stages(h, cache, "decoder.upsamples");
  return timed_stage("decoder.head", [&] { return head_->forward(h, cache); });
}

ModelInfo Wan21Vae::describe(const Wan21Config& config) {
  ModelInfo info;
  info.family = "wan2.1-vae";
  info.config = config.to_json();
  info.latent_channels = config.z_dim;
  info.spatial_factor = 1 << (config.dim_mult.size() - 1);
  int64_t tf = 1;
  for (bool t : config.temporal_downsample) tf *= t ? 2 : 1;
  info.temporal_factor = tf;
  info.encode_attention = info.decode_attention = config.dim * config.dim_mult.back();
  if (config.z_dim == static_cast<int64_t>(wan21_latent_mean().size())) {
    info.latent_mean = wan21_latent_mean();
    info.latent_std = wan21_latent_std();
  } else {
    info.latent_mean.assign(config.z_dim, 0.f);
    info.latent_std.assign(config.z_dim, 1.f);
  }
  if (config.latents_mean) info.latent_mean = *config.latents_mean;
  if (config.latents_std) info.latent_std = *config.latents_std;
  return info;
}

Wan21Vae::Wan21Vae(const Wan21Config& config) : config_(config) {
  encoder_ = register_module("encoder", std::make_shared<Wan21Encoder>(config, 2 * config.z_dim));
  conv1_ = register_module("conv1", wan_conv1(2 * config.z_dim, 2 * config.z_dim));
  conv2_ = register_module("conv2", wan_conv1(config.z_dim, config.z_dim));
  decoder_ = register_module("decoder", std::make_shared<Wan21Decoder>(config));

  info_ = describe(config);
  latents_.emplace(info_.latent_mean, info_.latent_std);
}

// Note [Latent normalization] in core/models/wan/wan_latents.h.
torch::Tensor Wan21Vae::encode_chunk(const torch::Tensor& x, CausalCache& cache) {
  cache.rewind();
  return latents_->normalized(conv1_->forward(encoder_->forward(x, cache), cache));
}

torch::Tensor Wan21Vae::decode_chunk(const torch::Tensor& z, CausalCache& cache) {
  cache.rewind();
  return decoder_->forward(conv2_->forward(latents_->raw(z, dtype()), cache), cache);
}

torch::Tensor Wan21Vae::decode_features_chunk(const torch::Tensor& z, CausalCache& cache) {
  cache.rewind();
  return decoder_->whole_frame(conv2_->forward(latents_->raw(z, dtype()), cache), cache);
}

torch::Tensor Wan21Vae::encode_features_chunk(const torch::Tensor& features, CausalCache& cache) {
  cache.rewind();
  return latents_->normalized(conv1_->forward(encoder_->whole_frame(features, cache), cache));
}

std::optional<Wan21Config> Wan21Vae::detect(const StateDict& tensors) {
  auto find = [&](const std::string& name) -> const torch::Tensor* {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
  };
  const auto* enc_in = find("encoder.conv1.weight");
  const auto* post = find("conv2.weight");
  // Wan2.2 nests its stages (downsamples.N.downsamples.M) and patchifies its input (12 channels).
  if (!enc_in || !post || enc_in->dim() != 5 || enc_in->size(1) != 3 || post->dim() != 5) return std::nullopt;
  if (find("decoder.upsamples.0.upsamples.0.residual.2.weight")) return std::nullopt;
  Wan21Config c;
  c.dim = enc_in->size(0);
  c.z_dim = post->size(0);
  // Residual blocks per encoder stage: count the blocks before the first resampler.
  int64_t blocks = 0;
  while (find("encoder.downsamples." + std::to_string(blocks) + ".residual.0.gamma")) ++blocks;
  if (blocks > 0) c.num_res_blocks = blocks;
  return c;
}

const std::vector<float>& wan21_latent_mean() {
  static const std::vector<float> v = {-0.7571f, -0.7089f, -0.9113f, 0.1075f,  -0.1745f, 0.9653f,
                                       -0.1517f, 1.5508f,  0.4134f,  -0.0715f, 0.5517f,  -0.3632f,
                                       -0.1922f, -0.9497f, 0.2503f,  -0.2921f};
  return v;
}

const std::vector<float>& wan21_latent_std() {
  static const std::vector<float> v = {2.8184f, 1.4541f, 2.3275f, 2.6558f, 1.2196f, 1.7708f,
                                       2.6052f, 2.0743f, 3.2687f, 2.1526f, 2.8652f, 1.5579f,
                                       1.6382f, 1.1253f, 2.8251f, 1.9160f};
  return v;
}

}  // namespace vaecodec::core
