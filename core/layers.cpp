#include "core/layers.h"

#include <algorithm>
#include <cmath>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include "core/band_exchange.h"
#include "core/error.h"
#include "core/flops.h"
#include "core/kernel_log.h"
#include "core/kernels/conv3d.h"
#include "core/kernels/cpu_norm.h"
#include "core/kernels/norm_silu.h"

namespace vaecodec::core {

void count_conv_flops(const torch::Tensor& out, const torch::Tensor& weight) {
  // A multiply-add per output element and weight of one output channel.
  if (!FlopCounter::enabled()) return;
  FlopCounter::add(2.0 * static_cast<double>(out.numel()) *
                   static_cast<double>(weight.numel() / weight.size(0)));
}

namespace {

// Note [Attention wider than the fused kernels]
// The families' mid-block attention is one head over a frame's latent pixels, as wide as the block: 384
// channels for Wan2.1, 512 for SeedVR2. PyTorch's fused kernels (FlashAttention, cuDNN's) take heads of up
// to 256 channels; wider ones fall back to the memory-efficient kernel, which on the H100 ran SeedVR2's at
// 118 TFLOP/s at 1080p and 77 TFLOP/s at 4K (scripts/dev/attention_probe.py: 18.2 and 446 ms a frame). On
// CUDA such attention runs in blocks of queries instead: a block's scores by one GEMM in float32 (the inputs
// in the model's dtype, the query scaled in it), their softmax in float32, the weights rounded to the dtype
// as the fused kernels round them, and a second GEMM: 11.1 and 185 ms a frame (194 and 186 TFLOP/s), with the
// error against float64 of the memory-efficient kernel (2.9e-3 against 2.3e-3 in bf16). The scratch (scores,
// softmax, weights) is held to kAttentionScratch, about what the memory-efficient kernel took at 4K. Every
// query's output is its own row's: the blocks change nothing but GEMM's choice of kernel for the last one,
// which is the same for every run of a frame size. Off CUDA, and for heads the fused kernels take, PyTorch's
// attention runs as before.
constexpr int64_t kFusedHeadLimit = 256;
constexpr int64_t kAttentionScratch = int64_t{512} << 20;

torch::Tensor attention_in_blocks(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t frames = q.size(0), queries = q.size(2), keys = k.size(2), channels = q.size(3);
  const bool reduced = q.scalar_type() != torch::kFloat && q.scalar_type() != torch::kDouble;
  const int64_t per_row = keys * (reduced ? 10 : 8);  // scores, softmax (and weights in the dtype)
  const int64_t rows = std::min(queries, std::max<int64_t>(64, kAttentionScratch / per_row / 64 * 64));
  const double scale = 1.0 / std::sqrt(static_cast<double>(channels));
  torch::Tensor out =
      torch::empty({frames, queries, channels}, q.options().memory_format(at::MemoryFormat::Contiguous));
  for (int64_t b = 0; b < frames; ++b) {
    const torch::Tensor queries_of = q.select(0, b).select(0, 0);
    const torch::Tensor keys_t = k.select(0, b).select(0, 0).contiguous().t();
    const torch::Tensor values = v.select(0, b).select(0, 0).contiguous();
    for (int64_t at = 0; at < queries; at += rows) {
      const int64_t n = std::min(rows, queries - at);
      const torch::Tensor block = queries_of.narrow(0, at, n) * scale;
      const torch::Tensor scores = reduced ? at::mm(block, keys_t, torch::kFloat) : at::mm(block, keys_t);
      const torch::Tensor weights = at::_softmax(scores, -1, false).to(q.scalar_type());
      torch::Tensor into = out.select(0, b).narrow(0, at, n);
      at::mm_out(into, weights, values);
    }
  }
  return out;
}

}  // namespace

torch::Tensor frame_attention(const torch::Tensor& q, torch::Tensor k, torch::Tensor v) {
  if (in_band()) {
    auto kv = concat_bands({k, v}, 2);
    k = kv[0];
    v = kv[1];
  }
  torch::Tensor attended;
  if (q.is_cuda() && q.size(3) > kFusedHeadLimit) {  // Note [Attention wider than the fused kernels]
    if (KernelLog::enabled()) KernelLog::count("attention", "blocks of queries");
    attended = attention_in_blocks(q, k, v);
  } else {
    log_attention_backend(q, k, v);
    attended = at::scaled_dot_product_attention(q, k, v).squeeze(1);
  }
  // Scores and weighted sum: 2 * 2 * queries * keys * C per frame.
  FlopCounter::add(4.0 * static_cast<double>(q.size(0)) * static_cast<double>(q.size(2)) *
                   static_cast<double>(k.size(2)) * static_cast<double>(q.size(3)));
  return attended;
}

namespace {

int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t padding) {
  return (in + 2 * padding - kernel) / stride + 1;
}

int64_t conv_output_elements(const torch::Tensor& x, const torch::Tensor& weight,
                             std::array<int64_t, 3> stride, std::array<int64_t, 3> padding) {
  int64_t n = x.size(0) * weight.size(0);
  for (int d = 0; d < 3; ++d) n *= conv_output_size(x.size(2 + d), weight.size(2 + d), stride[d], padding[d]);
  return n;
}

// The input of output positions [first, last) along dim (2: frames, 3: rows): the positions they read, with
// the zeros of the padding that fall outside the input added, so that it is convolved without padding there.
torch::Tensor conv_input_piece(const torch::Tensor& x, int dim, int64_t first, int64_t last, int64_t kernel,
                               int64_t stride, int64_t padding) {
  const int64_t from = first * stride - padding, to = (last - 1) * stride - padding + kernel;
  const int64_t size = x.size(dim), begin = std::max<int64_t>(from, 0), end = std::min(to, size);
  auto piece = x.narrow(dim, begin, end - begin);
  if (begin == from && end == to) return piece;
  // constant_pad_nd's pairs run from the last dimension: (W, H, T).
  std::vector<int64_t> pad(6, 0);
  const int pair = 2 * (4 - dim);
  pad[pair] = begin - from;
  pad[pair + 1] = to - end;
  return at::constant_pad_nd(piece, pad, 0);
}

}  // namespace

torch::Tensor conv3d_in_pieces(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                               std::array<int64_t, 3> stride, std::array<int64_t, 3> padding,
                               int64_t max_elements, int64_t piece_output) {
  std::array<int64_t, 3> out_size{};
  for (int d = 0; d < 3; ++d)
    out_size[d] = conv_output_size(x.size(2 + d), weight.size(2 + d), stride[d], padding[d]);
  const int64_t frame_in = x.numel() / std::max<int64_t>(x.size(2), 1);
  const int64_t frame_out = x.size(0) * weight.size(0) * out_size[1] * out_size[2];
  // Output frames per piece: as many as keep the piece's input and output under the limit and its output
  // under piece_output; where one frame does not fit the limit, one frame and bands of rows (dim 3).
  const int64_t out_limit = std::min(max_elements, piece_output);
  const int64_t frames = std::max<int64_t>(
      1, std::min((out_limit / std::max<int64_t>(frame_out, 1)),
                  ((max_elements / std::max<int64_t>(frame_in, 1)) - weight.size(2)) / stride[0] + 1));
  const int64_t row_in = frame_in / std::max<int64_t>(x.size(3), 1) * weight.size(2);
  const int64_t row_out = frame_out / std::max<int64_t>(out_size[1], 1);
  const bool bands = frame_in * weight.size(2) > max_elements || frame_out > max_elements;
  const int64_t rows =
      bands ? std::max<int64_t>(
                  1, std::min(out_limit / std::max<int64_t>(row_out, 1),
                              (max_elements / std::max<int64_t>(row_in, 1) - weight.size(3)) / stride[1] + 1))
            : out_size[1];
  KernelLog::count("conv3d", "in pieces (past 2^31 elements)");
  auto out = torch::empty({x.size(0), weight.size(0), out_size[0], out_size[1], out_size[2]},
                          x.options().memory_format(x.suggest_memory_format()));
  const std::vector<int64_t> s(stride.begin(), stride.end()), band_padding{0, 0, padding[2]},
      frame_padding{0, padding[1], padding[2]};
  for (int64_t t = 0; t < out_size[0]; t += frames) {
    const int64_t t_end = std::min(out_size[0], t + frames);
    const auto in_t = conv_input_piece(x, 2, t, t_end, weight.size(2), stride[0], padding[0]);
    if (!bands) {  // whole frames: the input in place, the rows' padding the convolution's own
      out.narrow(2, t, t_end - t).copy_(at::conv3d(in_t, weight, bias, s, frame_padding));
      continue;
    }
    for (int64_t r = 0; r < out_size[1]; r += rows) {
      const int64_t r_end = std::min(out_size[1], r + rows);
      const auto in = conv_input_piece(in_t, 3, r, r_end, weight.size(3), stride[1], padding[1]);
      out.narrow(2, t, t_end - t)
          .narrow(3, r, r_end - r)
          .copy_(at::conv3d(in, weight, bias, s, band_padding));
    }
  }
  return out;
}

// Note [Convolutions on the CPU]
// LibTorch sends a float32 3-D convolution on the CPU to oneDNN only where its heuristic expects oneDNN to
// win; it does not for narrow layers (16 channels, the full-resolution layers of the small models), which go
// to its reference im2col path, 8-13x slower there (16 -> 16 channels, 3x3x3, 320x240: 72 ms against 5.5-9.4
// ms on the 2-core machine). Float32 convolutions on the CPU call oneDNN directly when LibTorch has it; the
// result differs from the reference path by float32's rounding (the order of the sums), as any two backends
// do. float64 (the golden tests) and 16-bit types keep LibTorch's own choice.
namespace {

torch::Tensor cpu_conv3d(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                         const std::vector<int64_t>& stride, const std::vector<int64_t>& padding) {
  if (at::hasMKLDNN() && x.scalar_type() == torch::kFloat && weight.scalar_type() == torch::kFloat &&
      (!bias.defined() || bias.scalar_type() == torch::kFloat))
    return at::mkldnn_convolution(x, weight,
                                  bias.defined() ? std::optional<torch::Tensor>(bias) : std::nullopt, padding,
                                  stride, /*dilation=*/{1, 1, 1}, /*groups=*/1);
  return at::conv3d(x, weight, bias, stride, padding);
}

}  // namespace

// Output elements of a piece of a convolution past 2^31 elements (Note [Convolutions past 2^31 elements]):
// 512 MiB in bf16; one frame where a frame is more (1 GiB for SeedVR2's 256 channels at 1080p).
constexpr int64_t kPieceOutput = int64_t{1} << 28;

torch::Tensor conv3d(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     FloatCopy& bias_f32, std::array<int64_t, 3> stride, std::array<int64_t, 3> padding,
                     const torch::Tensor& residual, kernels::PaddedWeights* padded) {
  if (x.is_cuda()) {
    auto out = kernels::conv3d_own(x, weight, bias.defined() ? bias_f32.of(bias) : bias, stride, padding,
                                   residual, padded);
    if (out.defined()) return out;
  }
  // Arrays, not braced lists: an IntArrayRef of a braced list would outlive the list.
  const std::vector<int64_t> s(stride.begin(), stride.end()), p(padding.begin(), padding.end());
  const auto whole = [&](const torch::Tensor& b) {
    // Note [Convolutions past 2^31 elements]
    if (x.is_cuda() &&
        (x.numel() > INT32_MAX || conv_output_elements(x, weight, stride, padding) > INT32_MAX))
      return conv3d_in_pieces(x, weight, b, stride, padding, INT32_MAX, kPieceOutput);
    if (x.is_cpu()) return cpu_conv3d(x, weight, b, s, p);
    return at::conv3d(x, weight, b, s, p);
  };
  if (!residual.defined()) return whole(bias);
  // Note [Deferred bias]: the bias goes with the residual, in one pass.
  auto out = whole({});
  if (bias.defined())
    add_residual(out, residual, bias, bias_f32);
  else
    out.add_(residual);
  return out;
}

CausalConv3d::CausalConv3d(int64_t in, int64_t out, std::array<int64_t, 3> kernel,
                           std::array<int64_t, 3> stride, std::array<int64_t, 3> padding, CausalPad pad)
    : stride_(stride), spatial_padding_{padding[1], padding[2]}, pad_front_(2 * padding[0]), pad_(pad) {
  weight_ = register_parameter("weight", torch::empty({out, in, kernel[0], kernel[1], kernel[2]}), false);
  bias_ = register_parameter("bias", torch::empty({out}), false);
  history_ = kernel[0] > 1 ? kernel[0] - stride[0] : 0;
  halo_top_ = padding[1];
  halo_bottom_ = std::max<int64_t>(0, kernel[1] - stride[1] - padding[1]);
}

Reach CausalConv3d::reach() const {
  // A same-size convolution: it reads `padding` pixels beyond each side of its output.
  const bool same = stride_[1] == 1 && stride_[2] == 1 && weight_.size(3) == 2 * spatial_padding_[0] + 1 &&
                    weight_.size(4) == 2 * spatial_padding_[1] + 1;
  if (!same) return Reach::whole_frame();
  return {std::max(spatial_padding_[0], spatial_padding_[1]), Resize::kSame, true};
}

Reach CausalSequence::reach() const {
  Reach total;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Reach r = blocks_[i]->reach();
    if (!r.local || (r.resize != Resize::kSame && i + 1 < blocks_.size())) return Reach::whole_frame();
    total.margin += r.margin;
    total.resize = r.resize;
    total.frame_norm = total.frame_norm || r.frame_norm;
  }
  return total;
}

bool CausalConv3d::needs_halo() const {
  return (halo_top_ > 0 || halo_bottom_ > 0) && in_band();
}

void CausalConv3d::allocate(Buffer& b, std::vector<int64_t> whole_sizes, int64_t past, int64_t frames,
                            int64_t rows, const torch::TensorOptions& options) const {
  if (needs_halo()) {
    b.top = halo_top_;
    b.bottom = halo_bottom_;
    whole_sizes[3] += b.top + b.bottom;
  }
  b.whole = torch::empty(whole_sizes, options);
  b.fill = b.whole.narrow(2, past, frames).narrow(3, b.top, rows);
}

torch::Tensor CausalConv3d::convolve(const torch::Tensor& x, bool with_bias) const {
  return convolve_rows(x, with_bias, spatial_padding_[0]);
}

torch::Tensor CausalConv3d::convolve_rows(const torch::Tensor& x, bool with_bias, int64_t row_padding,
                                          const torch::Tensor& residual,
                                          const torch::Tensor& input_scale) const {
  const std::array<int64_t, 3> padding{0, row_padding, spatial_padding_[1]};
  const auto& bias = with_bias ? bias_ : torch::Tensor();
  if (x.scalar_type() == c10::ScalarType::Float8_e4m3fn) {
    // Note [FP8 convolutions] in core/kernels/conv3d.cpp.
    auto out = kernels::conv3d_fp8(x, input_scale, weight_, bias.defined() ? bias_f32_.of(bias) : bias,
                                   stride_, padding, residual, fp8_);
    if (out.defined()) {
      count_conv_flops(out, weight_);
      return out;
    }
    // No fp8 tile took it after all (a layout the kernel refuses): the same values in bf16.
    return convolve_rows((x.to(torch::kFloat) / input_scale).to(weight_.scalar_type()), with_bias,
                         row_padding, residual);
  }
  auto out = core::conv3d(x, weight_, bias, bias_f32_, stride_, padding, residual, &padded_);
  count_conv_flops(out, weight_);
  return out;
}

torch::Tensor CausalConv3d::forward(const torch::Tensor& x, CausalCache& cache) {
  if (looks_back()) return forward_with(x, cache.next());
  if (!needs_halo()) return convolve(x);
  Buffer buffer = prepare(x, cache);
  buffer.fill.copy_(x);
  return run(buffer);
}

torch::Tensor CausalConv3d::forward_with(const torch::Tensor& x, CausalCache::Slot& slot) {
  Buffer buffer = prepare_with(x, slot);
  buffer.fill.copy_(x);
  return run(buffer);
}

CausalConv3d::Buffer CausalConv3d::prepare(at::IntArrayRef sizes, const torch::TensorOptions& options,
                                           CausalCache& cache) {
  if (looks_back()) return prepare_with(sizes, options, cache.next());
  Buffer b;
  allocate(b, sizes.vec(), 0, sizes[2], sizes[3], options);
  return b;
}

CausalConv3d::Buffer CausalConv3d::prepare_with(at::IntArrayRef sizes, const torch::TensorOptions& options,
                                                CausalCache::Slot& slot) {
  Buffer b;
  b.slot = &slot;
  const int64_t past = b.slot->history.defined() ? b.slot->history.size(2) : pad_front_;
  auto whole_sizes = sizes.vec();
  whole_sizes[2] += past;
  allocate(b, std::move(whole_sizes), past, sizes[2], sizes[3], options);
  if (past > 0) {
    auto head = b.whole.narrow(2, 0, past);
    if (b.slot->history.defined())
      head.copy_(b.slot->history);
    else if (pad_ == CausalPad::kZeros)
      head.zero_();
    else
      b.replicate_pending = true;
  }
  return b;
}

void CausalConv3d::offer_history(Buffer& b) const {
  // Note [History written by the norm]
  // run() keeps the buffer's last `history_` frames as the next chunk's history: a copy of two frames per
  // causal convolution and chunk (118 ms of the 720p decode's 1.45 s on an H100, head copies included). When
  // the chunk alone holds them (no halo rows, one batch item, channels-last on the GPU), the norm kernel that
  // fills the buffer writes them a second time, into a tensor of their own, as it goes: the copy's read is
  // saved. A producer that cannot resets b.history and run() copies as before.
  const auto& fill = b.fill;
  if (!b.slot || history_ == 0 || fill.size(2) < history_ || b.top != 0 || b.bottom != 0 ||
      b.replicate_pending || fill.size(0) != 1 || !fill.is_cuda() ||
      !b.whole.is_contiguous(torch::MemoryFormat::ChannelsLast3d))
    return;
  // The old history is in the buffer's head by now (prepare_with's copy, queued before on this stream): let
  // it go before the new one is made, as run() would, so that the two are never held at once (both held, the
  // 720p decode's peak grew by 0.33 GiB).
  b.slot->history = torch::Tensor();
  std::vector<int64_t> sizes = fill.sizes().vec();
  sizes[2] = history_;
  b.history = torch::empty(sizes, fill.options().memory_format(torch::MemoryFormat::ChannelsLast3d));
}

torch::Tensor CausalConv3d::run(Buffer& b, bool with_bias, const torch::Tensor& residual,
                                const torch::Tensor& input_scale) {
  const int64_t past = b.whole.size(2) - b.fill.size(2);
  if (b.replicate_pending) {
    auto head = b.whole.narrow(2, 0, past);
    head.copy_(b.whole.narrow(2, past, 1).expand_as(head));
  }
  // The history keeps the halo rows too, so that the next chunk's buffer takes it whole; the next chunk
  // fetches them again.
  const bool halo = b.top > 0 || b.bottom > 0;
  if (halo) fill_halo(b.whole, b.top, b.bottom);
  if (b.slot) {
    if (history_ > 0) {
      // Note [History written by the norm]; counted for --verbose (Note [What the engine applied]).
      const bool written = b.history.defined();
      KernelLog::count("causal_history", written ? "written by the norm" : "copied");
      const int64_t keep = std::min(history_, b.whole.size(2));
      b.slot->history =
          written ? std::move(b.history) : b.whole.narrow(2, b.whole.size(2) - keep, keep).clone();
    }
    b.slot->started = true;
  }
  // Halo rows, where there are any, stand in for the vertical padding.
  return convolve_rows(b.whole, with_bias, halo ? 0 : spatial_padding_[0], residual, input_scale);
}

// Note [The RMS norm off the GPU]
// Off the GPU (the CPU, and float64 everywhere) the RMS norm is LibTorch's composite; where a SiLU follows it
// into a causal buffer in float32 with adjacent channels, the engine's one-pass kernel runs instead (Note
// [The CPU's norm in one pass] in core/kernels/cpu_norm.h). Its 2-norm over the channels
// (linalg_vector_norm along dim 1 of a [B, C, T, H, W] tensor) walks the channels with a stride of a whole
// plane and took as long as the convolution beside it: 36 ms for 16 x 4 x 240 x 320 on two cores, where
// adding the channels' squares plane by plane takes 1 ms (and about the norm's time for many channels on
// small planes); a traced CPU encode of 320x240 x49 with the trained tiny Wan2.1 model spent 2.4 s in it.
// Plane by plane, every pixel adds its channels in the same order whatever the clip's length, so a stream's
// blocks keep the whole clip's result bit for bit (LibTorch's sum over the channels splits them among threads
// when there are few pixels). Channels-last (float32 on the CPU, Note [Channels-last on the CPU] in
// core/models/registry.cpp) a plane is every C-th value, and C strided passes read the whole tensor C times:
// there each pixel sums its adjacent channels itself, in the same order (the 2-core machine, the round trip
// of 320x240 x49 with the demonstration Wan2.1: 11.1-11.5 s against 11.9-13.6 s, `bench`, pairs).
RMSNorm::RMSNorm(int64_t channels, int gamma_rank) : channels_(channels) {
  std::vector<int64_t> shape(gamma_rank, 1);
  shape[0] = channels;
  gamma_ = register_parameter("gamma", torch::empty(shape), false);
}

torch::Tensor RMSNorm::forward(const torch::Tensor& x) const {
  if (x.is_cuda() &&
      x.dim() == 5) {  // one pass instead of LibTorch's five (norm, clamp, divide, two products)
    auto out = torch::empty_like(x, torch::MemoryFormat::Preserve);
    if (kernels::rms_norm_into(x, gamma_f32_.of(gamma_), out)) return out;
  }
  const auto compute = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  auto out = torch::empty_like(x, x.options().dtype(compute), torch::MemoryFormat::Preserve);
  composite_into(x.to(compute), out);
  return out.to(x.scalar_type());
}

namespace {

// Each pixel's sum of its channels' squares, channel 0 first, for a channels-last [B, C, T, H, W] on the CPU:
// [B, T, H, W]. Its channels are adjacent in memory, so the sums read the tensor once (Note [The RMS norm off
// the GPU]).
torch::Tensor channel_squares_last(const torch::Tensor& xf) {
  const int64_t channels = xf.size(1);
  const auto pixels = xf.permute({0, 2, 3, 4, 1}).reshape({-1, channels});  // a view: the memory's order
  auto squares = torch::empty({pixels.size(0)}, pixels.options());
  AT_DISPATCH_FLOATING_TYPES(pixels.scalar_type(), "channel_squares_last", [&] {
    const scalar_t* in = pixels.data_ptr<scalar_t>();
    scalar_t* sums = squares.data_ptr<scalar_t>();
    at::parallel_for(0, pixels.size(0), 4096, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const scalar_t* row = in + p * channels;
        scalar_t sum = row[0] * row[0];
        for (int64_t c = 1; c < channels; ++c) sum += row[c] * row[c];
        sums[p] = sum;
      }
    });
  });
  return squares.reshape({xf.size(0), xf.size(2), xf.size(3), xf.size(4)});
}

}  // namespace

// Note [The RMS norm off the GPU]: x / max(||x||, 1e-12) over the channels from their sum of squares, added
// channel by channel, divided straight into `out` (of x's compute dtype), then times sqrt(C) * gamma.
void RMSNorm::composite_into(const torch::Tensor& xf, torch::Tensor out) const {
  torch::Tensor squares;
  if (xf.dim() == 5 && xf.is_cpu() && xf.is_contiguous(torch::MemoryFormat::ChannelsLast3d) &&
      !xf.is_contiguous()) {
    squares = channel_squares_last(xf);
  } else {
    squares = xf.select(1, 0).square();
    for (int64_t c = 1; c < xf.size(1); ++c) squares.addcmul_(xf.select(1, c), xf.select(1, c));
  }
  auto norm = squares.unsqueeze(1).sqrt_().clamp_min_(1e-12);
  auto g = gamma_.to(xf.scalar_type()).reshape({channels_, 1, 1, 1});
  if (xf.dim() == 4) g = g.reshape({channels_, 1, 1});
  at::div_out(out, xf, norm);
  out.mul_(std::sqrt(static_cast<double>(channels_)) * g);
}

bool RMSNorm::forward_silu_into(const torch::Tensor& x, const torch::Tensor& out, const torch::Tensor& bias,
                                const torch::Tensor& tail) const {
  bool tail_written = false;
  if (x.is_cuda() &&
      kernels::rms_norm_silu_into(x, gamma_f32_.of(gamma_), out, bias.defined() ? bias_f32_.of(bias) : bias,
                                  tail, &tail_written))
    return tail_written;
  const auto compute = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  // Note [The CPU's norm in one pass] in core/kernels/cpu_norm.h; the same sqrt(C) * gamma as composite_into.
  if (x.is_cpu() && kernels::rms_norm_silu_cpu(x, gamma_f32_.of(gamma_),
                                               static_cast<float>(std::sqrt(channels_)), out, bias))
    return false;
  const auto biased = bias.defined() ? x + bias.reshape({channels_, 1, 1, 1}) : x;
  if (out.scalar_type() == compute && !x.is_cuda()) {
    // Off the GPU the norm divides into the causal buffer itself and the SiLU runs there in place: on two
    // cores the traced CPU round trip of 320x240 x49 with the trained tiny Wan2.1 model had spent 3.8 s on
    // the normalised chunk's own allocation, its SiLU's and the copy into the buffer (Note [The RMS norm off
    // the GPU]). The same operations in the same order as forward() and torch::silu.
    torch::Tensor into = out;  // a handle to the caller's buffer
    composite_into(biased.to(compute), into);
    torch::silu_(into);
    return false;
  }
  out.copy_(torch::silu(forward(biased)));
  return false;
}

const torch::Tensor& RMSNorm::fp8_scale() const {
  const auto& g = gamma_f32_.of(gamma_);
  if (!fp8_scale_.defined() || fp8_scale_source_ != g.data_ptr()) {
    // Note [FP8 convolutions]: |SiLU(z)| <= max(|z|, 0.28) and |z| <= sqrt(C) * max|gamma| after the norm.
    const auto bound =
        (g.abs().max() * std::sqrt(static_cast<double>(channels_))).clamp_min(0.28).reshape({1});
    fp8_scale_ = torch::exp2(torch::floor(torch::log2(448.0 / bound))).clamp(1.0 / 65536, 65536);
    fp8_scale_source_ = g.data_ptr();
  }
  return fp8_scale_;
}

bool RMSNorm::forward_silu_fp8_into(const torch::Tensor& x, const torch::Tensor& out,
                                    const torch::Tensor& bias, const torch::Tensor& tail) const {
  const auto& scale = fp8_scale();
  bool tail_written = false;
  if (x.is_cuda() &&
      kernels::rms_norm_silu_fp8_into(x, gamma_f32_.of(gamma_), out, scale,
                                      bias.defined() ? bias_f32_.of(bias) : bias, tail, &tail_written))
    return tail_written;
  const auto y = torch::silu(forward(bias.defined() ? x + bias.reshape({channels_, 1, 1, 1}) : x));
  out.copy_((y.to(torch::kFloat) * scale).clamp(-448, 448));
  return false;
}

void add_residual(const torch::Tensor& y, const torch::Tensor& s, const torch::Tensor& bias,
                  FloatCopy& bias_f32) {
  if (y.is_cuda() && kernels::add_residual_(y, s, bias_f32.of(bias))) return;
  if (y.is_cpu() && kernels::add_residual_cpu(y, s, bias)) return;  // Note [The CPU's norm in one pass]
  y.add_(s);
  y.add_(bias.reshape({-1, 1, 1, 1}));
}

}  // namespace vaecodec::core
