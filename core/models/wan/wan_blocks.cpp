#include "core/models/wan/wan_blocks.h"

#include <cmath>

#include "core/band_exchange.h"
#include "core/flops.h"
#include "core/kernels/norm_silu.h"

namespace vaecodec::core {

std::shared_ptr<CausalConv3d> wan_conv3(int64_t in, int64_t out) {
  return std::make_shared<CausalConv3d>(in, out, std::array<int64_t, 3>{3, 3, 3},
                                        std::array<int64_t, 3>{1, 1, 1}, std::array<int64_t, 3>{1, 1, 1});
}

std::shared_ptr<CausalConv3d> wan_conv1(int64_t in, int64_t out) {
  return std::make_shared<CausalConv3d>(in, out, std::array<int64_t, 3>{1, 1, 1});
}

WanResidualBlock::WanResidualBlock(int64_t in, int64_t out) {
  auto residual = register_module("residual", std::make_shared<ModuleList>());
  norm1_ = residual->add(0, std::make_shared<RMSNorm>(in));
  conv1_ = residual->add(2, wan_conv3(in, out));
  norm2_ = residual->add(3, std::make_shared<RMSNorm>(out));
  conv2_ = residual->add(6, wan_conv3(out, out));
  if (in != out) shortcut_ = register_module("shortcut", wan_conv1(in, out));
}

torch::Tensor WanResidualBlock::forward(const torch::Tensor& x, CausalCache& cache) {
  // Each convolution's bias is added by the pass after it (Note [Deferred bias]); dropout is inactive at
  // inference.
  torch::Tensor h = norm_silu_conv_deferred(*norm1_, *conv1_, x, {}, cache);
  // Where the shortcut is x itself, the second convolution adds it with its bias (in its epilogue on the own
  // kernel: Note [Own convolutions]); a shortcut convolution's output is made only after it, so that it never
  // stands beside the block's other activations.
  if (!shortcut_) return norm_silu_conv_deferred(*norm2_, *conv2_, std::move(h), conv1_->bias(), cache, x);
  h = norm_silu_conv_deferred(*norm2_, *conv2_, std::move(h), conv1_->bias(), cache);
  add_residual(h, shortcut_->forward(x, cache), conv2_->bias(), bias2_f32_);  // h is our own
  return h;
}

WanAttentionBlock::WanAttentionBlock(int64_t channels) {
  norm_ = register_module("norm", std::make_shared<RMSNorm>(channels, /*gamma_rank=*/3));
  auto qkv = register_module("to_qkv", std::make_shared<torch::nn::Module>());
  qkv_weight_ = qkv->register_parameter("weight", torch::empty({3 * channels, channels, 1, 1}), false);
  qkv_bias_ = qkv->register_parameter("bias", torch::empty({3 * channels}), false);
  auto proj = register_module("proj", std::make_shared<torch::nn::Module>());
  proj_weight_ = proj->register_parameter("weight", torch::empty({channels, channels, 1, 1}), false);
  proj_bias_ = proj->register_parameter("bias", torch::empty({channels}), false);
}

// Note [Projections as convolutions]
// The projections in and out of the attention are 1x1 convolutions over channels-last pixels, which is what
// the own convolution kernels run (Note [Own convolutions] in core/kernels/conv3d.h): on Hopper they take
// them, the bias and the block's residual in the epilogue, and the process never starts cuBLAS (whose first
// call cost a fresh 720p decode 85 ms). Elsewhere, or when the kernels decline, LibTorch's linear as before.
torch::Tensor WanAttentionBlock::forward(const torch::Tensor& x, CausalCache& cache) {
  const int64_t b = x.size(0), c = x.size(1), t = x.size(2), h = x.size(3), w = x.size(4);
  // Tokens are the pixels of one frame: [B, C, T, H, W] -> [B*T, H*W, C].
  const auto normed = norm_->forward(x);
  const auto tokens_of = [&](const torch::Tensor& y) {
    return y.permute({0, 2, 3, 4, 1}).reshape({b * t, h * w, y.size(1)});
  };
  torch::Tensor qkv;  // [B*T, HW, 3C]
  if (x.is_cuda()) {
    qkv = kernels::conv3d_own(normed, qkv_weight_.unsqueeze(2), qkv_bias_f32_.of(qkv_bias_), {1, 1, 1},
                              {0, 0, 0});
    if (qkv.defined()) qkv = tokens_of(qkv);
  }
  if (!qkv.defined())
    qkv = torch::nn::functional::linear(tokens_of(normed), qkv_weight_.flatten(1), qkv_bias_);
  auto q = qkv.narrow(2, 0, c).unsqueeze(1);
  auto k = qkv.narrow(2, c, c).unsqueeze(1);
  auto v = qkv.narrow(2, 2 * c, c).unsqueeze(1);
  auto attended = frame_attention(q, k, v);           // [B*T, HW, C]
  FlopCounter::add(2.0 * b * t * h * w * c * 4 * c);  // the projections: 2*HW*C*(3C + C) per frame
  if (x.is_cuda()) {
    const auto pixels = attended.reshape({b, t, h, w, c}).permute({0, 4, 1, 2, 3});  // channels-last
    auto out = kernels::conv3d_own(pixels, proj_weight_.unsqueeze(2), proj_bias_f32_.of(proj_bias_),
                                   {1, 1, 1}, {0, 0, 0}, x);
    if (out.defined()) return out;
  }
  auto out = torch::nn::functional::linear(attended, proj_weight_.flatten(1), proj_bias_);
  return out.reshape({b, t, h, w, c}).permute({0, 4, 1, 2, 3}) + x;
}

std::shared_ptr<CausalSequence> wan_middle(int64_t channels) {
  auto middle = std::make_shared<CausalSequence>();
  middle->append(std::make_shared<WanResidualBlock>(channels, channels));
  middle->append(std::make_shared<WanAttentionBlock>(channels));
  middle->append(std::make_shared<WanResidualBlock>(channels, channels));
  return middle;
}

WanHead::WanHead(int64_t in, int64_t out) {
  norm_ = register_module("0", std::make_shared<RMSNorm>(in));
  conv_ = register_module("2", wan_conv3(in, out));  // position 1 is the SiLU
}

torch::Tensor WanHead::forward(const torch::Tensor& x, CausalCache& cache) {
  return norm_silu_conv(*norm_, *conv_, x, cache);
}

void interleave_frames_into(const torch::Tensor& y, const torch::Tensor& out) {
  const int64_t b = y.size(0), c = y.size(1) / 2, t = y.size(2), h = y.size(3), w = y.size(4);
  // Splitting a dimension is a view in any layout: y's channels -> (pair, C), out's frames -> (t, pair).
  out.view({b, c, t, 2, h, w}).copy_(y.view({b, 2, c, t, h, w}).permute({0, 2, 3, 1, 4, 5}));
}

WanResample::WanResample(int64_t channels, ResampleMode mode, int64_t spatial_out) : mode_(mode) {
  auto resample = register_module("resample", std::make_shared<ModuleList>());
  auto conv = resample->add(1, std::make_shared<torch::nn::Module>());
  weight_ = conv->register_parameter("weight", torch::empty({spatial_out, channels, 3, 3}), false);
  bias_ = conv->register_parameter("bias", torch::empty({spatial_out}), false);
  if (mode == ResampleMode::kUpsample3d) {
    time_conv_ = register_module(
        "time_conv",
        std::make_shared<CausalConv3d>(channels, 2 * channels, std::array<int64_t, 3>{3, 1, 1},
                                       std::array<int64_t, 3>{1, 1, 1}, std::array<int64_t, 3>{1, 0, 0}));
  } else if (mode == ResampleMode::kDownsample3d) {
    time_conv_ = register_module(
        "time_conv", std::make_shared<CausalConv3d>(channels, channels, std::array<int64_t, 3>{3, 1, 1},
                                                    std::array<int64_t, 3>{2, 1, 1}));
  }
}

// Note [Upsampling on the input grid]
// The reference upsamples 2x (nearest) and then runs a 3x3 convolution over the large grid: 9 taps per output
// pixel, most of them landing on copies of the same input pixel. Output pixel (2i + a, 2j + b) sees input
// rows {i - 1, i} when a = 0 (tap 0 on row i - 1, taps 1 and 2 on row i) and {i, i + 1} when a = 1 (taps 0
// and 1 on row i, tap 2 on row i + 1), and likewise for columns. So each of the four output phases (a, b) is
// a 2x2 convolution of the input with summed taps, and one 2x2 convolution (padding 1) with 4x the output
// channels, r[k = 2a + b][i', j'], gives them all: out[2i + a, 2j + b] = r[k][i + a, j + b]. 16 multiply-adds
// per input pixel and output channel instead of 36, and no 4x upsampled copy of the input (H100, bf16, 192 ->
// 96 channels to 1280x720, 4 frames: 7.47 -> 4.98 ms with the interleave; scripts/dev/upsample_micro.py). The
// same function: the summed taps differ from the reference's sums only in rounding (float64: 1e-17 relative).
// The model's FLOPs are still counted as the reference's.
torch::Tensor WanResample::upsample(const torch::Tensor& x) {
  const auto format = x.suggest_memory_format();
  if (!phase_weight_.defined() || phase_source_ != weight_.data_ptr() ||
      phase_weight_.device() != x.device() || phase_weight_.scalar_type() != x.scalar_type() ||
      !phase_weight_.is_contiguous(format)) {
    const auto w = weight_.to(torch::kDouble);  // [O, C, 3, 3]
    // Per phase along one axis: the taps that land on the first and on the second input pixel.
    auto pair = [](const torch::Tensor& t, int64_t dim, int a) {
      auto tap = [&](int64_t k) { return t.select(dim, k); };
      return a == 0 ? torch::stack({tap(0), tap(1) + tap(2)}, dim)
                    : torch::stack({tap(0) + tap(1), tap(2)}, dim);
    };
    std::vector<torch::Tensor> phases;
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b) phases.push_back(pair(pair(w, 2, a), 3, b));
    phase_weight_ =
        torch::cat(phases, 0).unsqueeze(2).to(x.scalar_type()).contiguous(format);  // [4O, C, 1, 2, 2]
    phase_source_ = weight_.data_ptr();
  }
  const int64_t n = x.size(0), t = x.size(2), h = x.size(3), w = x.size(4), o = weight_.size(0);
  // In a band the rows above and below come from the neighbours instead of the padding.
  FloatCopy no_bias;
  auto r = in_band()
               ? conv3d(with_halo(x, 1, 1), phase_weight_, {}, no_bias, {1, 1, 1}, {0, 0, 1})
               : conv3d(x, phase_weight_, {}, no_bias, {1, 1, 1}, {0, 1, 1});  // [N, 4O, T, H + 1, W + 1]
  auto out = torch::empty({n, o, t, 2 * h, 2 * w}, x.options().memory_format(format));
  if (!x.is_cuda() || !kernels::interleave_phases_into(r, bias_f32_.of(bias_), out)) {
    // Splitting a dimension is a view in any layout: H -> (h, a), W -> (w, b), the channels -> (phase, O).
    auto grid = out.view({n, o, t, h, 2, w, 2});
    auto parts = r.view({n, 4, o, t, h + 1, w + 1});
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b)
        grid.select(4, a).select(5, b).copy_(parts.select(1, 2 * a + b).narrow(3, a, h).narrow(4, b, w));
    out.add_(bias_.reshape({-1, 1, 1, 1}));
  }
  count_conv_flops(out, weight_);
  return out;
}

Reach WanResample::reach() const {
  const bool up = mode_ == ResampleMode::kUpsample2d || mode_ == ResampleMode::kUpsample3d;
  return {0, up ? Resize::kUp2 : Resize::kDown2};  // the 3x3 convolution's pixel is in the rule
}

torch::Tensor WanResample::spatial(const torch::Tensor& x) {
  if (mode_ == ResampleMode::kDownsample2d || mode_ == ResampleMode::kDownsample3d) {
    // Zero-pad right and bottom by one, then a stride-2 3x3 conv; in a band the row below is the next band's.
    const auto w = weight_.unsqueeze(2);  // [out, C, 1, 3, 3]
    auto padded = in_band() ? with_halo(torch::constant_pad_nd(x, {0, 1}), 0, 1)
                            : torch::constant_pad_nd(x, {0, 1, 0, 1}).contiguous(x.suggest_memory_format());
    auto out = conv3d(padded, w, bias_, bias_f32_, {1, 2, 2}, {0, 0, 0});
    count_conv_flops(out, w);
    return out;
  }
  return upsample(x);
}

// Note [Doubled frames' layout]
// upsample3d hands its spatial part one tensor, dense in the layout of its input x (channels-last on the
// GPU): frame 0 when the chunk has it, then the doubled frames, written there by one copy. The reshape this
// replaced copied only when it had to: for t = 1 (every chunk of one latent frame after the first) it
// returned a view of the temporal conv's output whose channels are 1 apart but whose columns are 2C apart,
// neither layout. suggest_memory_format() calls that contiguous, so the phase convolution copied it into
// NCDHW and answered in NCDHW, and the fused interleave, the next residual block's norm (its causal buffer
// laid out like x) and its residual add (the 1x1x1 shortcut's weight is contiguous and channels-last at
// once, so its output followed x) all took the composite path: 20 times each in the 21 chunks of a Wan2.1
// 720p decode on the H100. A first chunk of several latent frames lost the layout the same way, in cat()
// with frame 0. The one copy left is the one the convolution made, now into the right layout; cat()'s is
// gone.
torch::Tensor WanResample::forward(const torch::Tensor& x, CausalCache& cache) {
  switch (mode_) {
    case ResampleMode::kUpsample2d:
    case ResampleMode::kDownsample2d:
      return spatial(x);
    case ResampleMode::kUpsample3d: {
      CausalCache::Slot& slot = cache.next();
      torch::Tensor head, rest = x;
      if (!slot.started) {  // frame 0: untouched here, and the conv's history starts after it
        slot.started = true;
        head = x.narrow(2, 0, 1);
        rest = x.narrow(2, 1, x.size(2) - 1);
      }
      if (rest.size(2) == 0) return spatial(head);
      auto y = time_conv_->forward_with(rest, slot);  // [B, 2C, t, H, W]
      // Note [Doubled frames' layout]: frame 0 when the chunk has it, then the doubled frames, in one tensor
      // dense in the block's layout.
      const int64_t first = head.defined() ? 1 : 0;
      auto frames = torch::empty({x.size(0), x.size(1), first + 2 * y.size(2), x.size(3), x.size(4)},
                                 CausalConv3d::layout_of(x));
      if (head.defined()) frames.narrow(2, 0, 1).copy_(head);
      interleave_frames_into(y, frames.narrow(2, first, 2 * y.size(2)));
      y.reset();  // before the spatial convolution allocates its output
      return spatial(frames);
    }
    case ResampleMode::kDownsample3d: {
      auto y = spatial(x);
      CausalCache::Slot& slot = cache.next();
      torch::Tensor head, input;
      if (!slot.started) {
        slot.started = true;
        head = y.narrow(2, 0, 1);
        input = y;
      } else {
        input = torch::cat({slot.history, y}, 2);
      }
      slot.history = input.narrow(2, input.size(2) - 1, 1).clone();
      if (input.size(2) < 3) return head.defined() ? head : input.narrow(2, 0, 0);
      auto out = time_conv_->convolve(input);
      return head.defined() ? torch::cat({head, out}, 2) : out;
    }
  }
  return x;
}

}  // namespace vaecodec::core
