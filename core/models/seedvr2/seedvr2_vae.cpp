#include "core/models/seedvr2/seedvr2_vae.h"

#include <string>

#include "core/error.h"

namespace vaecodec::core {
namespace {

// The reference's switches that vaecodec implements in one position only.
const nlohmann::json& fixed_settings() {
  static const nlohmann::json settings = {{"inflation_mode", "pad"},
                                          {"use_quant_conv", false},
                                          {"use_post_quant_conv", false},
                                          {"attention", true}};
  return settings;
}

}  // namespace

nlohmann::json SeedVR2Config::to_json() const {
  nlohmann::json j = {{"block_out_channels", block_out_channels},
                      {"layers_per_block", layers_per_block},
                      {"norm_num_groups", norm_num_groups},
                      {"latent_channels", latent_channels},
                      {"temporal_scale_num", temporal_scale_num}};
  j.update(fixed_settings());
  if (scaling_factor) j["scaling_factor"] = *scaling_factor;
  return j;
}

SeedVR2Config SeedVR2Config::from_json(const nlohmann::json& j) {
  SeedVR2Config c;
  c.block_out_channels = j.value("block_out_channels", c.block_out_channels);
  c.layers_per_block = j.value("layers_per_block", c.layers_per_block);
  c.norm_num_groups = j.value("norm_num_groups", c.norm_num_groups);
  c.latent_channels = j.value("latent_channels", c.latent_channels);
  c.temporal_scale_num = j.value("temporal_scale_num", c.temporal_scale_num);
  for (const auto& [key, value] : fixed_settings().items())
    if (j.contains(key) && j.at(key) != value)
      throw Error("seedvr2-vae config: " + key + " " + j.at(key).dump() + " is not supported (only " +
                  value.dump() + ")");
  c.scaling_factor = config_factor(j, "scaling_factor", "seedvr2-vae");
  for (const char* key : {"latents_mean", "latents_std"})
    refuse_config_key(j, key, "seedvr2-vae",
                      "SeedVR2's latents are scaled by scaling_factor, not normalized");
  const auto blocks = static_cast<int64_t>(c.block_out_channels.size());
  if (blocks < 1 || c.layers_per_block < 1 || c.latent_channels < 1)
    throw Error("seedvr2-vae config: needs at least one block, one layer per block and one latent channel");
  if (c.temporal_scale_num < 0 || c.temporal_scale_num > blocks - 1)
    throw Error("seedvr2-vae config: temporal_scale_num " + std::to_string(c.temporal_scale_num) +
                " exceeds the " + std::to_string(blocks - 1) + " downsampling blocks");
  return c;
}

SeedVR2Encoder::SeedVR2Encoder(const SeedVR2Config& config) {
  const auto& ch = config.block_out_channels;
  const auto blocks = static_cast<int64_t>(ch.size());
  const int64_t groups = config.norm_num_groups;
  conv_in_ = register_module("conv_in", seedvr2_conv3(3, ch[0]));
  down_blocks_ = register_module("down_blocks", std::make_shared<CausalSequence>());
  for (int64_t i = 0; i < blocks; ++i) {
    // Every block but the last halves space; the last temporal_scale_num of those also halve time.
    std::shared_ptr<CausalModule> down;
    if (i != blocks - 1)
      down = std::make_shared<SeedVR2Downsample>(ch[i],
                                                 /*temporal=*/i >= blocks - 1 - config.temporal_scale_num);
    stages_.push_back(std::make_shared<SeedVR2Stage>(ch[i == 0 ? 0 : i - 1], ch[i], config.layers_per_block,
                                                     groups, "downsamplers", down));
    down_blocks_->append(stages_.back());
  }
  mid_block_ = register_module("mid_block", std::make_shared<SeedVR2MidBlock>(ch.back(), groups));
  conv_norm_out_ = register_module("conv_norm_out", std::make_shared<FrameGroupNorm>(ch.back(), groups));
  conv_out_ = register_module("conv_out", seedvr2_conv3(ch.back(), 2 * config.latent_channels));
  if (blocks < 2) return;  // no resolution to tile at
  trunk_.add(conv_in_.get());
  for (int64_t i = 0; i + 1 < blocks; ++i) {
    trunk_.add_each(stages_[i]->resnets());
    trunk_.add(stages_[i]->sampler());
  }
}

torch::Tensor SeedVR2Encoder::forward(const torch::Tensor& x, CausalCache& cache) {
  auto h = timed_stage("encoder.conv_in", [&] { return conv_in_->forward(x, cache); });
  h = down_blocks_->forward_stages(h, cache, "encoder.down_blocks");
  h = timed_stage("encoder.mid_block", [&] { return mid_block_->forward(h, cache); });
  return timed_stage("encoder.head", [&] { return norm_silu_conv(*conv_norm_out_, *conv_out_, h, cache); });
}

torch::Tensor SeedVR2Encoder::whole_frame(const torch::Tensor& features, CausalCache& cache) {
  auto h =
      timed_stage("encoder.down_blocks", [&] { return stages_.back()->resnets().forward(features, cache); });
  h = timed_stage("encoder.mid_block", [&] { return mid_block_->forward(h, cache); });
  return timed_stage("encoder.head", [&] { return norm_silu_conv(*conv_norm_out_, *conv_out_, h, cache); });
}

SeedVR2Decoder::SeedVR2Decoder(const SeedVR2Config& config) {
  const std::vector<int64_t> ch(config.block_out_channels.rbegin(), config.block_out_channels.rend());
  const auto blocks = static_cast<int64_t>(ch.size());
  const int64_t groups = config.norm_num_groups;
  conv_in_ = register_module("conv_in", seedvr2_conv3(config.latent_channels, ch[0]));
  mid_block_ = register_module("mid_block", std::make_shared<SeedVR2MidBlock>(ch[0], groups));
  up_blocks_ = register_module("up_blocks", std::make_shared<CausalSequence>());
  for (int64_t i = 0; i < blocks; ++i) {
    // Every block but the last doubles space; the first temporal_scale_num also double time.
    std::shared_ptr<CausalModule> up;
    if (i != blocks - 1)
      up = std::make_shared<SeedVR2Upsample>(ch[i], /*temporal=*/i < config.temporal_scale_num);
    stages_.push_back(std::make_shared<SeedVR2Stage>(ch[i == 0 ? 0 : i - 1], ch[i],
                                                     config.layers_per_block + 1, groups, "upsamplers", up));
    up_blocks_->append(stages_.back());
  }
  conv_norm_out_ = register_module("conv_norm_out", std::make_shared<FrameGroupNorm>(ch.back(), groups));
  conv_out_ = register_module("conv_out", seedvr2_conv3(ch.back(), 3));
  head_ = std::make_shared<SeedVR2Head>(conv_norm_out_, conv_out_);
  if (blocks < 2) return;
  trunk_.add(stages_.front()->sampler());
  for (int64_t i = 1; i < blocks; ++i) {
    trunk_.add_each(stages_[i]->resnets());
    if (stages_[i]->sampler()) trunk_.add(stages_[i]->sampler());
  }
  trunk_.add(head_.get());
}

torch::Tensor SeedVR2Decoder::forward(const torch::Tensor& x, CausalCache& cache) {
  auto h = timed_stage("decoder.conv_in", [&] { return conv_in_->forward(x, cache); });
  h = timed_stage("decoder.mid_block", [&] { return mid_block_->forward(h, cache); });
  h = up_blocks_->forward_stages(h, cache, "decoder.up_blocks");
  return timed_stage("decoder.head", [&] { return head_->forward(h, cache); });
}

torch::Tensor SeedVR2Decoder::whole_frame(const torch::Tensor& z, CausalCache& cache) {
  auto h = timed_stage("decoder.conv_in", [&] { return conv_in_->forward(z, cache); });
  h = timed_stage("decoder.mid_block", [&] { return mid_block_->forward(h, cache); });
  return timed_stage("decoder.up_blocks", [&] { return stages_.front()->resnets().forward(h, cache); });
}

ModelInfo SeedVR2Vae::describe(const SeedVR2Config& config) {
  ModelInfo info;
  info.family = "seedvr2-vae";
  info.config = config.to_json();
  info.latent_channels = config.latent_channels;
  info.spatial_factor = int64_t{1} << (config.block_out_channels.size() - 1);
  info.temporal_factor = int64_t{1} << config.temporal_scale_num;
  info.latent_scale = config.scaling_factor.value_or(0.9152);
  info.encode_attention = info.decode_attention = config.block_out_channels.back();
  return info;
}

SeedVR2Vae::SeedVR2Vae(const SeedVR2Config& config) : config_(config) {
  encoder_ = register_module("encoder", std::make_shared<SeedVR2Encoder>(config));
  decoder_ = register_module("decoder", std::make_shared<SeedVR2Decoder>(config));

  info_ = describe(config);
}

// The posterior mean of the encoder's moments [B, 2z, t', h, w] (mean, then log-variance): Note [SeedVR2
// latents].
torch::Tensor SeedVR2Vae::mean_of(const torch::Tensor& moments) const {
  const auto out_type = moments.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  return moments.narrow(1, 0, config_.latent_channels).to(out_type).contiguous();
}

torch::Tensor SeedVR2Vae::encode_chunk(const torch::Tensor& x, CausalCache& cache) {
  cache.rewind();
  return mean_of(encoder_->forward(x, cache));
}

torch::Tensor SeedVR2Vae::decode_chunk(const torch::Tensor& z, CausalCache& cache) {
  cache.rewind();
  return decoder_->forward(z.to(dtype()), cache);
}

const Trunk* SeedVR2Vae::trunk(bool encode) const {
  const Trunk& t = encode ? encoder_->trunk() : decoder_->trunk();
  return t.scale() == 1 ? nullptr : &t;  // a config of one block has nothing to tile
}

int64_t SeedVR2Vae::feature_channels(bool encode) const {
  const auto& ch = config_.block_out_channels;
  // Encode: the last downsampler's output (block -2's width); decode: the widest, after the middle.
  return ch.size() < 2 ? 0 : encode ? ch[ch.size() - 2] : ch.back();
}

torch::Tensor SeedVR2Vae::decode_features_chunk(const torch::Tensor& z, CausalCache& cache) {
  cache.rewind();
  return decoder_->whole_frame(z.to(dtype()), cache);
}

torch::Tensor SeedVR2Vae::encode_features_chunk(const torch::Tensor& features, CausalCache& cache) {
  cache.rewind();
  return mean_of(encoder_->whole_frame(features, cache));
}

std::optional<SeedVR2Config> SeedVR2Vae::detect(const StateDict& tensors) {
  auto find = [&](const std::string& name) -> const torch::Tensor* {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
  };
  const auto* enc_in = find("encoder.conv_in.weight");
  const auto* dec_in = find("decoder.conv_in.weight");
  if (!enc_in || !dec_in || enc_in->dim() != 5 || enc_in->size(1) != 3 || dec_in->dim() != 5)
    return std::nullopt;
  // The upscale conv is SeedVR2's own; image VAEs and the Wan family have none.
  if (!find("decoder.up_blocks.0.upsamplers.0.upscale_conv.weight")) return std::nullopt;

  SeedVR2Config c;
  c.block_out_channels.clear();
  c.temporal_scale_num = 0;
  for (int i = 0;; ++i) {
    const std::string block = "encoder.down_blocks." + std::to_string(i);
    const auto* conv = find(block + ".resnets.0.conv1.weight");
    if (!conv) break;
    if (conv->dim() < 1) return std::nullopt;
    c.block_out_channels.push_back(conv->size(0));
    const auto* down = find(block + ".downsamplers.0.conv.weight");
    if (down && down->dim() == 5 && down->size(2) > 1) ++c.temporal_scale_num;
  }
  if (c.block_out_channels.empty()) return std::nullopt;
  c.layers_per_block = 0;
  while (find("encoder.down_blocks.0.resnets." + std::to_string(c.layers_per_block) + ".conv1.weight"))
    ++c.layers_per_block;
  c.latent_channels = dec_in->size(1);
  return c;
}

}  // namespace vaecodec::core
