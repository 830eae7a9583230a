#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <torch/torch.h>

#include "core/layers.h"

namespace vaecodec::core {

// The building blocks of SeedVR2's VAE (an SD3-style image VAE inflated to causal 3-D), named as the
// reference's state dict. Every temporal convolution pads frame 0 by replication (CausalPad::kReplicate).

// Note [SeedVR2 GroupNorm per frame]
// The reference folds time into the batch before its GroupNorms ([B, C, T, H, W] -> [B*T, C, H, W]), so the
// statistics of a group are taken over one frame's pixels only. That is what makes the model chunkable: a
// norm over the chunk's frames would make every frame depend on its chunk. eps 1e-6, affine; the statistics
// are computed in float32 for 16-bit storage (float64 stays float64); on the GPU one fused kernel
// (core/kernels/group_norm_kernel.cu) reads x twice and writes the result once. Keys: weight, bias ([C]).
class FrameGroupNorm : public torch::nn::Module {
 public:
  FrameGroupNorm(int64_t channels, int64_t groups);
  // x: [B, C, T, H, W]; SiLU(norm(x)) when `silu`.
  torch::Tensor forward(const torch::Tensor& x, bool silu = false) const;
  // SiLU(norm(x)) written into out (shaped like x; may be a view, such as a causal buffer's tail).
  void forward_silu_into(const torch::Tensor& x, const torch::Tensor& out) const;

 private:
  torch::Tensor composite(const torch::Tensor& x, bool silu) const;  // ATen ops, any device and layout

  torch::Tensor weight_, bias_;  // [C]
  int64_t groups_;
};

// GroupNorm -> SiLU -> conv1 -> GroupNorm -> SiLU -> conv2, plus shortcut(x): a 1x1x1 conv when the width
// changes. Keys: norm1.*, conv1.*, norm2.*, conv2.*, conv_shortcut.*
class SeedVR2ResnetBlock : public CausalModule {
 public:
  SeedVR2ResnetBlock(int64_t in, int64_t out, int64_t groups);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;
  // Two 3x3 convolutions; its norms see the frame (Note [Norms of tiles through time] in
  // core/split/exact_tiles.h).
  Reach reach() const override { return {2, Resize::kSame, true, /*frame_norm=*/true}; }

 private:
  std::shared_ptr<FrameGroupNorm> norm1_, norm2_;
  std::shared_ptr<CausalConv3d> conv1_, conv2_, shortcut_;
};

// Single-head self-attention over the pixels of each frame, with a residual connection.
// Keys: group_norm.*, to_q.*, to_k.*, to_v.*, to_out.0.* (Linear weights [C, C]).
class SeedVR2Attention : public CausalModule {
 public:
  SeedVR2Attention(int64_t channels, int64_t groups);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;

 private:
  std::shared_ptr<FrameGroupNorm> norm_;
  torch::Tensor q_weight_, q_bias_, k_weight_, k_bias_, v_weight_, v_bias_, out_weight_, out_bias_;
};

// resnets.0 -> attentions.0 -> resnets.1, all at one width.
class SeedVR2MidBlock : public CausalModule {
 public:
  SeedVR2MidBlock(int64_t channels, int64_t groups);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;

 private:
  std::shared_ptr<SeedVR2ResnetBlock> first_, second_;
  std::shared_ptr<SeedVR2Attention> attention_;
};

// Halves space, and time when `temporal` (T = 1 + 2m frames -> 1 + m; the two replicated frames before frame
// 0 make output frame 0 depend on frame 0 alone). Zero-pads right and bottom by one, then a stride-2 causal
// conv: kernel (3, 3, 3) with temporal padding 1, or (1, 3, 3) for space alone. Keys: conv.*
class SeedVR2Downsample : public CausalModule {
 public:
  SeedVR2Downsample(int64_t channels, bool temporal);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;
  Reach reach() const override { return {0, Resize::kDown2}; }  // Wan's rule: a zero row after, stride 2

 private:
  std::shared_ptr<CausalConv3d> conv_;
};

// Note [SeedVR2 upsampling and frame 0]
// upscale_conv (1x1x1, C -> C * 4 or C * 8) makes the new pixels as channels, read as `(x y z c)`: channel
// ((x * 2 + y) * z_factor + z) * C + c becomes pixel (2h + x, 2w + y) of frame f * z_factor + z. When time
// doubles, latent frame 0 yields one frame, not two (1 + k frames become 1 + 2k): the golden data shows that
// the kept one is its z = 0 copy and the z = 1 copy is dropped (output frames 0, 2, 3, ...; dropping frame 0
// instead is off by 87% relative). Only the chunk that holds frame 0 drops it; the conv's slot tells which
// chunk that is (`started`). Then a causal 3x3x3 conv. Keys: upscale_conv.*, conv.*
class SeedVR2Upsample : public CausalModule {
 public:
  SeedVR2Upsample(int64_t channels, bool temporal);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;
  // Each new pixel comes from one input pixel, then a 3x3 convolution: Wan's rule for 2x up.
  Reach reach() const override { return {0, Resize::kUp2}; }

 private:
  std::shared_ptr<CausalConv3d> upscale_conv_, conv_;
  int64_t time_factor_;
};

// A down or up block: `resnets.N` (the first one in -> out, the others out -> out), then an optional
// resampler registered as `<sampler_key>.0` ("downsamplers.0", "upsamplers.0").
class SeedVR2Stage : public CausalModule {
 public:
  SeedVR2Stage(int64_t in, int64_t out, int64_t layers, int64_t groups, const std::string& sampler_key = {},
               std::shared_ptr<CausalModule> sampler = nullptr);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;
  CausalSequence& resnets() const { return *resnets_; }
  CausalModule* sampler() const { return sampler_.get(); }  // nullptr without one

 private:
  std::shared_ptr<CausalSequence> resnets_;
  std::shared_ptr<CausalModule> sampler_;
};

// conv_norm_out -> SiLU -> conv_out as one block of a trunk (the modules stay registered by their owner).
class SeedVR2Head : public CausalModule {
 public:
  SeedVR2Head(std::shared_ptr<FrameGroupNorm> norm, std::shared_ptr<CausalConv3d> conv)
      : norm_(std::move(norm)), conv_(std::move(conv)) {}
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override {
    return norm_silu_conv(*norm_, *conv_, x, cache);
  }
  Reach reach() const override { return {1, Resize::kSame, true, /*frame_norm=*/true}; }

 private:
  std::shared_ptr<FrameGroupNorm> norm_;
  std::shared_ptr<CausalConv3d> conv_;
};

// A causal 3x3x3 conv with temporal padding 1 and replicated frame 0: the convolution of most SeedVR2 layers.
std::shared_ptr<CausalConv3d> seedvr2_conv3(int64_t in, int64_t out);

}  // namespace vaecodec::core
