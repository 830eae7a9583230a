#include "core/models/wan22/wan22_vae.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace vaecodec::core {
namespace {

std::string stage_key(const std::string& side, int64_t stage, int64_t block, const std::string& rest) {
  const std::string list = side == "encoder" ? "downsamples" : "upsamples";
  return side + "." + list + "." + std::to_string(stage) + "." + list + "." + std::to_string(block) + "." +
         rest;
}

}  // namespace

Wan22AvgDown::Wan22AvgDown(int64_t in, int64_t out, int64_t factor_t, int64_t factor_s)
    : out_(out), factor_t_(factor_t), factor_s_(factor_s) {
  const int64_t values = in * factor_t * factor_s * factor_s;  // per output voxel
  if (values % out != 0)
    throw Error("wan2.2-vae: cannot average " + std::to_string(values) + " values into " +
                std::to_string(out) + " channels");
  group_ = values / out;
}

torch::Tensor Wan22AvgDown::forward(const torch::Tensor& x, CausalCache& cache) {
  torch::Tensor frames = x;
  if (factor_t_ > 1) {  // Note [Wan2.2 stage shortcuts]
    CausalCache::Slot& slot = cache.next();
    const int64_t pad = slot.started ? 0 : factor_t_ - 1;
    if ((x.size(2) + pad) % factor_t_ != 0)
      throw Error("wan2.2-vae: a chunk of " + std::to_string(x.size(2)) + " frames reaches a stage that " +
                  "halves time (the first chunk needs 1 + 4k frames, later ones multiples of 4)");
    slot.started = true;
    if (pad > 0) frames = torch::constant_pad_nd(x, {0, 0, 0, 0, pad, 0});
  }
  const int64_t b = frames.size(0), c = frames.size(1), t = frames.size(2) / factor_t_;
  const int64_t h = frames.size(3) / factor_s_, w = frames.size(4) / factor_s_;
  // [B, C, t, ft, h, fs, w, fs] -> [B, C, ft, fs, fs, t, h, w]: the (channel, frame, row, column) runs.
  return frames.reshape({b, c, t, factor_t_, h, factor_s_, w, factor_s_})
      .permute({0, 1, 3, 5, 7, 2, 4, 6})
      .reshape({b, out_, group_, t, h, w})
      .mean(2);
}

Wan22DupUp::Wan22DupUp(int64_t in, int64_t out, int64_t factor_t, int64_t factor_s)
    : out_(out), factor_t_(factor_t), factor_s_(factor_s) {
  const int64_t values = out * factor_t * factor_s * factor_s;  // per input voxel
  if (values % in != 0)
    throw Error("wan2.2-vae: cannot spread " + std::to_string(in) + " channels over " +
                std::to_string(values) + " values");
  repeats_ = values / in;
}

torch::Tensor Wan22DupUp::forward(const torch::Tensor& x, CausalCache& cache) {
  int64_t drop = 0;
  if (factor_t_ > 1) {  // Note [Wan2.2 stage shortcuts]
    CausalCache::Slot& slot = cache.next();
    if (!slot.started) drop = factor_t_ - 1;
    slot.started = true;
  }
  const int64_t b = x.size(0), c = x.size(1), t = x.size(2), h = x.size(3), w = x.size(4);
  // Each channel repeated (a view), read as [B, out, ft, fs, fs, t, h, w], laid out as
  // [B, out, t, ft, h, fs, w, fs].
  auto y = x.unsqueeze(2)
               .expand({b, c, repeats_, t, h, w})
               .reshape({b, out_, factor_t_, factor_s_, factor_s_, t, h, w})
               .permute({0, 1, 5, 2, 6, 3, 7, 4})
               .reshape({b, out_, t * factor_t_, h * factor_s_, w * factor_s_});
  return drop > 0 ? y.narrow(2, drop, y.size(2) - drop) : y;
}

Wan22DownStage::Wan22DownStage(int64_t in, int64_t out, int64_t res_blocks, bool down_time, bool down_space) {
  downsamples_ = register_module("downsamples", std::make_shared<CausalSequence>());
  for (int64_t r = 0; r < res_blocks; ++r)
    downsamples_->append(std::make_shared<WanResidualBlock>(r ? out : in, out));
  if (down_space) {
    const auto mode = down_time ? ResampleMode::kDownsample3d : ResampleMode::kDownsample2d;
    downsamples_->append(std::make_shared<WanResample>(out, mode, out));
  }
  shortcut_ = register_module("avg_shortcut",
                              std::make_shared<Wan22AvgDown>(in, out, down_time ? 2 : 1, down_space ? 2 : 1));
}

torch::Tensor Wan22DownStage::forward(const torch::Tensor& x, CausalCache& cache) {
  auto shortcut = shortcut_->forward(x, cache);
  return downsamples_->forward(x, cache).add_(shortcut);
}

Wan22UpStage::Wan22UpStage(int64_t in, int64_t out, int64_t res_blocks, bool up_time, bool up_space) {
  upsamples_ = register_module("upsamples", std::make_shared<CausalSequence>());
  for (int64_t r = 0; r < res_blocks; ++r)
    upsamples_->append(std::make_shared<WanResidualBlock>(r ? out : in, out));
  if (up_space) {
    const auto mode = up_time ? ResampleMode::kUpsample3d : ResampleMode::kUpsample2d;
    upsamples_->append(std::make_shared<WanResample>(out, mode, out));
    shortcut_ = register_module("avg_shortcut", std::make_shared<Wan22DupUp>(in, out, up_time ? 2 : 1, 2));
  }
}

torch::Tensor Wan22UpStage::forward(const torch::Tensor& x, CausalCache& cache) {
  auto main = upsamples_->forward(x, cache);  // a fresh tensor: the resampler's conv output
  return shortcut_ ? main.add_(shortcut_->forward(x, cache)) : main;
}

namespace {

// The paths of a Wan2.2 model: a stage per width (its residual blocks, a resampler but in the last, and the
// stage's shortcut), the decoder's one block more a stage and as wide as dec_dim.
WanPaths wan22_paths(const Wan22Config& config) {
  WanPaths paths;
  std::vector<int64_t> dims = {config.dim};
  for (auto m : config.dim_mult) dims.push_back(config.dim * m);
  const size_t stages = config.dim_mult.size();
  paths.down = std::make_shared<CausalSequence>();
  for (size_t i = 0; i < stages; ++i) {
    const bool last = i + 1 == stages;
    paths.down->append(std::make_shared<Wan22DownStage>(dims[i], dims[i + 1], config.num_res_blocks,
                                                        !last && config.temporal_downsample[i], !last));
  }
  paths.encoder_in = dims.front();
  paths.encoder_out = dims.back();

  const auto& mult = config.dim_mult;
  std::vector<int64_t> up_dims = {config.dec_dim * mult.back()};
  for (auto it = mult.rbegin(); it != mult.rend(); ++it) up_dims.push_back(config.dec_dim * *it);
  const std::vector<bool> temporal_upsample(config.temporal_downsample.rbegin(),
                                            config.temporal_downsample.rend());
  paths.up = std::make_shared<CausalSequence>();
  for (size_t i = 0; i < stages; ++i) {
    const bool last = i + 1 == stages;
    paths.up->append(std::make_shared<Wan22UpStage>(up_dims[i], up_dims[i + 1], config.num_res_blocks + 1,
                                                    !last && temporal_upsample[i], !last));
  }
  paths.decoder_in = up_dims.front();
  paths.decoder_out = up_dims.back();
  return paths;
}

}  // namespace

ModelInfo Wan22Vae::describe(const Wan22Config& config) {
  return describe_wan(config, wan22_latent_mean(), wan22_latent_std());
}

Wan22Vae::Wan22Vae(const Wan22Config& config) : WanVae(config, describe(config), wan22_paths(config)) {}

std::optional<Wan22Config> Wan22Vae::detect(const StateDict& tensors) {
  auto find = [&](const std::string& name) -> const torch::Tensor* {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
  };
  const auto* enc_in = find("encoder.conv1.weight");
  const auto* post = find("conv2.weight");
  const auto* dec_norm = find("decoder.head.0.gamma");
  // Wan2.2 nests its stages (encoder.downsamples.N.downsamples.M); Wan2.1 lists its blocks flat.
  // Shapes come from the file: every size divided by or indexed is checked first.
  if (!enc_in || !post || !dec_norm || enc_in->dim() != 5 || post->dim() != 5 || dec_norm->dim() < 1 ||
      enc_in->size(0) < 1)
    return std::nullopt;
  Wan22Config c;
  c.dim = enc_in->size(0);
  c.z_dim = post->size(0);
  c.patch_size = std::lround(std::sqrt(static_cast<double>(enc_in->size(1)) / 3.0));
  if (3 * c.patch_size * c.patch_size != enc_in->size(1)) return std::nullopt;
  // A stage's width is its first residual block's output; its depth, the blocks before the resampler.
  c.dim_mult.clear();
  while (const auto* w = find(stage_key("encoder", c.dim_mult.size(), 0, "residual.2.weight"))) {
    if (w->dim() < 1 || w->size(0) < 1 || w->size(0) % c.dim != 0) return std::nullopt;
    c.dim_mult.push_back(w->size(0) / c.dim);
  }
  if (c.dim_mult.empty()) return std::nullopt;
  c.num_res_blocks = 0;
  while (find(stage_key("encoder", 0, c.num_res_blocks, "residual.0.gamma"))) ++c.num_res_blocks;
  c.temporal_downsample.clear();
  for (size_t i = 0; i + 1 < c.dim_mult.size(); ++i)
    c.temporal_downsample.push_back(find(stage_key("encoder", i, c.num_res_blocks, "time_conv.weight")) !=
                                    nullptr);
  c.dec_dim = dec_norm->size(0) / c.dim_mult.front();
  return c;
}

const std::vector<float>& wan22_latent_mean() {
  static const std::vector<float> v = {
      -0.2289f, -0.0052f, -0.1323f, -0.2339f, -0.2799f, 0.0174f,  0.1838f,  0.1557f,  -0.1382f, 0.0542f,
      0.2813f,  0.0891f,  0.157f,   -0.0098f, 0.0375f,  -0.1825f, -0.2246f, -0.1207f, -0.0698f, 0.5109f,
      0.2665f,  -0.2108f, -0.2158f, 0.2502f,  -0.2055f, -0.0322f, 0.1109f,  0.1567f,  -0.0729f, 0.0899f,
      -0.2799f, -0.123f,  -0.0313f, -0.1649f, 0.0117f,  0.0723f,  -0.2839f, -0.2083f, -0.052f,  0.3748f,
      0.0152f,  0.1957f,  0.1433f,  -0.2944f, 0.3573f,  -0.0548f, -0.1681f, -0.0667f};
  return v;
}

const std::vector<float>& wan22_latent_std() {
  static const std::vector<float> v = {
      0.4765f, 1.0364f, 0.4514f, 1.1677f, 0.5313f, 0.499f,  0.4818f, 0.5013f, 0.8158f, 1.0344f,
      0.5894f, 1.0901f, 0.6885f, 0.6165f, 0.8454f, 0.4978f, 0.5759f, 0.3523f, 0.7135f, 0.6804f,
      0.5833f, 1.4146f, 0.8986f, 0.5659f, 0.7069f, 0.5338f, 0.4889f, 0.4917f, 0.4069f, 0.4999f,
      0.6866f, 0.4093f, 0.5709f, 0.6065f, 0.6415f, 0.4944f, 0.5726f, 1.2042f, 0.5458f, 1.6887f,
      0.3971f, 1.06f,   0.3943f, 0.5537f, 0.5444f, 0.4089f, 0.7468f, 0.7744f};
  return v;
}

}  // namespace vaecodec::core
