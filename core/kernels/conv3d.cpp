#include "core/kernels/conv3d.h"

#include <cstdint>
#include <string>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "core/error.h"
#include "core/kernel_log.h"

namespace vaecodec::core::kernels {

namespace {

constexpr auto kE4m3 = c10::ScalarType::Float8_e4m3fn;
constexpr double kE4m3Max = 448;  // e4m3's largest finite magnitude

bool aligned16(int64_t elements, int64_t element_size) {
  return (elements * element_size) % 16 == 0;
}

// The fastest tile measured among those whose N divides k and whose K slice divides c (docs/benchmarks.md,
// "Own convolutions": the 128x192 tile runs the 192- and 384-channel convolutions at 750-780 TFLOP/s).
std::optional<ConvTile> fitting_tile(int64_t c, int64_t k) {
  if (k % 192 == 0 && c % 64 == 0) return ConvTile::k128x192x64;
  if (k % 96 == 0) {
    if (c % 64 == 0) return ConvTile::k256x96x64;
    if (c % 32 == 0) return ConvTile::k256x96x32;
  }
  if (k % 128 == 0 && c % 64 == 0) return ConvTile::k128x128x64;
  // The narrow tile only for the few output channels it is meant for: a 160- or 320-channel layer (Wan2.2's
  // encoder) on it re-read its input once per 32 columns and ran 1.9x slower than cuDNN.
  if (k <= 64 && k % 32 == 0 && c % 32 == 0) return ConvTile::k128x32x32;
  return std::nullopt;
}

// Note [Padded channels]
// The tiles take input channels in multiples of their K slice (32 or 64) and output channels in multiples of
// their N. The layers at a model's edges have fewer: an RGB input (3; Wan2.2's patched 12), latents (16, 48),
// an RGB head (3, 12), a latent projection (16, 48). Left to cuDNN they cost twice: a process's first cuDNN
// call takes 120-225 ms and every further shape 20-77 ms to plan and load (the cold 720p decode spent 581 of
// its 736 idle milliseconds there; docs/benchmarks.md, "A fresh process"), and cuDNN's kernels for them are
// slow (the 3 -> 96 first convolution at 8 TFLOP/s). So their channels are padded with zeros to a multiple of
// 32: the input with one copy (these tensors have at most 48 channels), the weights and bias once per layer
// (PaddedWeights), the output computed with zero weights in the extra channels and copied out compact. Zero
// channels add exact zeros to every sum, so the result is the convolution's; the padded arithmetic is wasted,
// cheap for layers bound by memory traffic. Only counts below 64 are padded: a wide layer that no tile
// divides stays with cuDNN rather than copy its input.
// x's channels zero-padded to c (Note [Padded channels]), channels-last.
torch::Tensor pad_input_channels(const torch::Tensor& x, int64_t c) {
  auto padded = torch::empty({x.size(0), c, x.size(2), x.size(3), x.size(4)},
                             x.options().memory_format(torch::MemoryFormat::ChannelsLast3d));
  padded.narrow(1, x.size(1), c - x.size(1)).zero_();
  padded.narrow(1, 0, x.size(1)).copy_(x);
  return padded;
}

}  // namespace

int64_t own_channels(int64_t n) {
  return n % 32 == 0 || n >= 64 ? n : (n + 31) / 32 * 32;  // Note [Padded channels]
}

const torch::Tensor& PaddedWeights::weight(const torch::Tensor& w) {
  if (!weight_.defined() || weight_source_ != w.data_ptr() || weight_.device() != w.device() ||
      weight_.scalar_type() != w.scalar_type()) {
    const int64_t k = own_channels(w.size(0)), c = own_channels(w.size(1));
    weight_ = torch::zeros({k, c, w.size(2), w.size(3), w.size(4)}, w.options())
                  .contiguous(torch::MemoryFormat::ChannelsLast3d);
    weight_.narrow(0, 0, w.size(0)).narrow(1, 0, w.size(1)).copy_(w);
    weight_source_ = w.data_ptr();
  }
  return weight_;
}

const torch::Tensor& PaddedWeights::bias(const torch::Tensor& bias_f32) {
  if (!bias_f32.defined()) {
    bias_ = torch::Tensor();
    bias_source_ = nullptr;
    return bias_;
  }
  if (!bias_.defined() || bias_source_ != bias_f32.data_ptr() || bias_.device() != bias_f32.device()) {
    bias_ = torch::zeros({own_channels(bias_f32.size(0))}, bias_f32.options());
    bias_.narrow(0, 0, bias_f32.size(0)).copy_(bias_f32);
    bias_source_ = bias_f32.data_ptr();
  }
  return bias_;
}

// Note [FP8 convolutions]
// `--dtype fp8` (opt-in, Hopper only) runs the convolutions that read a norm's output on e4m3 tiles: the
// activations and weights rounded to e4m3 (3 mantissa bits), multiplied on the tensor cores at twice bf16's
// rate, summed in float32 and written in bf16; everything else (the norms, the attention, the residual sums,
// the convolutions of other inputs: the RGB and latent edges, the up- and downsamplers, the shortcuts) stays
// bf16. Those convolutions are most of a Wan model's FLOPs, and their inputs have a known range: after
// RMSNorm each voxel's channels have an RMS of one, so |SiLU(RMSNorm(x))| <= max(sqrt(C) * max|gamma|, 0.28)
// for any x. The norm kernel multiplies its output by a per-layer power of two that maps that bound into
// e4m3's range (exact, so the rounding to e4m3 is the only error) and writes e4m3 straight into the
// convolution's causal buffer, history included (half the bytes of bf16). The weights are scaled per output
// channel so that each channel's largest weight is 448. The epilogue multiplies each channel's sum by
// alpha = weight scale / input scale and adds the bias and residual in float32. SeedVR2's GroupNorm has no
// such bound (a group's statistics span the whole frame), so its family has no fp8 path and refuses the
// option. The error is what e4m3 rounding costs, measured by `bench --accuracy` against float32 beside
// bf16's (docs/benchmarks.md, "FP8").

std::optional<ConvTile> fp8_tile_for(int major, int minor, int64_t c, int64_t k) {
  if (major != 9 || minor != 0) return std::nullopt;
  // The widest power-of-two K slice that divides the input channels (vaecodec_conv_micro on an H100,
  // docs/benchmarks.md "FP8"): slices of 64 and 128 channels ran 1000-1450 TFLOP/s against bf16's 590-760;
  // slices of 96 or 192 (not a power of two) four times slower than that. A slice of 32 (Wan2.1's 96-channel
  // full resolution) runs no faster than bf16's (512 against 521 TFLOP/s), but its input is half the bytes to
  // write, copy and read: the 720p decode took 1.12 s with it in e4m3 and 1.19 s with it in bf16.
  if (k % 192 == 0) {
    if (c % 128 == 0) return ConvTile::kFp8_128x192x128;
    if (c % 64 == 0) return ConvTile::kFp8_128x192x64;
  }
  if (k % 96 == 0) {
    if (c % 64 == 0) return ConvTile::kFp8_256x96x64;
    if (c % 32 == 0) return ConvTile::kFp8_256x96x32;
  }
  if (k % 128 == 0 && c % 64 == 0) return ConvTile::kFp8_128x128x64;
  return std::nullopt;
}

std::string fp8_refusal(const torch::Device& device) {
  if (!device.is_cuda()) return "it runs on a GPU's fp8 tensor cores, and " + device.str() + " is not a GPU";
  if (!conv3d_sm90_built()) return "this build has no Hopper convolution kernels (CUTLASS, sm_90a)";
  const auto* props = at::cuda::getDeviceProperties(device.has_index() ? device.index() : 0);
  if (own_kernels_run_on(props->major, props->minor)) return "";
  return device.str() + " (" + props->name + ") is compute capability " + std::to_string(props->major) + "." +
         std::to_string(props->minor) + ", and the fp8 kernels are built for Hopper (9.0) alone";
}

bool runs_fp8(const torch::Tensor& x, const torch::Tensor& weight) {
  if (!current_choices().fp8 || !x.is_cuda() || x.dim() != 5 || x.scalar_type() != torch::kBFloat16 ||
      weight.dim() != 5 || !conv3d_sm90_built())
    return false;
  const auto* props = at::cuda::getDeviceProperties(x.device().index());
  return fp8_tile_for(props->major, props->minor, x.size(1), weight.size(0)).has_value();
}

void Fp8Weights::quantise(const torch::Tensor& w) {
  const auto wf = w.to(torch::kFloat);
  scale_ = wf.abs().amax({1, 2, 3, 4}).clamp_min(1e-30) / kE4m3Max;
  // Clamped: the quotient of the largest weight may round a hair past 448, which e4m3 has no room for.
  weight_ = (wf / scale_.view({-1, 1, 1, 1, 1}))
                .clamp(-kE4m3Max, kE4m3Max)
                .to(kE4m3)
                .contiguous(torch::MemoryFormat::ChannelsLast3d);
  weight_source_ = w.data_ptr();
  alpha_ = torch::Tensor();
  alpha_source_ = nullptr;
}

const torch::Tensor& Fp8Weights::weight(const torch::Tensor& w) {
  if (!weight_.defined() || weight_source_ != w.data_ptr() || weight_.device() != w.device()) quantise(w);
  return weight_;
}

const torch::Tensor& Fp8Weights::alpha(const torch::Tensor& w, const torch::Tensor& input_scale) {
  weight(w);
  if (!alpha_.defined() || alpha_source_ != input_scale.data_ptr()) {
    alpha_ = (scale_ / input_scale.to(scale_.device(), torch::kFloat)).contiguous();
    alpha_source_ = input_scale.data_ptr();
  }
  return alpha_;
}

bool own_kernels_run_on(int major, int minor) {
  return conv3d_sm90_built() && major == 9 && minor == 0;
}

std::optional<ConvTile> own_tile_for(ConvBackend backend, int major, int minor, int64_t c, int64_t k,
                                     std::array<int64_t, 3> filter, int64_t stride) {
  // The kernels are built for sm_90a alone, which runs on compute capability 9.0 and nothing else.
  if (backend == ConvBackend::kCudnn || major != 9 || minor != 0) return std::nullopt;
  const auto tile = fitting_tile(own_channels(c), own_channels(k));
  if (!tile || backend == ConvBackend::kOwn) return tile;
  // kAuto: every shape a tile takes but the 3x3 convolutions of the 128-wide tile at stride 1 (SeedVR2's and
  // Wan2.2's 128 to 1024 channels), where cuDNN measured faster: 628-784 against 579-630 TFLOP/s
  // (vaecodec_conv_micro on an H100, docs/benchmarks.md "Own convolutions"). Elsewhere the own kernel was
  // faster (96 -> 96 3x3x3: 521 against 360 TFLOP/s; 192 and 384 channels: 670-777 against 434-613; the
  // stride-2 downsamplers 2.7-4x) or as fast within a few percent (Wan's 192 -> 96 and 384 -> 768 phase
  // convolutions, 0.7% of the decode either way), and each shape left to cuDNN costs a fresh process its
  // first call (Note [Padded channels]).
  const bool spatial3 = filter[1] == 3 && filter[2] == 3;
  if (*tile == ConvTile::k128x128x64 && spatial3 && stride == 1) return std::nullopt;
  return tile;
}

bool conv3d_takes_layout(const torch::Tensor& x, const torch::Tensor& weight) {
  if (x.dim() != 5 || weight.dim() != 5 || weight.scalar_type() != x.scalar_type() ||
      (x.scalar_type() != torch::kBFloat16 && x.scalar_type() != kE4m3) || weight.size(1) != x.size(1))
    return false;
  const int64_t e = x.element_size();
  if (x.stride(1) != 1 && x.size(1) > 1) return false;
  for (int d : {0, 2, 3, 4})
    if (!aligned16(x.stride(d), e)) return false;
  if (!weight.is_contiguous(torch::MemoryFormat::ChannelsLast3d)) return false;
  // int32 extents in the kernel's problem shape.
  for (int d = 0; d < 5; ++d)
    if (x.size(d) > INT32_MAX || weight.size(d) > INT32_MAX) return false;
  return reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(weight.data_ptr()) % 16 == 0 && aligned16(x.size(1), e);
}

torch::Tensor conv3d_on_tile(const torch::Tensor& x, const torch::Tensor& weight,
                             const torch::Tensor& bias_f32, std::array<int64_t, 3> stride,
                             std::array<int64_t, 3> padding, ConvTile tile, const torch::Tensor& residual,
                             const torch::Tensor& alpha) {
  if (!x.is_cuda() || weight.device() != x.device() || !conv3d_takes_layout(x, weight)) return {};
  const bool fp8 = conv_tile_fp8(tile);
  if (fp8 != (x.scalar_type() == kE4m3)) return {};
  if (fp8 && (!alpha.defined() || alpha.scalar_type() != torch::kFloat || !alpha.is_contiguous() ||
              alpha.numel() != weight.size(0) || alpha.device() != x.device()))
    return {};
  if (bias_f32.defined() && (bias_f32.scalar_type() != torch::kFloat || !bias_f32.is_contiguous() ||
                             bias_f32.numel() != weight.size(0) || bias_f32.device() != x.device()))
    return {};
  std::array<int64_t, 3> out{};
  for (int i = 0; i < 3; ++i) {
    out[i] = (x.size(2 + i) + 2 * padding[i] - weight.size(2 + i)) / stride[i] + 1;
    if (out[i] < 1) return {};
  }
  const std::vector<int64_t> sizes{x.size(0), weight.size(0), out[0], out[1], out[2]};
  if (residual.defined() &&
      (residual.sizes() != at::IntArrayRef(sizes) || residual.scalar_type() != torch::kBFloat16 ||
       residual.device() != x.device() || !residual.is_contiguous(torch::MemoryFormat::ChannelsLast3d) ||
       reinterpret_cast<uintptr_t>(residual.data_ptr()) % 16 != 0))
    return {};
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty(
      sizes, x.options().dtype(torch::kBFloat16).memory_format(torch::MemoryFormat::ChannelsLast3d));
  Conv3dProblem p;
  p.x = x.data_ptr();
  p.n = x.size(0);
  p.c = x.size(1);
  p.d = x.size(2);
  p.h = x.size(3);
  p.w = x.size(4);
  p.x_stride[0] = x.stride(0);
  p.x_stride[1] = x.stride(2);
  p.x_stride[2] = x.stride(3);
  p.x_stride[3] = x.stride(4);
  p.weight = weight.data_ptr();
  p.k = weight.size(0);
  p.t = weight.size(2);
  p.r = weight.size(3);
  p.s = weight.size(4);
  p.bias = bias_f32.defined() ? bias_f32.data_ptr<float>() : nullptr;
  p.alpha = fp8 ? alpha.data_ptr<float>() : nullptr;
  p.y = y.data_ptr();
  p.residual = residual.defined() ? residual.data_ptr() : nullptr;
  for (int i = 0; i < 3; ++i) {
    p.pad[i] = static_cast<int>(padding[i]);
    p.stride[i] = static_cast<int>(stride[i]);
  }
  const auto stream = c10::cuda::getCurrentCUDAStream(x.device().index());
  const cudaError_t err = launch_conv3d_sm90(p, tile, stream.stream());
  if (err == cudaErrorNotSupported) return {};
  if (err != cudaSuccess)
    throw Error(std::string("convolution kernel launch failed: ") + cudaGetErrorString(err));
  return y;
}

torch::Tensor conv3d_own(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias_f32,
                         std::array<int64_t, 3> stride, std::array<int64_t, 3> padding,
                         const torch::Tensor& residual, PaddedWeights* padded) {
  if (!x.is_cuda()) return {};
  const auto* props = at::cuda::getDeviceProperties(x.device().index());
  if (!own_kernels_run_on(props->major, props->minor)) {
    KernelLog::count("conv3d", "cudnn");
    return {};
  }
  const auto tile = own_tile_for(current_choices().conv, props->major, props->minor, x.size(1),
                                 weight.size(0), {weight.size(2), weight.size(3), weight.size(4)}, stride[1]);
  torch::Tensor y;
  const int64_t c = own_channels(x.size(1)), k = own_channels(weight.size(0));
  if (tile && c == x.size(1) && k == weight.size(0)) {
    y = conv3d_on_tile(x, weight, bias_f32, stride, padding, *tile, residual);
  } else if (tile && padded && !residual.defined() && x.dim() == 5 && weight.size(1) == x.size(1) &&
             x.scalar_type() == torch::kBFloat16 && weight.scalar_type() == torch::kBFloat16) {
    // Note [Padded channels]
    const auto x_padded = c == x.size(1) ? x : pad_input_channels(x, c);
    y = conv3d_on_tile(x_padded, padded->weight(weight), padded->bias(bias_f32), stride, padding, *tile);
    if (y.defined() && k != weight.size(0))
      y = y.narrow(1, 0, weight.size(0)).contiguous(torch::MemoryFormat::ChannelsLast3d);
  }
  // Note [What the engine applied] (core/kernel_log.h).
  KernelLog::count("conv3d", y.defined() ? conv_tile_name(*tile) : "cudnn");
  return y;
}

torch::Tensor conv3d_fp8(const torch::Tensor& x, const torch::Tensor& input_scale,
                         const torch::Tensor& weight, const torch::Tensor& bias_f32,
                         std::array<int64_t, 3> stride, std::array<int64_t, 3> padding,
                         const torch::Tensor& residual, Fp8Weights& quantised) {
  if (!x.is_cuda() || x.scalar_type() != kE4m3 || !conv3d_sm90_built()) return {};
  const auto* props = at::cuda::getDeviceProperties(x.device().index());
  const auto tile = fp8_tile_for(props->major, props->minor, x.size(1), weight.size(0));
  if (!tile) return {};
  auto y = conv3d_on_tile(x, quantised.weight(weight), bias_f32, stride, padding, *tile, residual,
                          quantised.alpha(weight, input_scale));
  KernelLog::count("conv3d", y.defined() ? conv_tile_name(*tile) : "fp8 refused, bf16");
  return y;
}

}  // namespace vaecodec::core::kernels
