#include "core/models/wan21/wan21_vae.h"

#include <algorithm>

#include "core/error.h"

namespace vaecodec::core {
namespace {

bool contains(const std::vector<double>& v, double x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The paths of a Wan2.1 model: the encoder's stages of residual blocks (attention where attn_scales asks)
// each but the last ending in a resampler, listed flat; the decoder's mirrored, one block more a stage, each
// upsampler halving the width.
WanPaths wan21_paths(const Wan21Config& config) {
  WanPaths paths;
  std::vector<int64_t> dims = {config.dim};
  for (auto m : config.dim_mult) dims.push_back(config.dim * m);
  paths.down = std::make_shared<CausalSequence>();
  double scale = 1.0;
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    int64_t in = dims[i];
    const int64_t out = dims[i + 1];
    for (int64_t r = 0; r < config.num_res_blocks; ++r) {
      paths.down->append(std::make_shared<WanResidualBlock>(in, out));
      if (contains(config.attn_scales, scale)) paths.down->append(std::make_shared<WanAttentionBlock>(out));
      in = out;
    }
    if (i != config.dim_mult.size() - 1) {
      const auto mode =
          config.temporal_downsample[i] ? ResampleMode::kDownsample3d : ResampleMode::kDownsample2d;
      paths.down->append(std::make_shared<WanResample>(out, mode, out));
      scale /= 2.0;
    }
  }
  paths.encoder_in = dims.front();
  paths.encoder_out = dims.back();

  const auto& mult = config.dim_mult;
  std::vector<int64_t> up_dims = {config.dim * mult.back()};
  for (auto it = mult.rbegin(); it != mult.rend(); ++it) up_dims.push_back(config.dim * *it);
  std::vector<bool> temporal_upsample(config.temporal_downsample.rbegin(), config.temporal_downsample.rend());
  scale = 1.0 / static_cast<double>(1 << (mult.size() - 2));
  paths.up = std::make_shared<CausalSequence>();
  int64_t out = up_dims[0];
  for (size_t i = 0; i + 1 < up_dims.size(); ++i) {
    // Each upsampler halves the width, so every stage after the first starts at half its predecessor's.
    int64_t in = i == 0 ? up_dims[i] : up_dims[i] / 2;
    out = up_dims[i + 1];
    for (int64_t r = 0; r < config.num_res_blocks + 1; ++r) {
      paths.up->append(std::make_shared<WanResidualBlock>(in, out));
      if (contains(config.attn_scales, scale)) paths.up->append(std::make_shared<WanAttentionBlock>(out));
      in = out;
    }
    if (i != mult.size() - 1) {
      const auto mode = temporal_upsample[i] ? ResampleMode::kUpsample3d : ResampleMode::kUpsample2d;
      paths.up->append(std::make_shared<WanResample>(out, mode, out / 2));
      scale *= 2.0;
    }
  }
  paths.decoder_in = up_dims.front();
  paths.decoder_out = out;
  return paths;
}

}  // namespace

ModelInfo Wan21Vae::describe(const Wan21Config& config) {
  return describe_wan(config, wan21_latent_mean(), wan21_latent_std());
}

Wan21Vae::Wan21Vae(const Wan21Config& config) : WanVae(config, describe(config), wan21_paths(config)) {}

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
