#pragma once

#include <functional>
#include <utility>

#include <torch/torch.h>

namespace vaecodec::core::kernels {

// SiLU(RMSNorm(x + bias)) over the channel axis of a 5-D CUDA tensor in one pass (Note [RMSNorm]), written
// into `out` (shaped like x, laid out like x in memory, possibly a view into a larger buffer); bias ([C]) may
// be undefined. x: [B, C, T, H, W], contiguous or channels-last-3d; gamma: [C, ...]. False when the kernel
// does not apply (CPU tensors, unsupported dtype or layout) and nothing was written: the caller takes the
// composite path.
// With `tail` ([1, C, k, H, W], channels-last) the last k frames of out are also written there, where the
// kernel can (one batch item, dense channels-last tensors): the causal buffer's history for the next chunk,
// without a copy (Note [History written by the norm] in core/layers.cpp); *tail_written says whether it was.
bool rms_norm_silu_into(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& out,
                        const torch::Tensor& bias = {}, const torch::Tensor& tail = {},
                        bool* tail_written = nullptr);

// The same with an e4m3 `out` (and tail): each value multiplied by `scale` (a 1-element float32 tensor on x's
// device) and rounded with saturation (Note [FP8 convolutions] in core/kernels/conv3d.cpp). False where the
// kernel does not apply (then nothing was written).
bool rms_norm_silu_fp8_into(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& out,
                            const torch::Tensor& scale, const torch::Tensor& bias = {},
                            const torch::Tensor& tail = {}, bool* tail_written = nullptr);

// RMSNorm(x) alone, as above without the bias and the SiLU (the attention blocks' norm).
bool rms_norm_into(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& out);

// LTX-2's pixel norm then SiLU, silu(x * rsqrt(mean over channels of x^2 + eps)), no weight, written into
// `out` as rms_norm_silu_into writes (Note [Two RMS norms] in norm_silu_kernel.cu). x: [B, C, T, H, W],
// contiguous or channels-last-3d, out laid out like x. False when the kernel does not apply (CPU tensors,
// float64, another layout, eps < 0) and nothing was written: the caller takes the composite path.
bool pixel_norm_silu_into(const torch::Tensor& x, double eps, const torch::Tensor& out);

// What the norm kernels above read for x and write into: x itself where it is dense (contiguous or
// channels-last-3d), otherwise a dense copy in the layout x suggests; and an uninitialised output laid out
// like it. Any device (a CPU test checks what a GPU run hands the kernels).
std::pair<torch::Tensor, torch::Tensor> norm_operands(const torch::Tensor& x);
// norm_operands' first: x where it is dense, otherwise a dense copy in the layout x suggests.
torch::Tensor dense_operand(const torch::Tensor& x);

// y += s + bias (bias [C]), in place, in one pass computed in float32: for channels-last 5-D CUDA tensors of
// the same shape and dtype. False when the kernel does not apply and nothing was written.
bool add_residual_(const torch::Tensor& y, const torch::Tensor& s, const torch::Tensor& bias);

// The upsampler's interleave (Note [Upsampling on the input grid] in core/models/wan/wan_blocks.cpp): out [N,
// C, T, 2H, 2W] from phases [N, 4C, T, H + 1, W + 1], both channels-last-3d CUDA tensors, plus bias (float32
// [C], optional). False when the kernel does not apply and nothing was written.
bool interleave_phases_into(const torch::Tensor& phases, const torch::Tensor& bias, const torch::Tensor& out);

// Whether the kernels above take these tensors' shapes, strides and, where their accesses are 16 bytes wide,
// alignment: the entry points' conditions on the layout, device and dtype aside, so callable on CPU tensors
// (a CPU test checks what a GPU run would hand the kernels). Arguments as in the functions above.
bool rms_norm_silu_takes_layout(const torch::Tensor& x, const torch::Tensor& out);
bool add_residual_takes_layout(const torch::Tensor& y, const torch::Tensor& s);
bool interleave_phases_takes_layout(const torch::Tensor& phases, const torch::Tensor& out);

// SeedVR2's per-frame GroupNorm (then SiLU when `silu`) written into `out`, for a 5-D CUDA tensor whose
// frames are channels-last inside (x and out: [B, C, T, H, W] with strides 1 over C, C over W, W * C over H;
// any batch and frame strides, so out may be a causal buffer's tail). False when the kernel does not apply
// and nothing was written; the caller takes the composite path.
// With `pool`, the statistics are over more than x's pixels (a frame cut into bands across devices): pool
// gets x's partial statistics, a float32 tensor [B * T, S, groups, 3] on x's device (per frame, a few sets
// of count, mean and sum of squared deviations of each group: kernels::kFrameGroupPartialFloats), and returns
// every part's, concatenated along dim 1, on x's device; the kernel normalises with their union. pool is
// called only where the kernel runs.
using FrameGroupPool = std::function<torch::Tensor(const torch::Tensor&)>;
bool frame_group_norm_into(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                           int64_t groups, double eps, bool silu, const torch::Tensor& out,
                           const FrameGroupPool& pool = {});

}  // namespace vaecodec::core::kernels
