#include "core/models/ltx2/ltx2_vae.h"

#include <string>

#include "core/error.h"

namespace vaecodec::core {
namespace {

constexpr const char* kFamily = "ltx2-vae";

}  // namespace

LTX2Encoder::LTX2Encoder(const LTX2Config& config)
    : patch_size_(config.patch_size), latent_channels_(config.latent_channels) {
  const auto widths = config.encoder_widths();
  const bool reflect = config.encoder_padding == "reflect";
  const int64_t in = 3 * config.patch_size * config.patch_size;
  conv_in_ = register_module(
      "conv_in", std::make_shared<LTX2Conv>(in, widths.front(), LTX2Conv::Time::kCausal, reflect));
  auto down_blocks = register_module("down_blocks", std::make_shared<ModuleList>());
  for (size_t i = 0; i < config.encoder_blocks.size(); ++i) {
    const auto& b = config.encoder_blocks[i];
    std::shared_ptr<LTX2Module> block;
    if (b.is_res())
      block = std::make_shared<LTX2ResStage>(widths[i], b.layers, LTX2Conv::Time::kCausal, reflect);
    else
      block = std::make_shared<LTX2Downsampler>(widths[i], b.multiplier, b.stride());
    blocks_.push_back(down_blocks->add(static_cast<int64_t>(i), block));
  }
  conv_out_ =
      register_module("conv_out", std::make_shared<LTX2Conv>(widths.back(), config.latent_channels + 1,
                                                             LTX2Conv::Time::kCausal, reflect));
}

torch::Tensor LTX2Encoder::forward(const torch::Tensor& x, CausalCache& cache) {
  auto h = conv_in_->forward(ltx2_patchify(x, patch_size_), cache, false);
  for (auto& b : blocks_) h = b->forward(h, cache, false);
  h = conv_out_->forward(ltx2_pixel_norm_silu(h), cache, false);
  return h.narrow(1, 0, latent_channels_);  // the means; the last channel is the shared log-variance
}

LTX2Decoder::LTX2Decoder(const LTX2Config& config) : patch_size_(config.patch_size) {
  const auto widths = config.decoder_widths();
  const auto blocks = config.decoder_build_order();
  const bool reflect = config.decoder_padding == "reflect";
  const auto ahead = LTX2Conv::Time::kLookAhead;
  conv_in_ = register_module(
      "conv_in", std::make_shared<LTX2Conv>(config.latent_channels, widths.front(), ahead, reflect));
  auto up_blocks = register_module("up_blocks", std::make_shared<ModuleList>());
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto& b = blocks[i];
    std::shared_ptr<LTX2Module> block;
    if (b.is_res())
      block = std::make_shared<LTX2ResStage>(widths[i], b.layers, ahead, reflect);
    else
      block = std::make_shared<LTX2Upsampler>(widths[i], b.multiplier, b.stride(), b.residual, reflect);
    blocks_.push_back(up_blocks->add(static_cast<int64_t>(i), block));
  }
  const int64_t out = 3 * config.patch_size * config.patch_size;
  conv_out_ = register_module("conv_out", std::make_shared<LTX2Conv>(widths.back(), out, ahead, reflect));
}

torch::Tensor LTX2Decoder::forward(const torch::Tensor& z, CausalCache& cache, bool end) {
  auto h = conv_in_->forward(z, cache, end);
  for (auto& b : blocks_) h = b->forward(h, cache, end);
  h = conv_out_->forward(ltx2_pixel_norm_silu(h), cache, end);
  return ltx2_unpatchify(h, patch_size_);
}

ModelInfo LTX2Vae::describe(const LTX2Config& config) {
  ModelInfo info;
  info.family = kFamily;
  info.config = config.to_json();
  info.latent_channels = config.latent_channels;
  info.spatial_factor = config.spatial_factor();
  info.temporal_factor = config.temporal_factor();
  if (config.latents_mean && config.latents_std) {
    info.latent_mean = *config.latents_mean;
    info.latent_std = *config.latents_std;
  }
  info.decode_lag = config.decode_lag();
  return info;
}

LTX2Vae::LTX2Vae(const LTX2Config& config) : config_(config) {
  encoder_ = register_module("encoder", std::make_shared<LTX2Encoder>(config));
  decoder_ = register_module("decoder", std::make_shared<LTX2Decoder>(config));
  auto stats = register_module("per_channel_statistics", std::make_shared<torch::nn::Module>());
  mean_ = stats->register_parameter("mean-of-means", torch::zeros({config.latent_channels}), false);
  std_ = stats->register_parameter("std-of-means", torch::ones({config.latent_channels}), false);
  info_ = describe(config);
}

std::pair<torch::Tensor, torch::Tensor> LTX2Vae::statistics(const torch::Tensor& like) const {
  const auto options = like.options().memory_format(torch::MemoryFormat::Contiguous);
  auto as_column = [&](const std::optional<std::vector<float>>& values, const torch::Tensor& loaded) {
    const auto v = values ? torch::tensor(*values, options.dtype(torch::kFloat)) : loaded;
    return v.to(options).reshape({1, -1, 1, 1, 1});
  };
  return {as_column(config_.latents_mean, mean_), as_column(config_.latents_std, std_)};
}

torch::Tensor LTX2Vae::encode_chunk(const torch::Tensor& x, CausalCache& cache) {
  cache.rewind();
  const auto mu = encoder_->forward(x.to(dtype()), cache);
  // Float32 latents (float64 for a float64 model), normalised (Note [LTX-2 latent statistics]).
  const auto out_type = mu.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  const auto m = mu.to(out_type);
  const auto [mean, std] = statistics(m);
  return ((m - mean) / std).contiguous();
}

torch::Tensor LTX2Vae::decode_chunk(const torch::Tensor& z, CausalCache& cache) {
  cache.rewind();
  const auto compute = z.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  const auto zf = z.to(compute);
  const auto [mean, std] = statistics(zf);
  return decoder_->forward((zf * std + mean).to(dtype()), cache, /*end=*/false);
}

torch::Tensor LTX2Vae::decode_end_chunk(CausalCache& cache) {
  // The decoder's first slot is conv_in's, whose history has the latents' batch, channels and size.
  if (cache.size() == 0 || !cache.slots().front().history.defined()) return {};
  cache.rewind();
  const auto none = cache.slots().front().history.narrow(2, 0, 0);
  return decoder_->forward(none, cache, /*end=*/true);
}

}  // namespace vaecodec::core
