#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/causal_cache.h"
#include "core/kernels/conv3d.h"
#include "core/reach.h"
#include "core/stage_timer.h"

namespace vaecodec::core {

// A layer or block of a causal network: sees the chunk and the run's history.
class CausalModule : public torch::nn::Module {
 public:
  // x: [B, C, T, H, W]
  virtual torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) = 0;
  // How far it looks around an output pixel (Note [Exact tiles] in core/trunk.h); by default the whole frame.
  virtual Reach reach() const { return Reach::whole_frame(); }
};

// A list of children registered under their positions ("0", "1", ...), like the reference's nn.Sequential, so
// that state-dict names match; positions of parameter-free layers (SiLU, dropout) are simply never
// registered.
class ModuleList : public torch::nn::Module {
 public:
  template <typename M>
  std::shared_ptr<M> add(int64_t index, std::shared_ptr<M> module) {
    return register_module(std::to_string(index), std::move(module));
  }
};

// A sequence of causal blocks, run in order; children named by position.
class CausalSequence : public CausalModule {
 public:
  void append(std::shared_ptr<CausalModule> block) {
    register_module(std::to_string(blocks_.size()), block);
    blocks_.push_back(std::move(block));
  }
  void append_at(int64_t index, std::shared_ptr<CausalModule> block) {
    register_module(std::to_string(index), block);
    blocks_.push_back(std::move(block));
  }
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override {
    torch::Tensor h = x;
    for (auto& b : blocks_) h = b->forward(h, cache);
    return h;
  }
  // forward() with each block timed as stage "<stage>.<index>" (Note [Stage timing]).
  torch::Tensor forward_stages(const torch::Tensor& x, CausalCache& cache, const char* stage) {
    torch::Tensor h = x;
    for (size_t i = 0; i < blocks_.size(); ++i) {
      StageScope scope(stage, static_cast<int64_t>(i));
      h = blocks_[i]->forward(h, cache);
    }
    return h;
  }
  size_t size() const { return blocks_.size(); }
  CausalModule* block(size_t i) const { return blocks_[i].get(); }
  // The blocks' reaches added up at the input's resolution, where only the last block resamples; else
  // whole_frame().
  Reach reach() const override;

 private:
  std::vector<std::shared_ptr<CausalModule>> blocks_;
};

// A float32 copy of a parameter, made once per storage (the kernels take float32 per-channel parameters).
class FloatCopy {
 public:
  const torch::Tensor& of(const torch::Tensor& p) {
    if (!copy_.defined() || source_ != p.data_ptr() || copy_.device() != p.device()) {
      copy_ = p.to(torch::kFloat).contiguous();
      source_ = p.data_ptr();
    }
    return copy_;
  }

 private:
  torch::Tensor copy_;
  const void* source_ = nullptr;
};

// conv3d(x, weight, bias) + residual with zero padding: on the own Hopper kernel where it runs
// (Note [Own convolutions] in core/kernels/conv3d.h), the sum rounded once in its epilogue; else LibTorch's
// (cuDNN on the GPU), then the residual and bias in one pass. bias and residual may be undefined; bias_f32
// keeps bias's float32 copy for the kernels. padded: the layer's zero-padded weights, where its few channels
// need them (Note [Padded channels] in core/kernels/conv3d.cpp); without it such a layer runs on cuDNN.
torch::Tensor conv3d(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     FloatCopy& bias_f32, std::array<int64_t, 3> stride, std::array<int64_t, 3> padding,
                     const torch::Tensor& residual = {}, kernels::PaddedWeights* padded = nullptr);

// Note [Convolutions past 2^31 elements]
// cuDNN indexes a convolution's tensors with 32 bits. LibTorch splits a larger one along the batch only, and
// where one sample is already too large (SeedVR2's 256-channel full-resolution convolutions of a 1080p chunk:
// 3.2e9 elements) it leaves cuDNN for a general kernel that is far slower. Such a convolution is computed
// here in pieces of output frames, and where one frame is still too large, in bands of output rows: each
// piece reads exactly the input frames and rows its outputs need, so together they are the whole
// convolution, each piece's input and output under max_elements. A piece of whole frames reads its input in
// place and takes the rows' padding in the convolution itself; a band (and a piece at a padded end of the
// frames) has the padding it lacks added to a copy of its input. Besides the output, a piece of whole frames
// costs its own output until it is copied into place: pieces hold at most piece_output elements of output
// (one frame where a frame is more). The first 1080p decodes in pieces of four frames with padded copies of
// their inputs peaked 5.9 GiB above the planner's estimate (a trace of bench --trace:
// scripts/dev/trace_memory.py); in pieces of one frame read in place they add that frame alone.
torch::Tensor conv3d_in_pieces(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                               std::array<int64_t, 3> stride, std::array<int64_t, 3> padding,
                               int64_t max_elements, int64_t piece_output = INT64_MAX);

// What the frames before frame 0 are taken to be.
enum class CausalPad {
  kZeros,      // Wan: zero frames
  kReplicate,  // SeedVR2: copies of frame 0
};

// Note [Causal convolution]
// A Conv3d whose temporal padding is all on the past side: with temporal kernel k, stride s and padding pt,
// the first chunk is preceded by 2*pt padding frames (zeros or copies of frame 0), and every later chunk by
// the last k - s frames of the previous chunk's padded input, kept in the run's cache. Spatial padding is
// symmetric zeros. Chunk boundaries must fall on the temporal stride (the models' chunk rules ensure this),
// and then the result equals one call over the whole sequence.
class CausalConv3d : public CausalModule {
 public:
  CausalConv3d(int64_t in, int64_t out, std::array<int64_t, 3> kernel,
               std::array<int64_t, 3> stride = {1, 1, 1}, std::array<int64_t, 3> padding = {0, 0, 0},
               CausalPad pad = CausalPad::kZeros);

  // Takes a cache slot only when it looks back in time (temporal kernel > 1).
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;
  // Stride 1 in space: its spatial padding.
  Reach reach() const override;
  // The same with an explicit slot (layers that share one slot with their own state); copies x into the
  // causal buffer (Note [Causal buffer]).
  torch::Tensor forward_with(const torch::Tensor& x, CausalCache::Slot& slot);
  // Plain convolution over x, no temporal padding or history; without the bias when !with_bias (the caller
  // adds it later: Note [Deferred bias]).
  torch::Tensor convolve(const torch::Tensor& x, bool with_bias = true) const;

  // Note [Causal buffer]
  // forward() concatenates the history and the chunk: a copy of the whole chunk per convolution. A producer
  // that can write its output anywhere (the fused norm) writes it instead into the tail of a buffer whose
  // head already holds the history: prepare() returns the buffer and the view to fill, run() convolves it and
  // keeps the new history. The result is forward()'s.
  // In a band of a split run (Note [Bands across devices] in core/band_exchange.h) whole also has the rows of
  // the neighbouring bands the convolution reads, `top` above and `bottom` below fill's, which run() fetches.
  struct Buffer {
    torch::Tensor whole;  // [B, C, past + t, top + H + bottom, W]
    torch::Tensor fill;   // the last t frames of whole, interior rows, for the caller to write
    CausalCache::Slot* slot = nullptr;
    bool replicate_pending = false;  // the head copies frame 0, which is known only once fill is written
    int64_t top = 0, bottom = 0;     // halo rows
    // Note [History written by the norm] (core/layers.cpp): where offer_history() defined it, the next
    // chunk's history, for the producer to write beside fill's last frames; a producer that did not resets
    // it, and run() keeps it instead of copying.
    torch::Tensor history;
  };
  // For a chunk of `sizes` ([B, C, t, H, W]) made with `options` (dtype, device, memory format). Takes the
  // cache slot, as forward() would.
  Buffer prepare(at::IntArrayRef sizes, const torch::TensorOptions& options, CausalCache& cache);
  Buffer prepare_with(at::IntArrayRef sizes, const torch::TensorOptions& options, CausalCache::Slot& slot);
  // For a chunk shaped and laid out like `like`.
  Buffer prepare(const torch::Tensor& like, CausalCache& cache) {
    return prepare(like.sizes(), layout_of(like), cache);
  }
  Buffer prepare_with(const torch::Tensor& like, CausalCache::Slot& slot) {
    return prepare_with(like.sizes(), layout_of(like), slot);
  }
  static torch::TensorOptions layout_of(const torch::Tensor& t) {
    return t.options().memory_format(t.suggest_memory_format());
  }
  // residual (shaped like the output, or undefined) is added with the bias: in the convolution's epilogue
  // where the own kernel runs. input_scale: for a buffer in e4m3, what its values were multiplied by
  // (Note [FP8 convolutions] in core/kernels/conv3d.cpp).
  torch::Tensor run(Buffer& buffer, bool with_bias = true, const torch::Tensor& residual = {},
                    const torch::Tensor& input_scale = {});
  // Whether this convolution of a norm's output x runs in fp8 (Note [FP8 convolutions]): then its causal
  // buffer, history included, is e4m3. The same answer for every chunk of a run.
  bool takes_fp8(const torch::Tensor& x) const { return kernels::runs_fp8(x, weight_); }
  // Allocates buffer.history where a producer may write the next chunk's history itself
  // (Note [History written by the norm] in core/layers.cpp); leaves it undefined elsewhere.
  void offer_history(Buffer& buffer) const;

  const torch::Tensor& bias() const { return bias_; }
  bool looks_back() const { return history_ > 0 || pad_front_ > 0; }
  // Whether this call runs in a band of a split run and reads rows past the band's edge.
  bool needs_halo() const;
  int64_t in_channels() const { return weight_.size(1); }
  int64_t out_channels() const { return weight_.size(0); }

 private:
  // convolve() with `row_padding` zero rows above and below instead of the layer's own, plus residual.
  torch::Tensor convolve_rows(const torch::Tensor& x, bool with_bias, int64_t row_padding,
                              const torch::Tensor& residual = {},
                              const torch::Tensor& input_scale = {}) const;
  // Allocates whole (with halo rows when needs_halo()) and sets fill.
  void allocate(Buffer& b, std::vector<int64_t> whole_sizes, int64_t past, int64_t frames, int64_t rows,
                const torch::TensorOptions& options) const;

  torch::Tensor weight_;  // [out, in, kt, kh, kw]
  torch::Tensor bias_;    // [out]
  mutable FloatCopy bias_f32_;
  mutable kernels::PaddedWeights padded_;  // Note [Padded channels] in core/kernels/conv3d.cpp
  mutable kernels::Fp8Weights fp8_;        // Note [FP8 convolutions] in core/kernels/conv3d.cpp
  std::array<int64_t, 3> stride_;
  std::array<int64_t, 2> spatial_padding_;
  int64_t pad_front_;  // padding frames before frame 0
  int64_t history_;    // frames carried to the next chunk
  CausalPad pad_;
  // The rows above and below its own that an output row's band reads: top = padding, bottom = kernel -
  // stride - padding (Note [Bands across devices]).
  int64_t halo_top_, halo_bottom_;
};

// Note [Deferred bias]
// LibTorch adds a convolution's bias in a separate pass over its output (cuDNN computes the convolution
// alone), and at full resolution that pass is not cheap: a broadcast add over the whole chunk, 10% of a
// Wan2.1 decode on the H100. Where the output goes next into something that reads it anyway, the bias goes
// there instead: a residual block's first convolution hands its bias to the second norm (which normalises x +
// bias), the second hands its own to the residual add (y += shortcut + bias, one pass). Same function; on the
// GPU the sums are float32 and rounded once, where adding the bias first would round twice.

// y += s + bias (bias [C]), in place: one fused pass on the GPU (with bias_f32, bias's float32 copy),
// composite elsewhere.
void add_residual(const torch::Tensor& y, const torch::Tensor& s, const torch::Tensor& bias,
                  FloatCopy& bias_f32);

// Note [RMSNorm]
// Wan's norm: over channels only, per voxel: x / max(||x||_2, 1e-12) * sqrt(C) * gamma. It never mixes
// positions, so it is safe under any split in space or time. Computed in float32 whatever the storage dtype,
// which keeps 16-bit runs closer to the float32 function than the reference's 16-bit arithmetic.
class RMSNorm : public torch::nn::Module {
 public:
  // gamma_rank: 4 for the 5-D norms ([C,1,1,1]), 3 for the attention block's ([C,1,1]).
  RMSNorm(int64_t channels, int gamma_rank = 4);
  // x: [B, C, ...]
  torch::Tensor forward(const torch::Tensor& x) const;
  // SiLU(RMSNorm(x)) written into out (shaped like x; on the GPU laid out like x, then written in place;
  // fused there), of x + bias when bias ([C]) is defined (Note [Deferred bias]). With `tail` (a causal
  // buffer's history: Note [History written by the norm]) the last frames of out go there too where the
  // kernel can; true if it did.
  bool forward_silu_into(const torch::Tensor& x, const torch::Tensor& out, const torch::Tensor& bias = {},
                         const torch::Tensor& tail = {}) const;
  // The same into an e4m3 `out` (and tail), each value times fp8_scale() (Note [FP8 convolutions] in
  // core/kernels/conv3d.cpp).
  bool forward_silu_fp8_into(const torch::Tensor& x, const torch::Tensor& out, const torch::Tensor& bias = {},
                             const torch::Tensor& tail = {}) const;
  // The power of two that maps this norm's output bound, max(sqrt(C) * max|gamma|, 0.28), into e4m3's range:
  // a 1-element float32 tensor on gamma's device, computed there (no synchronisation), once per gamma.
  const torch::Tensor& fp8_scale() const;

 private:
  torch::Tensor gamma_;
  int64_t channels_;
  // Off the GPU: the norm of xf (float32 or float64) written into `out` of the same dtype.
  void composite_into(const torch::Tensor& xf, torch::Tensor out) const;
  mutable FloatCopy gamma_f32_;
  mutable FloatCopy bias_f32_;
  mutable torch::Tensor fp8_scale_;
  mutable const void* fp8_scale_source_ = nullptr;
};

// SiLU(norm(x)) written straight into conv's causal buffer, then conv (Note [Causal buffer]): no copy of the
// normalised chunk. Norm: a norm with forward_silu_into(x, out) (RMSNorm, SeedVR2's FrameGroupNorm).
template <typename Norm>
torch::Tensor norm_silu_conv(const Norm& norm, CausalConv3d& conv, const torch::Tensor& x,
                             CausalCache& cache) {
  auto buffer = conv.prepare(x, cache);
  norm.forward_silu_into(x, buffer.fill);
  return conv.run(buffer);
}

// The same with the biases deferred (Note [Deferred bias]): the norm takes the previous convolution's bias
// (`x_bias`, may be undefined) and conv's own bias is left for the caller to add, unless `residual` is given:
// then the result is conv(...) + bias + residual. x is taken by value so that a caller handing over its last
// reference (std::move) frees it before the convolution allocates its output.
// Where the convolution takes fp8 (Note [FP8 convolutions] in core/kernels/conv3d.cpp) the norm writes e4m3.
inline torch::Tensor norm_silu_conv_deferred(const RMSNorm& norm, CausalConv3d& conv, torch::Tensor x,
                                             const torch::Tensor& x_bias, CausalCache& cache,
                                             const torch::Tensor& residual = {}) {
  if (conv.takes_fp8(x)) {
    const torch::Tensor& scale = norm.fp8_scale();
    auto buffer =
        conv.prepare(x.sizes(), CausalConv3d::layout_of(x).dtype(c10::ScalarType::Float8_e4m3fn), cache);
    conv.offer_history(buffer);
    if (!norm.forward_silu_fp8_into(x, buffer.fill, x_bias, buffer.history)) buffer.history.reset();
    x.reset();
    return conv.run(buffer, /*with_bias=*/residual.defined(), residual, scale);
  }
  auto buffer = conv.prepare(x, cache);
  conv.offer_history(buffer);
  if (!norm.forward_silu_into(x, buffer.fill, x_bias, buffer.history)) buffer.history.reset();
  x.reset();
  return conv.run(buffer, /*with_bias=*/residual.defined(), residual);
}

// One-head attention of each frame's pixels to each other: q, k, v [B*T, 1, pixels, C] -> [B*T, pixels, C],
// scaled by 1/sqrt(C). In a band of a split run the keys and values are gathered from every band, so a band's
// queries see the whole frame (Note [Bands across devices] in core/band_exchange.h). Heads wider than the
// fused kernels take run in blocks of queries on CUDA (Note [Attention wider than the fused kernels] in
// core/layers.cpp). Logs the backend (Note [What the engine applied]) and counts the scores' and weighted
// sum's FLOPs; the caller counts its projections.
torch::Tensor frame_attention(const torch::Tensor& q, torch::Tensor k, torch::Tensor v);

// Adds a convolution's FLOPs to the FlopCounter, from its output and weight.
void count_conv_flops(const torch::Tensor& out, const torch::Tensor& weight);

}  // namespace vaecodec::core
