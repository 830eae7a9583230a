#include "core/models/seedvr2/seedvr2_blocks.h"

#include "core/band_exchange.h"
#include "core/error.h"
#include "core/flops.h"
#include "core/kernels/norm_silu.h"

namespace vaecodec::core {
namespace {

constexpr double kNormEps = 1e-6;

// A Linear layer's parameters (weight [out, in], bias [out]) registered in a child module called `name`.
std::pair<torch::Tensor, torch::Tensor> register_linear(torch::nn::Module& parent, const std::string& name,
                                                        int64_t in, int64_t out) {
  auto linear = parent.register_module(name, std::make_shared<torch::nn::Module>());
  auto weight = linear->register_parameter("weight", torch::empty({out, in}), false);
  auto bias = linear->register_parameter("bias", torch::empty({out}), false);
  return {weight, bias};
}

// In a band of a split run, every band's partial statistics of a norm, concatenated along their sets (Note
// [Bands across devices]); elsewhere none, and the statistics are over x alone.
kernels::FrameGroupPool band_pool() {
  if (!in_band()) return {};
  return [](const torch::Tensor& partials) { return concat_bands({partials}, 1)[0]; };
}

}  // namespace

std::shared_ptr<CausalConv3d> seedvr2_conv3(int64_t in, int64_t out) {
  return std::make_shared<CausalConv3d>(in, out, std::array<int64_t, 3>{3, 3, 3},
                                        std::array<int64_t, 3>{1, 1, 1}, std::array<int64_t, 3>{1, 1, 1},
                                        CausalPad::kReplicate);
}

FrameGroupNorm::FrameGroupNorm(int64_t channels, int64_t groups) : groups_(groups) {
  if (groups < 1 || channels % groups != 0)
    throw Error("seedvr2-vae: " + std::to_string(channels) + " channels do not split into " +
                std::to_string(groups) + " norm groups");
  weight_ = register_parameter("weight", torch::empty({channels}), false);
  bias_ = register_parameter("bias", torch::empty({channels}), false);
}

// Note [SeedVR2 GroupNorm in bands]
// In a band the kernel runs as on the whole frame (a band's buffer cuts rows between frames, not inside one),
// its two passes apart: the first pass's partial statistics of the band go to every band (one exchange of
// [frames, sets, groups, 3] float32 per norm and chunk), and the second pass normalises with the union of all
// bands' sets, which is the whole frame's statistics. The composite path (CPU, float64, layouts the kernel
// does not take) exchanges the same kind of partials, one set per frame and group (float64 for float64
// input), so that bands whose layers choose differently still meet at the same exchange with tensors that
// concatenate.
torch::Tensor FrameGroupNorm::forward(const torch::Tensor& x, bool silu) const {
  if (x.is_cuda()) {
    auto y = torch::empty_like(x);  // keeps x's memory format
    if (kernels::frame_group_norm_into(x, weight_, bias_, groups_, kNormEps, silu, y, band_pool())) return y;
  }
  return composite(x, silu);
}

void FrameGroupNorm::forward_silu_into(const torch::Tensor& x, const torch::Tensor& out) const {
  if (kernels::frame_group_norm_into(x, weight_, bias_, groups_, kNormEps, /*silu=*/true, out, band_pool()))
    return;
  out.copy_(composite(x, /*silu=*/true));
}

// Note [The GroupNorm on the CPU]
// Off the GPU's kernel the norm is composed of LibTorch's operations, in float32 (float64 for float64). A
// channels-last input (the GPU's layout, and float32's on the CPU: Note [Channels-last on the CPU] in
// core/models/registry.cpp) is viewed as [B, T, H*W, G, C/G], which its memory already is, so the statistics
// and the scale and shift read it in place and the result is channels-last again; viewing it as [B, G, C/G,
// T, H*W] instead would copy it into the plain layout first, and the next convolution would copy it back
// (the 2-core machine: SeedVR2's round trip 16% slower channels-last than plain before this, 320x240 x17).
// Either way the sums are over the same elements.
torch::Tensor FrameGroupNorm::composite(const torch::Tensor& x, bool silu) const {
  const int64_t b = x.size(0), c = x.size(1), t = x.size(2);
  const int64_t per_group = c / groups_;
  const auto compute = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  // Statistics per (batch, group, frame), [B, G, 1, T, 1]. A channels-last input is read in its own order
  // (Note [The GroupNorm on the CPU]).
  const bool frames_last = x.is_contiguous(torch::MemoryFormat::ChannelsLast3d) && !x.is_contiguous();
  torch::Tensor xf, var, mean;
  if (frames_last) {
    xf =
        x.to(compute).permute({0, 2, 3, 4, 1}).reshape({b, t, -1, groups_, per_group});  // [B, T, HW, G, C/G]
    std::tie(var, mean) = at::var_mean(xf, {2, 4}, /*unbiased=*/false, /*keepdim=*/true);  // [B, T, 1, G, 1]
    var = var.permute({0, 3, 2, 1, 4});
    mean = mean.permute({0, 3, 2, 1, 4});
  } else {
    xf = x.to(compute).reshape({b, groups_, per_group, t, -1});  // [B, G, C/G, T, H*W]
    std::tie(var, mean) = at::var_mean(xf, {2, 4}, /*unbiased=*/false, /*keepdim=*/true);
  }
  if (in_band()) {
    // A group's pixels are spread over the bands: pool every band's partials (Note [SeedVR2 GroupNorm in
    // bands]), [B * T, sets, G, 3] of count, mean and sum of squared deviations, in float64: the variance is
    // the count-weighted mean of the sets' variances plus the variance of their means.
    const double count = static_cast<double>(xf.size(2) * xf.size(4));
    const auto per_frame = [&](const torch::Tensor& s) {  // [B, G, 1, T, 1] -> [B * T, 1, G]
      return s.reshape({b, groups_, t}).permute({0, 2, 1}).reshape({b * t, 1, groups_});
    };
    const auto m = per_frame(mean);
    const auto partials = torch::stack({torch::full_like(m, count), m, per_frame(var) * count}, -1);
    const auto all = band_pool()(partials).to(torch::kDouble);  // [B * T, sets, G, 3]
    const auto n = all.select(3, 0), means = all.select(3, 1), squares = all.select(3, 2);
    const auto total = n.sum(1, /*keepdim=*/true);
    const auto pooled_mean = (n * means).sum(1, true) / total;
    const auto pooled_var = (squares + n * (means - pooled_mean).square()).sum(1, true) / total;
    const auto to_groups = [&](const torch::Tensor& s) {  // [B * T, 1, G] -> [B, G, 1, T, 1]
      return s.reshape({b, t, groups_}).permute({0, 2, 1}).reshape({b, groups_, 1, t, 1}).to(compute);
    };
    mean = to_groups(pooled_mean);
    var = to_groups(pooled_var);
  }
  auto weight = weight_.to(compute).reshape({1, groups_, per_group, 1, 1});
  auto bias = bias_.to(compute).reshape({1, groups_, per_group, 1, 1});
  // y = (x - mean) * rstd * weight + bias, as one scale and shift per (batch, channel, frame).
  auto scale = torch::rsqrt(var + kNormEps) * weight;  // [B, G, C/G, T, 1]
  auto shift = bias - mean * scale;
  torch::Tensor y;
  if (frames_last) {
    // [B, G, C/G, T, 1] -> [B, T, 1, G, C/G] against xf's [B, T, HW, G, C/G]; the result's [B, T, H, W, C]
    // permuted back is channels-last [B, C, T, H, W].
    const auto as_frames = [](const torch::Tensor& s) { return s.permute({0, 3, 4, 1, 2}); };
    y = torch::addcmul(as_frames(shift), xf, as_frames(scale))
            .reshape({b, t, x.size(3), x.size(4), c})
            .permute({0, 4, 1, 2, 3});
  } else {
    y = torch::addcmul(shift, xf, scale).reshape(x.sizes());
  }
  if (silu) y = torch::silu_(y);
  return y.to(x.scalar_type());
}

SeedVR2ResnetBlock::SeedVR2ResnetBlock(int64_t in, int64_t out, int64_t groups) {
  norm1_ = register_module("norm1", std::make_shared<FrameGroupNorm>(in, groups));
  conv1_ = register_module("conv1", seedvr2_conv3(in, out));
  norm2_ = register_module("norm2", std::make_shared<FrameGroupNorm>(out, groups));
  conv2_ = register_module("conv2", seedvr2_conv3(out, out));
  if (in != out)
    shortcut_ = register_module("conv_shortcut",
                                std::make_shared<CausalConv3d>(in, out, std::array<int64_t, 3>{1, 1, 1}));
}

torch::Tensor SeedVR2ResnetBlock::forward(const torch::Tensor& x, CausalCache& cache) {
  auto h = norm_silu_conv(*norm1_, *conv1_, x, cache);
  h = norm_silu_conv(*norm2_, *conv2_, h, cache);               // dropout is inactive at inference
  return h.add_(shortcut_ ? shortcut_->forward(x, cache) : x);  // h is this block's own tensor
}

SeedVR2Attention::SeedVR2Attention(int64_t channels, int64_t groups) {
  norm_ = register_module("group_norm", std::make_shared<FrameGroupNorm>(channels, groups));
  std::tie(q_weight_, q_bias_) = register_linear(*this, "to_q", channels, channels);
  std::tie(k_weight_, k_bias_) = register_linear(*this, "to_k", channels, channels);
  std::tie(v_weight_, v_bias_) = register_linear(*this, "to_v", channels, channels);
  auto to_out = register_module("to_out", std::make_shared<ModuleList>());
  std::tie(out_weight_, out_bias_) = register_linear(*to_out, "0", channels, channels);
}

torch::Tensor SeedVR2Attention::forward(const torch::Tensor& x, CausalCache& cache) {
  namespace F = torch::nn::functional;
  const int64_t b = x.size(0), c = x.size(1), t = x.size(2), h = x.size(3), w = x.size(4);
  // Tokens are the pixels of one frame: [B, C, T, H, W] -> [B*T, H*W, C].
  auto tokens = norm_->forward(x).permute({0, 2, 3, 4, 1}).reshape({b * t, h * w, c});
  // One head of width C: [B*T, 1, H*W, C]; the default scale 1/sqrt(C) is the reference's.
  auto q = F::linear(tokens, q_weight_, q_bias_).unsqueeze(1);
  auto k = F::linear(tokens, k_weight_, k_bias_).unsqueeze(1);
  auto v = F::linear(tokens, v_weight_, v_bias_).unsqueeze(1);
  auto attended = frame_attention(q, k, v);           // [B*T, H*W, C]
  FlopCounter::add(2.0 * b * t * h * w * c * 4 * c);  // the projections: 2*HW*C*(3C + C) per frame
  auto out = F::linear(attended, out_weight_, out_bias_);
  return x + out.reshape({b, t, h, w, c}).permute({0, 4, 1, 2, 3});
}

SeedVR2MidBlock::SeedVR2MidBlock(int64_t channels, int64_t groups) {
  auto resnets = register_module("resnets", std::make_shared<ModuleList>());
  first_ = resnets->add(0, std::make_shared<SeedVR2ResnetBlock>(channels, channels, groups));
  second_ = resnets->add(1, std::make_shared<SeedVR2ResnetBlock>(channels, channels, groups));
  auto attentions = register_module("attentions", std::make_shared<ModuleList>());
  attention_ = attentions->add(0, std::make_shared<SeedVR2Attention>(channels, groups));
}

torch::Tensor SeedVR2MidBlock::forward(const torch::Tensor& x, CausalCache& cache) {
  auto h = first_->forward(x, cache);
  h = attention_->forward(h, cache);
  return second_->forward(h, cache);
}

SeedVR2Downsample::SeedVR2Downsample(int64_t channels, bool temporal) {
  if (temporal) {
    conv_ = register_module(
        "conv", std::make_shared<CausalConv3d>(channels, channels, std::array<int64_t, 3>{3, 3, 3},
                                               std::array<int64_t, 3>{2, 2, 2},
                                               std::array<int64_t, 3>{1, 0, 0}, CausalPad::kReplicate));
  } else {
    conv_ = register_module(
        "conv", std::make_shared<CausalConv3d>(channels, channels, std::array<int64_t, 3>{1, 3, 3},
                                               std::array<int64_t, 3>{1, 2, 2}));
  }
}

torch::Tensor SeedVR2Downsample::forward(const torch::Tensor& x, CausalCache& cache) {
  // Zero-pad right and bottom by one, [B, C, T, H, W] -> [B, C, T, H + 1, W + 1], in the conv's buffer. In a
  // band of a split run the row below is the next band's, which the conv fetches itself.
  const int64_t h = x.size(3), w = x.size(4);
  const int64_t pad_rows = in_band() ? 0 : 1;
  auto buffer = conv_->prepare({x.size(0), x.size(1), x.size(2), h + pad_rows, w + 1},
                               CausalConv3d::layout_of(x), cache);
  if (pad_rows) buffer.fill.narrow(3, h, 1).zero_();
  buffer.fill.narrow(4, w, 1).zero_();
  buffer.fill.narrow(3, 0, h).narrow(4, 0, w).copy_(x);
  return conv_->run(buffer);
}

SeedVR2Upsample::SeedVR2Upsample(int64_t channels, bool temporal) : time_factor_(temporal ? 2 : 1) {
  upscale_conv_ = register_module(
      "upscale_conv",
      std::make_shared<CausalConv3d>(channels, channels * 4 * time_factor_, std::array<int64_t, 3>{1, 1, 1}));
  conv_ = register_module("conv", seedvr2_conv3(channels, channels));
}

torch::Tensor SeedVR2Upsample::forward(const torch::Tensor& x, CausalCache& cache) {
  const int64_t b = x.size(0), c = x.size(1), t = x.size(2), h = x.size(3), w = x.size(4);
  const int64_t z = time_factor_;
  auto y = upscale_conv_->forward(x, cache);  // [B, 2 * 2 * z * C, T, H, W]
  // b (x y z c) f h w -> b c (f z) (h x) (w y), read as [b, c, f, z, h, x, w, y]; copied once, straight into
  // the next conv's causal buffer (Note [Causal buffer]).
  auto shuffled = y.view({b, 2, 2, z, c, t, h, w}).permute({0, 4, 5, 3, 6, 1, 7, 2});
  CausalCache::Slot& slot = cache.next();
  const bool drop = z > 1 && !slot.started;  // Note [SeedVR2 upsampling and frame 0]
  auto buffer =
      conv_->prepare_with({b, c, t * z - (drop ? 1 : 0), 2 * h, 2 * w}, CausalConv3d::layout_of(y), slot);
  auto as_pairs = [&](const torch::Tensor& frames, int64_t pairs, int64_t per_pair) {
    return frames.view({b, c, pairs, per_pair, h, 2, w, 2});
  };
  if (drop) {
    as_pairs(buffer.fill.narrow(2, 0, 1), 1, 1).copy_(shuffled.narrow(2, 0, 1).narrow(3, 0, 1));
    if (t > 1) as_pairs(buffer.fill.narrow(2, 1, (t - 1) * z), t - 1, z).copy_(shuffled.narrow(2, 1, t - 1));
  } else {
    as_pairs(buffer.fill, t, z).copy_(shuffled);
  }
  y.reset();  // the widest tensor of the decoder: free before the conv allocates its output
  shuffled.reset();
  return conv_->run(buffer);
}

SeedVR2Stage::SeedVR2Stage(int64_t in, int64_t out, int64_t layers, int64_t groups,
                           const std::string& sampler_key, std::shared_ptr<CausalModule> sampler) {
  resnets_ = register_module("resnets", std::make_shared<CausalSequence>());
  for (int64_t i = 0; i < layers; ++i)
    resnets_->append(std::make_shared<SeedVR2ResnetBlock>(i == 0 ? in : out, out, groups));
  if (sampler) {
    auto samplers = register_module(sampler_key, std::make_shared<ModuleList>());
    sampler_ = samplers->add(0, std::move(sampler));
  }
}

torch::Tensor SeedVR2Stage::forward(const torch::Tensor& x, CausalCache& cache) {
  auto h = resnets_->forward(x, cache);
  return sampler_ ? sampler_->forward(h, cache) : h;
}

}  // namespace vaecodec::core
