#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/causal_cache.h"
#include "core/layers.h"

namespace vaecodec::core {

// The building blocks of the LTX-2 VAE (docs/ltx2-vae.md), named as the original checkpoints' keys. Every
// layer takes `end`: the clip ends after this chunk (only the decoder's layers use it).

// Note [LTX-2 decoder lag]
// The decoder's convolutions are not causal: output frame t reads input frames t-1, t and t+1, and the clip
// is padded by one copy of its first frame on the left and one of its last frame on the right. A streaming
// decode cannot compute a conv's last output frame of a chunk before the next chunk's first frame arrives, so
// each conv holds it back: its cache slot keeps the last two frames of its padded input, and the next chunk
// (or the end of the clip, which appends the copy of the last frame) completes it. Every later layer then
// runs one frame behind, and the held-back frames add up through the decoder (a temporal upsampler doubles
// what reaches it): 173 output frames for 2.0, 108 for 2.3 / 2.5 (LTX2Config::decode_lag). What a residual
// adds to a conv's lagging output waits in a slot of its own until the conv's frames catch up with it, and a
// temporal upsampler drops its first output frame whenever that frame comes out, not with the first chunk.
// The end of the clip is a call of its own (VaeModel::decode_end): an empty chunk with `end` set, which
// every conv completes with the right padding, so the whole decode equals the whole-clip one for any
// chunking. A chunk may yield no frames at all (the first latent frame alone yields none); the first chunk
// needs no history (frame 0 is replicated).

// A 3x3x3 convolution, stride 1, padded by one in space (zeros or reflection) and in time by replicated
// frames: causal (two copies of frame 0 before the clip: the encoder) or looking one frame ahead (a copy of
// frame 0 before and of the last frame after: the decoder). Keys: conv.weight [out, in, 3, 3, 3], conv.bias.
class LTX2Conv : public torch::nn::Module {
 public:
  enum class Time { kCausal, kLookAhead };
  LTX2Conv(int64_t in, int64_t out, Time time, bool reflect);
  // x: [B, in, t, H, W] -> [B, out, t', H, W]: causal t' = t; looking ahead, one frame behind its input
  // (Note [LTX-2 decoder lag]).
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache, bool end);
  // forward(ltx2_pixel_norm_silu(x), ...), the norm writing into the convolution's input (Note [The norm
  // into the conv's input]).
  torch::Tensor forward_normed(const torch::Tensor& x, CausalCache& cache, bool end);
  int64_t out_channels() const { return weight_.size(0); }
  // One pixel each side (Note [Exact tiles] in core/trunk.h).
  Reach reach() const { return {1}; }

 private:
  // The frames the convolution reads: what `slot` holds (or, at the clip's start, the left padding), x
  // (normed when `norm`) and, ending a clip that looks ahead, its last frame again; undefined when none.
  torch::Tensor input(const torch::Tensor& x, const CausalCache::Slot& slot, bool end, bool norm) const;
  // The convolution over `buffer`, the next chunk's history kept in `slot`.
  torch::Tensor convolve(torch::Tensor buffer, CausalCache::Slot& slot, const torch::Tensor& like);

  torch::Tensor weight_, bias_;
  FloatCopy bias_f32_;
  Time time_;
  bool reflect_;
};

// x / sqrt(mean over channels of x^2 + 1e-8), then SiLU: the only norm of the model (no weight).
torch::Tensor ltx2_pixel_norm_silu(const torch::Tensor& x);

// A layer of the LTX-2 encoder or decoder.
class LTX2Module : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x, CausalCache& cache, bool end) = 0;
  // How far it looks around an output pixel in space (Note [Exact tiles] in core/trunk.h; Note [LTX-2 exact
  // tiles] in ltx2_vae.h).
  virtual Reach reach() const = 0;
};

// h = conv1(silu(norm(x))), h = conv2(silu(norm(h))), y = x + h, at one width. Keys: conv1.conv.*,
// conv2.conv.*
class LTX2ResBlock : public LTX2Module {
 public:
  LTX2ResBlock(int64_t channels, LTX2Conv::Time time, bool reflect);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache, bool end) override;
  Reach reach() const override { return {2}; }  // two convolutions

 private:
  std::shared_ptr<LTX2Conv> conv1_, conv2_;
};

// `res_x`: res_blocks.N, all at one width.
class LTX2ResStage : public LTX2Module {
 public:
  LTX2ResStage(int64_t channels, int64_t layers, LTX2Conv::Time time, bool reflect);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache, bool end) override;
  Reach reach() const override { return {2 * static_cast<int64_t>(blocks_.size())}; }

 private:
  std::vector<std::shared_ptr<LTX2ResBlock>> blocks_;
};

// The encoder's space-to-depth downsampler (`compress_*_res`), in -> in * multiplier channels: a causal
// conv's output folded into channels, plus the input folded the same way and averaged over groups of
// channels. A temporal one first repeats frame 0 once (the first chunk's), so latent frame 0 pairs frame 0
// with itself and frame m >= 1 pairs frames 2m - 1 and 2m. Keys: conv.conv.*
class LTX2Downsampler : public LTX2Module {
 public:
  LTX2Downsampler(int64_t in, int64_t multiplier, std::array<int64_t, 3> stride);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache, bool end) override;
  // Folding space: output pixels [a, b) fold the conv's [2a, 2b), which reads [2a - 1, 2b + 1): Resize::
  // kDown2 with margin 1 asks [2a - 2, 2b + 4), even at both ends as the fold needs. Time alone: the conv.
  Reach reach() const override;

 private:
  std::shared_ptr<LTX2Conv> conv_;
  std::array<int64_t, 3> stride_;
  int64_t out_;
};

// The decoder's depth-to-space upsampler (`compress_*`), in -> in / multiplier channels: a conv that looks
// ahead, unfolded from channels into time and space; when `residual`, the input unfolded the same way and
// tiled along channels is added. A temporal one drops its first output frame (1 + k frames -> 1 + 2k).
// Keys: conv.conv.*
class LTX2Upsampler : public LTX2Module {
 public:
  LTX2Upsampler(int64_t in, int64_t multiplier, std::array<int64_t, 3> stride, bool residual, bool reflect);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache, bool end) override;
  // Unfolding space: output pixels [a, b) unfold the conv's [floor(a/2), ceil(b/2)), which reads one more
  // each side: Resize::kUp2 with margin 0 (the residual reads inside that). Time alone: the conv.
  Reach reach() const override;

 private:
  std::shared_ptr<LTX2Conv> conv_;
  std::array<int64_t, 3> stride_;
  int64_t multiplier_;
  bool residual_;
};

// [B, C, T*st, H*sh, W*sw] -> [B, C*st*sh*sw, T, H, W]: channel ((c*st + i)*sh + j)*sw + k holds
// (c, t*st + i, h*sh + j, w*sw + k); depth_to_space is its inverse.
torch::Tensor space_to_depth(const torch::Tensor& x, std::array<int64_t, 3> stride);
torch::Tensor depth_to_space(const torch::Tensor& x, std::array<int64_t, 3> stride);
// Patch p at the encoder's input: [B, 3, T, p*H, p*W] -> [B, 3*p*p, T, H, W], channel (c*p + kw)*p + kh
// holding pixel (c, t, p*h + kh, p*w + kw) (the width offset is the slower index); unpatchify is its inverse.
torch::Tensor ltx2_patchify(const torch::Tensor& x, int64_t p);
torch::Tensor ltx2_unpatchify(const torch::Tensor& x, int64_t p);

}  // namespace vaecodec::core
