#include "core/kernels/conv3d.h"

#include <atomic>
#include <cstdint>
#include <string>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "core/engine_report.h"
#include "core/error.h"

namespace vaecodec::core::kernels {

namespace {

std::atomic<ConvBackend> backend_{ConvBackend::kAuto};

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
  return std::nullopt;
}

}  // namespace

void set_conv_backend(ConvBackend backend) {
  backend_.store(backend);
}
ConvBackend conv_backend() {
  return backend_.load(std::memory_order_relaxed);
}

bool own_kernels_run_on(int major, int minor) {
  return conv3d_sm90_built() && major == 9 && minor == 0;
}

std::optional<ConvBackend> parse_conv_backend(const std::string& name) {
  if (name == "auto") return ConvBackend::kAuto;
  if (name == "cudnn") return ConvBackend::kCudnn;
  if (name == "own") return ConvBackend::kOwn;
  return std::nullopt;
}

std::optional<ConvTile> own_tile_for(ConvBackend backend, int major, int minor, int64_t c, int64_t k,
                                     std::array<int64_t, 3> filter, int64_t stride) {
  // The kernels are built for sm_90a alone, which runs on compute capability 9.0 and nothing else.
  if (backend == ConvBackend::kCudnn || major != 9 || minor != 0) return std::nullopt;
  const auto tile = fitting_tile(c, k);
  if (!tile || backend == ConvBackend::kOwn) return tile;
  // kAuto: the shapes where the own kernel measured faster than cuDNN (vaecodec_conv_micro on an H100,
  // docs/benchmarks.md "Own convolutions").
  const bool spatial3 = filter[1] == 3 && filter[2] == 3;
  const bool phase = filter[0] == 1 && filter[1] == 2 && filter[2] == 2;  // an upsampler's 2x2 phases
  if (stride == 2 && spatial3 && k % 96 == 0) return tile;                // Wan's downsamplers: 2.7-4x
  if (k == 192 && spatial3) return tile;                                  // 670-757 against 599-613 TFLOP/s
  if (k == 384 && c == 384 && spatial3) return tile;                      // 596-777 against 434-574
  if (k == 384 && c == 192 && phase) return tile;                         // 437-528 against 401-420
  if (k == 96 && c == 96 && spatial3) return tile;                        // 521 against 360 (cuDNN timed)
  return std::nullopt;
}

bool conv3d_takes_layout(const torch::Tensor& x, const torch::Tensor& weight) {
  if (x.dim() != 5 || weight.dim() != 5 || x.scalar_type() != torch::kBFloat16 ||
      weight.scalar_type() != torch::kBFloat16 || weight.size(1) != x.size(1))
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
                             std::array<int64_t, 3> padding, ConvTile tile, const torch::Tensor& residual) {
  if (!x.is_cuda() || weight.device() != x.device() || !conv3d_takes_layout(x, weight)) return {};
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
      (residual.sizes() != at::IntArrayRef(sizes) || residual.scalar_type() != x.scalar_type() ||
       residual.device() != x.device() || !residual.is_contiguous(torch::MemoryFormat::ChannelsLast3d) ||
       reinterpret_cast<uintptr_t>(residual.data_ptr()) % 16 != 0))
    return {};
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty(sizes, x.options().memory_format(torch::MemoryFormat::ChannelsLast3d));
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
                         const torch::Tensor& residual) {
  if (!x.is_cuda()) return {};
  const auto* props = at::cuda::getDeviceProperties(x.device().index());
  if (!own_kernels_run_on(props->major, props->minor)) {
    KernelLog::count("conv3d", "cudnn");
    return {};
  }
  const auto tile = own_tile_for(conv_backend(), props->major, props->minor, x.size(1), weight.size(0),
                                 {weight.size(2), weight.size(3), weight.size(4)}, stride[1]);
  torch::Tensor y;
  if (tile) y = conv3d_on_tile(x, weight, bias_f32, stride, padding, *tile, residual);
  // Note [What the engine applied] (core/engine_report.h).
  KernelLog::count("conv3d", y.defined() ? conv_tile_name(*tile) : "cudnn");
  return y;
}

}  // namespace vaecodec::core::kernels
