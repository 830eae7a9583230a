#include "core/models/ltx2/ltx2_blocks.h"

#include <algorithm>

#include "core/band_exchange.h"
#include "core/error.h"
#include "core/kernels/norm_silu.h"

namespace vaecodec::core {
namespace {

constexpr double kPixelNormEps = 1e-8;

// x normed by the CUDA kernel into `out` (Note [LTX-2 pixel norm on the GPU]); false, and nothing written,
// where the kernel does not apply: on the CPU, in float64, or for a layout it refuses. With
// `refusal_expected` (a buffer the caller fills otherwise where the layouts differ) such a layout is not
// offered to the kernel, whose refusal the kernel log would count as a composite norm.
bool pixel_norm_kernel(const torch::Tensor& x, const torch::Tensor& out, bool refusal_expected) {
  if (!x.is_cuda() || x.scalar_type() == torch::kDouble) return false;
  const torch::Tensor in = kernels::dense_operand(x);
  if (refusal_expected && !kernels::rms_norm_silu_takes_layout(in, out)) return false;
  return kernels::pixel_norm_silu_into(in, kPixelNormEps, out);
}

// The first `frames` frames of what the slot holds followed by x; the rest stays in the slot. Aligns a
// residual with a path that runs behind it (Note [LTX-2 decoder lag]).
torch::Tensor take_aligned(CausalCache::Slot& slot, const torch::Tensor& x, int64_t frames) {
  const bool held = slot.history.defined() && slot.history.size(2) > 0;
  if (!held && frames == x.size(2)) return x;
  const torch::Tensor all = held ? torch::cat({slot.history, x}, 2) : x;
  if (frames > all.size(2))
    throw Error("ltx2-vae: a residual path is " + std::to_string(frames - all.size(2)) +
                " frames ahead of its input");
  slot.history = all.narrow(2, frames, all.size(2) - frames).clone();
  return all.narrow(2, 0, frames);
}

// Note [LTX-2 in bands]
// In a band of a split run (Note [Bands across devices] in core/band_exchange.h) a conv's input gets the row
// above and the row below its band from the neighbours (with_halo) in place of its padding: at an inner edge
// the halo is what the one-device conv reads there, whatever the padding mode. At the frame's top and bottom
// the padding applies: zeros (with_halo's own) or, reflecting, the frame's second row from the edge, which is
// the band's own second row, or its halo when the band is one row high. Columns are never cut by a band, so
// the width is padded as on one device. Every band holds the same frames at every conv (the time padding and
// the history depend on the chunking only), so the bands meet at the same exchanges.
torch::Tensor band_rows_padded(const torch::Tensor& x, bool reflect) {
  torch::Tensor whole = with_halo(x, 1, 1);
  if (!reflect) return whole;
  const BandContext& band = *current_band();
  if (band.band == 0) whole.narrow(3, 0, 1).copy_(whole.narrow(3, 2, 1));
  if (band.band + 1 == band.bands()) whole.narrow(3, -1, 1).copy_(whole.narrow(3, -3, 1));
  return at::reflection_pad3d(whole, {1, 1, 0, 0, 0, 0});
}

}  // namespace

LTX2Conv::LTX2Conv(int64_t in, int64_t out, Time time, bool reflect) : time_(time), reflect_(reflect) {
  auto conv = register_module("conv", std::make_shared<torch::nn::Module>());
  weight_ = conv->register_parameter("weight", torch::empty({out, in, 3, 3, 3}), false);
  bias_ = conv->register_parameter("bias", torch::empty({out}), false);
}

// Note [The norm into the conv's input]
// A convolution reads its history (or the clip's padding) and the chunk as one tensor in time. Instead of
// the norm writing a tensor that a concatenation then copies behind the history, the buffer is made first
// and the norm writes the chunk's frames straight into it: on CUDA the kernel takes the buffer's frames as
// its output (the same strides as a dense chunk where the batch is one), elsewhere the composite's result is
// copied there, which is what the concatenation did. The padding frames are copies of frames already in the
// buffer. Either way the convolution reads the values it read before, in one tensor fewer.
torch::Tensor LTX2Conv::input(const torch::Tensor& x, const CausalCache::Slot& slot, bool end,
                              bool norm) const {
  const int64_t t = x.size(2);
  const bool held = slot.history.defined();
  // Before the clip: frame 0 twice before a causal conv, once before one that looks ahead.
  const int64_t left = held ? slot.history.size(2) : t > 0 ? (time_ == Time::kCausal ? 2 : 1) : 0;
  const bool pad_end = end && time_ == Time::kLookAhead && left + t > 0;
  const int64_t frames = left + t + (pad_end ? 1 : 0);
  if (frames == 0) return {};
  const torch::Tensor& like = t > 0 ? x : slot.history;
  auto sizes = like.sizes().vec();
  sizes[2] = frames;
  torch::Tensor buffer = torch::empty(sizes, like.options().memory_format(like.suggest_memory_format()));
  if (held && left > 0) buffer.narrow(2, 0, left).copy_(slot.history);
  if (t > 0) {
    torch::Tensor into = buffer.narrow(2, left, t);
    // Where the buffer's frames are not laid out as the chunk (a plain layout), the norm writes its own
    // tensor, still in one kernel, and the copy follows.
    if (!(norm && pixel_norm_kernel(x, into, /*refusal_expected=*/true)))
      into.copy_(norm ? ltx2_pixel_norm_silu(x) : x);
    if (!held)
      for (int64_t i = 0; i < left; ++i) buffer.narrow(2, i, 1).copy_(into.narrow(2, 0, 1));
  }
  if (pad_end) buffer.narrow(2, frames - 1, 1).copy_(buffer.narrow(2, frames - 2, 1));
  return buffer;
}

torch::Tensor LTX2Conv::convolve(torch::Tensor buffer, CausalCache::Slot& slot, const torch::Tensor& like) {
  auto empty_output = [&] {
    return torch::empty({like.size(0), weight_.size(0), 0, like.size(3), like.size(4)}, like.options());
  };
  if (!buffer.defined()) return empty_output();
  const int64_t frames = buffer.size(2);
  // Kernel 3 in time: the next chunk needs the last two padded input frames.
  slot.history = buffer.narrow(2, std::max<int64_t>(frames - 2, 0), std::min<int64_t>(frames, 2)).clone();
  if (frames < 3) return empty_output();
  std::array<int64_t, 3> padding{0, 1, 1};
  if (in_band()) {
    buffer = band_rows_padded(buffer, reflect_);
    padding = {0, 0, reflect_ ? 0 : 1};
  } else if (reflect_) {
    buffer = at::reflection_pad3d(buffer, {1, 1, 1, 1, 0, 0});
    padding = {0, 0, 0};
  }
  auto out = conv3d(buffer, weight_, bias_, bias_f32_, {1, 1, 1}, padding);
  count_conv_flops(out, weight_);
  return out;
}

torch::Tensor LTX2Conv::forward(const torch::Tensor& x, CausalCache& cache, bool end) {
  CausalCache::Slot& slot = cache.next();
  return convolve(input(x, slot, end, false), slot, x);
}

torch::Tensor LTX2Conv::forward_normed(const torch::Tensor& x, CausalCache& cache, bool end) {
  CausalCache::Slot& slot = cache.next();
  return convolve(input(x, slot, end, true), slot, x);
}

// Note [LTX-2 pixel norm on the GPU]
// On CUDA the norm and the SiLU run as one kernel (kernels::pixel_norm_silu_into; Note [Two RMS norms] in
// core/kernels/norm_silu_kernel.cu): x read once, out written once in x's dtype, where the composite below
// makes a float32 copy, its square, the product and the SiLU, each a full pass of up to twice the
// activation's bytes. The kernel reads x dense, contiguous or channels-last-3d. A convolution's output is
// channels-last on the GPU and so is a resampler's folded or unfolded output (Note [Folds in the input's
// layout]); the chunk where a temporal upsampler drops its first frame is a view of it, dense while the batch
// is one item. A view dense in neither layout is copied once into the layout it suggests, still far less than
// the composite. out is laid out like what the kernel reads (kernels::norm_operands); a convolution after the
// norm takes it in its input buffer instead (Note [The norm into the conv's input]). The CPU and float64 keep
// the composite.
torch::Tensor ltx2_pixel_norm_silu(const torch::Tensor& x) {
  if (x.is_cuda() && x.scalar_type() != torch::kDouble) {
    const auto [in, out] = kernels::norm_operands(x);
    if (pixel_norm_kernel(in, out, /*refusal_expected=*/false)) return out;
  }
  const auto compute = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  const auto xf = x.to(compute);
  const auto y = xf * torch::rsqrt(xf.square().mean(1, /*keepdim=*/true) + kPixelNormEps);
  return torch::silu(y).to(x.scalar_type());
}

LTX2ResBlock::LTX2ResBlock(int64_t channels, LTX2Conv::Time time, bool reflect) {
  conv1_ = register_module("conv1", std::make_shared<LTX2Conv>(channels, channels, time, reflect));
  conv2_ = register_module("conv2", std::make_shared<LTX2Conv>(channels, channels, time, reflect));
}

torch::Tensor LTX2ResBlock::forward(const torch::Tensor& x, CausalCache& cache, bool end) {
  auto h = conv1_->forward_normed(x, cache, end);
  h = conv2_->forward_normed(h, cache, end);
  return h.add_(take_aligned(cache.next(), x, h.size(2)));
}

LTX2ResStage::LTX2ResStage(int64_t channels, int64_t layers, LTX2Conv::Time time, bool reflect) {
  auto list = register_module("res_blocks", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < layers; ++i)
    blocks_.push_back(list->add(i, std::make_shared<LTX2ResBlock>(channels, time, reflect)));
}

torch::Tensor LTX2ResStage::forward(const torch::Tensor& x, CausalCache& cache, bool end) {
  torch::Tensor h = x;
  for (auto& b : blocks_) h = b->forward(h, cache, end);
  return h;
}

// Note [Folds in the input's layout]
// Folding space or time into channels and back, and the patches at the edges, only move elements: each is
// one copy into an output made in the input's memory format (channels-last on the GPU, where the
// convolutions and norms around them run), through a view of the output split as the fold reads it. A
// reshape of the permuted input would leave the plain layout behind it, and every convolution and norm after
// an upsampler or a patch would run in it (or copy back).
namespace {

torch::Tensor empty_like_layout(const torch::Tensor& x, at::IntArrayRef sizes) {
  return torch::empty(sizes, x.options().memory_format(x.suggest_memory_format()));
}

}  // namespace

torch::Tensor space_to_depth(const torch::Tensor& x, std::array<int64_t, 3> s) {
  const int64_t b = x.size(0), c = x.size(1), t = x.size(2) / s[0], h = x.size(3) / s[1],
                w = x.size(4) / s[2];
  torch::Tensor out = empty_like_layout(x, {b, c * s[0] * s[1] * s[2], t, h, w});
  // out as [b, c, s0, s1, s2, t, h, w] takes x as [b, c, t, s0, h, s1, w, s2].
  out.unflatten(1, {c, s[0], s[1], s[2]})
      .copy_(x.unflatten(4, {w, s[2]})
                 .unflatten(3, {h, s[1]})
                 .unflatten(2, {t, s[0]})
                 .permute({0, 1, 3, 5, 7, 2, 4, 6}));
  return out;
}

torch::Tensor depth_to_space(const torch::Tensor& x, std::array<int64_t, 3> s) {
  const int64_t b = x.size(0), c = x.size(1) / (s[0] * s[1] * s[2]), t = x.size(2), h = x.size(3),
                w = x.size(4);
  torch::Tensor out = empty_like_layout(x, {b, c, t * s[0], h * s[1], w * s[2]});
  // out as [b, c, t, s0, h, s1, w, s2], permuted to x's [b, c, s0, s1, s2, t, h, w].
  out.unflatten(4, {w, s[2]})
      .unflatten(3, {h, s[1]})
      .unflatten(2, {t, s[0]})
      .permute({0, 1, 3, 5, 7, 2, 4, 6})
      .copy_(x.unflatten(1, {c, s[0], s[1], s[2]}));
  return out;
}

torch::Tensor ltx2_patchify(const torch::Tensor& x, int64_t p) {
  const int64_t b = x.size(0), c = x.size(1), t = x.size(2), h = x.size(3) / p, w = x.size(4) / p;
  torch::Tensor out = empty_like_layout(x, {b, c * p * p, t, h, w});
  // out as [b, c, kw, kh, t, h, w] takes x as [b, c, t, h, kh, w, kw].
  out.unflatten(1, {c, p, p})
      .copy_(x.unflatten(4, {w, p}).unflatten(3, {h, p}).permute({0, 1, 6, 4, 2, 3, 5}));
  return out;
}

torch::Tensor ltx2_unpatchify(const torch::Tensor& x, int64_t p) {
  const int64_t b = x.size(0), c = x.size(1) / (p * p), t = x.size(2), h = x.size(3), w = x.size(4);
  torch::Tensor out = empty_like_layout(x, {b, c, t, h * p, w * p});
  // out as [b, c, t, h, kh, w, kw] takes x as [b, c, kw, kh, t, h, w].
  out.unflatten(4, {w, p}).unflatten(3, {h, p}).copy_(
      x.unflatten(1, {c, p, p}).permute({0, 1, 4, 5, 3, 6, 2}));
  return out;
}

LTX2Downsampler::LTX2Downsampler(int64_t in, int64_t multiplier, std::array<int64_t, 3> stride)
    : stride_(stride), out_(in * multiplier) {
  const int64_t product = stride[0] * stride[1] * stride[2];
  if (out_ % product != 0 || (in * product) % out_ != 0)
    throw Error("ltx2-vae: a downsampler of " + std::to_string(in) + " -> " + std::to_string(out_) +
                " channels cannot fold " + std::to_string(product) + " positions");
  // The encoder pads space with zeros in both releases.
  conv_ = register_module("conv", std::make_shared<LTX2Conv>(in, out_ / product, LTX2Conv::Time::kCausal,
                                                             /*reflect=*/false));
}

torch::Tensor LTX2Downsampler::forward(const torch::Tensor& x, CausalCache& cache, bool end) {
  CausalCache::Slot& slot = cache.next();
  torch::Tensor in = x;
  if (stride_[0] == 2 && !slot.started && x.size(2) > 0) {
    in = torch::cat({x.narrow(2, 0, 1), x}, 2);  // frame 0 paired with itself
    slot.started = true;
  }
  if (in.size(2) % stride_[0] != 0)
    throw Error("ltx2-vae: a temporal downsampler got " + std::to_string(in.size(2)) +
                " frames, not a multiple of " + std::to_string(stride_[0]));
  auto main = space_to_depth(conv_->forward(in, cache, end), stride_);
  const auto folded = space_to_depth(in, stride_);
  const int64_t groups = folded.size(1) / out_;
  auto shortcut =
      folded.reshape({folded.size(0), out_, groups, folded.size(2), folded.size(3), folded.size(4)}).mean(2);
  return main.add_(shortcut);
}

Reach LTX2Downsampler::reach() const {
  return stride_[1] == 2 ? Reach{1, Resize::kDown2} : Reach{1};
}

LTX2Upsampler::LTX2Upsampler(int64_t in, int64_t multiplier, std::array<int64_t, 3> stride, bool residual,
                             bool reflect)
    : stride_(stride), multiplier_(multiplier), residual_(residual) {
  const int64_t product = stride[0] * stride[1] * stride[2];
  if ((in * product) % multiplier != 0 || in % multiplier != 0 || (residual && in % product != 0))
    throw Error("ltx2-vae: an upsampler of " + std::to_string(in) + " channels cannot unfold " +
                std::to_string(product) + " positions with multiplier " + std::to_string(multiplier));
  conv_ = register_module(
      "conv", std::make_shared<LTX2Conv>(in, in * product / multiplier, LTX2Conv::Time::kLookAhead, reflect));
}

torch::Tensor LTX2Upsampler::forward(const torch::Tensor& x, CausalCache& cache, bool end) {
  auto y = depth_to_space(conv_->forward(x, cache, end), stride_);
  CausalCache::Slot& waiting = cache.next();  // the input frames the residual adds, behind the conv
  if (residual_) {
    const int64_t product = stride_[0] * stride_[1] * stride_[2];
    const auto r = depth_to_space(take_aligned(waiting, x, y.size(2) / stride_[0]), stride_);
    // The residual's channels repeated product / multiplier times along y's: added through a view of y's
    // channels as [copies, r's channels] with r broadcast over the copies, instead of a repeated copy of r.
    y.unflatten(1, {product / multiplier_, r.size(1)}).add_(r.unsqueeze(1));
  }
  CausalCache::Slot& first = cache.next();  // whether the first output frame has been dropped
  if (stride_[0] == 2 && !first.started && y.size(2) > 0) {
    y = y.narrow(2, 1, y.size(2) - 1);
    first.started = true;
  }
  return y;
}

Reach LTX2Upsampler::reach() const {
  return stride_[1] == 2 ? Reach{0, Resize::kUp2} : Reach{1};
}

}  // namespace vaecodec::core
