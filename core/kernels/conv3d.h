#pragma once

#include <array>
#include <optional>
#include <string>

#include <torch/torch.h>

#include "core/kernels/conv3d_sm90.h"
#include "core/run_choices.h"

namespace vaecodec::core::kernels {

// Note [Own convolutions]
// cuDNN's Hopper kernels tile the output channels in 64s, so the 96- and 192-channel stages that dominate the
// Wan decoder and encoder at full and half resolution waste a quarter or a third of every tile (360 TFLOP/s
// of the H100's ~800 on the 96 -> 96 3x3x3 convolution). On Hopper (compute capability 9.0, bf16,
// channels-last) a convolution may instead run on an implicit-GEMM kernel built from CUTLASS's collectives
// with a tile that fits the channels (Note [Hopper implicit GEMM] in core/kernels/hopper/hopper_conv.cuh),
// its bias and a residual added in the epilogue. Which shapes take it is a table of measured choices
// (`own_tile_for`); everything else, and every other GPU, keeps cuDNN. The backend can be forced for
// comparisons (`bench --conv`).

using core::ConvBackend;  // the backend of the calling thread's model call: current_choices().conv
// Whether a GPU of compute capability `major`.`minor` runs the own kernels in this build: they are built
// (CUTLASS found, sm_90a among the architectures) and sm_90a code runs on 9.0 alone.
bool own_kernels_run_on(int major, int minor);

// The channel count the own kernels run a layer's n input (or output) channels with: the few channels at a
// model's edges (an RGB input or head, latents) padded with zeros to a multiple of 32, every other count
// unchanged (Note [Padded channels] in core/kernels/conv3d.cpp).
int64_t own_channels(int64_t n);

// One layer's weight and float32 bias zero-padded to own_channels(K) x own_channels(C), for the own kernels:
// made at the first call that needs them, again only if the layer's weights move. The layer keeps it.
class PaddedWeights {
 public:
  const torch::Tensor& weight(const torch::Tensor& w);       // [K', C', T, R, S], w's dtype and layout
  const torch::Tensor& bias(const torch::Tensor& bias_f32);  // [K'] float32; undefined for undefined

 private:
  torch::Tensor weight_, bias_;
  const void* weight_source_ = nullptr;
  const void* bias_source_ = nullptr;
};

// Note [FP8 convolutions] (core/kernels/conv3d.cpp): `--dtype fp8` runs the convolutions fed by a norm on
// e4m3 tiles. A choice of the model (current_choices().fp8, Note [Run choices] in core/run_choices.h); it
// changes only bf16 runs on compute capability 9.0.

// The fp8 tile for a convolution of c input and k output channels on compute capability `major`.`minor`, or
// std::nullopt (then it runs in bf16). Pure.
std::optional<ConvTile> fp8_tile_for(int major, int minor, int64_t c, int64_t k);

// Why `device` cannot run the fp8 convolutions in this build, in a few words; empty when it can.
std::string fp8_refusal(const torch::Device& device);

// Whether a convolution of `weight` over x (bf16, on the GPU) runs on an fp8 tile in this call: fp8 chosen,
// the kernels built and runnable on x's device, and an fp8 tile for its channels.
bool runs_fp8(const torch::Tensor& x, const torch::Tensor& weight);

// A layer's weights quantised for the fp8 tiles: e4m3 [K, C, T, R, S] channels-last, each output channel
// scaled so that its largest magnitude is e4m3's largest (448), and alpha = that scale over the input's
// (the epilogue's per-channel factor). Made at the first call, again only if the weights or the input scale
// move. The layer keeps it.
class Fp8Weights {
 public:
  const torch::Tensor& weight(const torch::Tensor& w);
  // input_scale: the 1-element float32 tensor the activations were multiplied by before rounding to e4m3.
  const torch::Tensor& alpha(const torch::Tensor& w, const torch::Tensor& input_scale);

 private:
  void quantise(const torch::Tensor& w);
  torch::Tensor weight_, scale_, alpha_;
  const void* weight_source_ = nullptr;
  const void* alpha_source_ = nullptr;
};

// The tile that runs a convolution of c input and k output channels with a (t, r, s) filter and spatial
// stride under `backend` on a device of compute capability `major`.`minor`, or std::nullopt for cuDNN. Pure:
// callable anywhere.
std::optional<ConvTile> own_tile_for(ConvBackend backend, int major, int minor, int64_t c, int64_t k,
                                     std::array<int64_t, 3> filter, int64_t stride = 1);

// Whether the own kernel takes these tensors as laid out: x [N, C, D, H, W] and weight [K, C, T, R, S] both
// channels-last with 16-byte aligned data and strides, both bf16 or both e4m3. Pure (CPU tensors too).
bool conv3d_takes_layout(const torch::Tensor& x, const torch::Tensor& weight);

// conv3d(x, weight, bias) + residual with symmetric zero padding and stride on the own kernel, output
// channels-last, the sum rounded once; an undefined tensor when the backend's choice is cuDNN or the kernel
// does not take the tensors (the caller then runs cuDNN). bias_f32: float32 [K] on x's device, or
// undefined; residual: shaped like the output, channels-last, x's dtype, or undefined. A layer whose channels
// need padding runs here only with `padded` (its padded weights) and without a residual.
torch::Tensor conv3d_own(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias_f32,
                         std::array<int64_t, 3> stride, std::array<int64_t, 3> padding,
                         const torch::Tensor& residual = {}, PaddedWeights* padded = nullptr);

// The same on an fp8 tile (Note [FP8 convolutions]): x in e4m3, the activations times input_scale (a
// 1-element float32 tensor on x's device); weight the layer's bf16 weights, quantised once into `quantised`;
// output bf16. Undefined when no fp8 tile takes it (the caller then dequantises and runs in bf16).
torch::Tensor conv3d_fp8(const torch::Tensor& x, const torch::Tensor& input_scale,
                         const torch::Tensor& weight, const torch::Tensor& bias_f32,
                         std::array<int64_t, 3> stride, std::array<int64_t, 3> padding,
                         const torch::Tensor& residual, Fp8Weights& quantised);

// The same on a given tile, whatever the backend (the micro-benchmark and the tests): undefined when the tile
// does not take the problem. An fp8 tile takes e4m3 x and weight and the per-channel alpha (float32 [K]).
torch::Tensor conv3d_on_tile(const torch::Tensor& x, const torch::Tensor& weight,
                             const torch::Tensor& bias_f32, std::array<int64_t, 3> stride,
                             std::array<int64_t, 3> padding, ConvTile tile,
                             const torch::Tensor& residual = {}, const torch::Tensor& alpha = {});

}  // namespace vaecodec::core::kernels
