#pragma once

#include <cstdint>
#include <memory>

#include <torch/torch.h>

#include "core/layers.h"

namespace vaecodec::core {

// The building blocks of the Wan VAEs (Wan2.1 and Wan2.2), named as the reference's state dict.

// The trunks' convolution: kernel 3 in time and space, one pixel of zero padding, causal in time.
std::shared_ptr<CausalConv3d> wan_conv3(int64_t in, int64_t out);
// A pointwise convolution (shortcuts, the latent convs between encoder, decoder and latent).
std::shared_ptr<CausalConv3d> wan_conv1(int64_t in, int64_t out);

// RMSNorm -> SiLU -> conv(3) -> RMSNorm -> SiLU -> conv(3), plus a 1x1x1 shortcut conv when the width
// changes. Keys: residual.{0.gamma, 2.*, 3.gamma, 6.*}, shortcut.*
class WanResidualBlock : public CausalModule {
 public:
  WanResidualBlock(int64_t in, int64_t out);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;
  Reach reach() const override { return {2}; }  // two 3x3 convolutions

 private:
  std::shared_ptr<RMSNorm> norm1_, norm2_;
  std::shared_ptr<CausalConv3d> conv1_, conv2_, shortcut_;
  FloatCopy bias2_f32_;  // conv2_'s bias for the residual add (Note [Deferred bias])
};

// Single-head self-attention over the pixels of each frame. Keys: norm.gamma, to_qkv.*, proj.*
class WanAttentionBlock : public CausalModule {
 public:
  explicit WanAttentionBlock(int64_t channels);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;

 private:
  std::shared_ptr<RMSNorm> norm_;
  torch::Tensor qkv_weight_, qkv_bias_, proj_weight_, proj_bias_;  // 1x1 conv2d weights [out, in, 1, 1]
  FloatCopy qkv_bias_f32_, proj_bias_f32_;  // for the own kernels (Note [Projections as convolutions])
};

// The middle of both trunks: residual block, attention, residual block. Keys middle.{0,1,2}.*
std::shared_ptr<CausalSequence> wan_middle(int64_t channels);

// The end of both trunks: RMSNorm -> SiLU -> conv(3). Keys head.{0.gamma, 2.*}
class WanHead : public CausalModule {
 public:
  WanHead(int64_t in, int64_t out);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;
  Reach reach() const override { return {1}; }

 private:
  std::shared_ptr<RMSNorm> norm_;
  std::shared_ptr<CausalConv3d> conv_;
};

enum class ResampleMode { kUpsample2d, kUpsample3d, kDownsample2d, kDownsample3d };

// [B, 2C, t, H, W] -> [B, C, 2t, H, W], written into out (any strides: e.g. the frames after frame 0 in a
// larger tensor): frame i's channels [0, C) become frame 2i, [C, 2C) frame 2i + 1.
void interleave_frames_into(const torch::Tensor& y, const torch::Tensor& out);

// Note [Wan resampling and frame 0]
// downsample3d: after the spatial stride-2 conv, a temporal conv (kernel 3, stride 2, no padding) over input
//   frames (2j-2, 2j-1, 2j) makes output frame j >= 1; output frame 0 is input frame 0, untouched. The run
//   keeps the last input frame, so later chunks (even frame counts) continue the same windows.
// upsample3d: frame 0 skips the temporal conv and is not doubled. Frames 1.. go through a causal conv (C ->
// 2C)
//   whose history starts empty (zeros) at frame 1, not at frame 0; each output frame's 2C channels become two
//   frames, channels [0, C) first (Note [Doubled frames' layout] in wan_blocks.cpp). Then the nearest 2x
//   spatial upsample and a 3x3 conv, per frame.
// The spatial parts run as (1, 3, 3) 3-D convolutions: the same arithmetic as the reference's per-frame
// Conv2d, without reshaping the video into a batch of images. Keys: resample.1.{weight, bias} ([out, C, 3,
// 3]), time_conv.{weight, bias} for the 3-D modes.
class WanResample : public CausalModule {
 public:
  // spatial_out: channels after the spatial conv (Wan2.1 halves them on the way up: C/2; Wan2.2 keeps C).
  WanResample(int64_t channels, ResampleMode mode, int64_t spatial_out);
  torch::Tensor forward(const torch::Tensor& x, CausalCache& cache) override;
  Reach reach() const override;

 private:
  torch::Tensor spatial(const torch::Tensor& x);
  torch::Tensor upsample(const torch::Tensor& x);

  ResampleMode mode_;
  torch::Tensor weight_, bias_;  // spatial conv
  std::shared_ptr<CausalConv3d> time_conv_;
  // The upsampler's conv as four 2x2 phase kernels (Note [Upsampling on the input grid]), made once per
  // dtype, device and layout.
  torch::Tensor phase_weight_;
  const void* phase_source_ = nullptr;
  FloatCopy bias_f32_;
};

}  // namespace vaecodec::core
