#include "core/kernels/norm_silu.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAStream.h>

#include "core/error.h"
#include "core/kernel_log.h"
#include "core/kernels/group_norm_kernel.h"
#include "core/kernels/interleave_kernel.h"
#include "core/kernels/norm_silu_kernel.h"

namespace vaecodec::core::kernels {

namespace {

// Whether index (b, c, t, h, w) lands on the same element offset in a and b (dims of size 1 do not matter).
bool same_layout(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.size(d) > 1 && a.stride(d) != b.stride(d)) return false;
  return true;
}

std::optional<ElementType> element_type(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat:
      return ElementType::kFloat32;
    case torch::kBFloat16:
      return ElementType::kBFloat16;
    case torch::kHalf:
      return ElementType::kFloat16;
    default:
      return std::nullopt;
  }
}

// Whether each frame of a [B, C, T, H, W] tensor is a channels-last [H, W, C] block.
bool frames_channels_last(const torch::Tensor& t) {
  const int64_t c = t.size(1), w = t.size(4);
  return (c == 1 || t.stride(1) == 1) && (w == 1 || t.stride(4) == c) &&
         (t.size(3) == 1 || t.stride(3) == w * c);
}

// A float32 copy of a per-channel parameter on `device` (no copy when it already is one).
torch::Tensor as_float(const torch::Tensor& p, const torch::Device& device) {
  return p.to(device, torch::kFloat).contiguous();
}

}  // namespace

bool rms_norm_silu_takes_layout(const torch::Tensor& x, const torch::Tensor& out) {
  if (x.dim() != 5) return false;
  const bool channels_last = x.is_contiguous(torch::MemoryFormat::ChannelsLast3d) && x.size(1) > 1;
  if (!channels_last && !x.is_contiguous()) return false;
  if (channels_last && x.size(1) > 1024) return false;
  return same_layout(x, out);
}

torch::Tensor dense_operand(const torch::Tensor& x) {
  const auto format = x.suggest_memory_format();
  return x.is_contiguous(format) ? x : x.contiguous(format);
}

std::pair<torch::Tensor, torch::Tensor> norm_operands(const torch::Tensor& x) {
  const torch::Tensor in = dense_operand(x);
  return {in, torch::empty(in.sizes(), in.options().memory_format(in.suggest_memory_format()))};
}

bool add_residual_takes_layout(const torch::Tensor& y, const torch::Tensor& s) {
  const auto format = torch::MemoryFormat::ChannelsLast3d;
  if (y.dim() != 5 || s.sizes() != y.sizes() || s.element_size() != y.element_size() ||
      !y.is_contiguous(format) || !s.is_contiguous(format))
    return false;
  return (y.size(1) * y.element_size()) % 16 == 0 && reinterpret_cast<uintptr_t>(y.data_ptr()) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(s.data_ptr()) % 16 == 0;
}

bool interleave_phases_takes_layout(const torch::Tensor& phases, const torch::Tensor& out) {
  const auto format = torch::MemoryFormat::ChannelsLast3d;
  if (phases.dim() != 5 || out.dim() != 5 || !phases.is_contiguous(format) || !out.is_contiguous(format))
    return false;
  const int64_t n = out.size(0), c = out.size(1), t = out.size(2), h = out.size(3) / 2, w = out.size(4) / 2;
  return phases.sizes() == at::IntArrayRef({n, 4 * c, t, h + 1, w + 1}) && out.size(3) == 2 * h &&
         out.size(4) == 2 * w && phases.element_size() == out.element_size() &&
         (c * out.element_size()) % 16 == 0 && reinterpret_cast<uintptr_t>(phases.data_ptr()) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(out.data_ptr()) % 16 == 0;
}

static bool frame_group_norm_into_impl(const torch::Tensor& x, const torch::Tensor& weight,
                                       const torch::Tensor& bias, int64_t groups, double eps, bool silu,
                                       const torch::Tensor& out, const FrameGroupPool& pool) {
  if (!x.is_cuda() || x.dim() != 5 || out.device() != x.device() || out.scalar_type() != x.scalar_type() ||
      out.sizes() != x.sizes())
    return false;
  const auto type = element_type(x.scalar_type());
  if (!type || !frames_channels_last(x) || !frames_channels_last(out)) return false;
  const int64_t channels = x.size(1);
  if (groups < 1 || channels % groups != 0) return false;

  FrameGroupNormArgs a;
  a.type = *type;
  a.batch = x.size(0);
  a.frames = x.size(2);
  a.pixels = x.size(3) * x.size(4);
  a.channels = channels;
  a.groups = groups;
  a.x_batch_stride = x.stride(0);
  a.x_frame_stride = x.stride(2);
  a.y_batch_stride = out.stride(0);
  a.y_frame_stride = out.stride(2);
  a.eps = static_cast<float>(eps);
  a.silu = silu;
  // 16-byte accesses when every frame of x and out starts on a 16-byte boundary.
  a.vector_width = frame_group_norm_vector_width(a.type, channels);
  const auto aligned = [&](int64_t elements) { return (elements * x.element_size()) % 16 == 0; };
  const bool wide_ok = reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(out.data_ptr()) % 16 == 0 && aligned(a.x_batch_stride) &&
                       aligned(a.x_frame_stride) && aligned(a.y_batch_stride) && aligned(a.y_frame_stride);
  if (!wide_ok) a.vector_width = 1;
  if (channels / a.vector_width > kFrameGroupNormMaxLanes) return false;
  // Enough blocks to fill the GPU a few times over (four per multiprocessor), each with a few hundred pixels.
  const int64_t frames = a.batch * a.frames;
  const int64_t processors = at::cuda::getDeviceProperties(x.device().index())->multiProcessorCount;
  const int64_t want = (4 * processors + frames - 1) / frames;
  a.splits = static_cast<int>(std::clamp<int64_t>(std::min(want, a.pixels / 256), 1, 1024));

  auto w = weight.to(torch::kFloat).contiguous();
  auto b = bias.to(torch::kFloat).contiguous();
  // The partials, [frame][split][group] (group_norm_kernel.h).
  auto workspace =
      torch::empty({frames, a.splits, groups, kFrameGroupPartialFloats}, x.options().dtype(torch::kFloat));
  a.x = x.data_ptr();
  a.y = out.data_ptr();
  a.weight = w.data_ptr<float>();
  a.bias = b.data_ptr<float>();
  a.workspace = workspace.data_ptr();
  const auto stream = c10::cuda::getCurrentCUDAStream(x.device().index());
  const auto check = [](cudaError_t err) {
    if (err != cudaSuccess)
      throw Error(std::string("GroupNorm kernel launch failed: ") + cudaGetErrorString(err));
  };
  if (!pool) {
    check(launch_frame_group_norm(a, stream.stream()));
    return true;
  }
  // Statistics over every part of the frames: this part's partials, pooled with the others' (Note [Bands
  // across devices] in core/band_exchange.h), then the second pass with all of them.
  check(launch_frame_group_moments(a, stream.stream()));
  const torch::Tensor all = pool(workspace).contiguous();
  if (all.dim() != 4 || all.size(0) != frames || all.size(2) != groups ||
      all.size(3) != kFrameGroupPartialFloats || all.scalar_type() != torch::kFloat ||
      all.device() != x.device())
    throw Error("GroupNorm: the pooled statistics are " + c10::str(all.sizes()) + " " +
                std::string(c10::toString(all.scalar_type())) + " on " + all.device().str() + ", not [" +
                std::to_string(frames) + ", *, " + std::to_string(groups) + ", 3] float32 on " +
                x.device().str());
  check(launch_frame_group_apply(a, all.data_ptr<float>(), static_cast<int>(all.size(1)), stream.stream()));
  return true;
}

// Whether `tail` can take the last frames of `out` as the kernel writes them: one batch item, every tensor
// dense channels-last, tail [1, C, k, H, W] with k no more than out's frames
// (Note [History written by the norm] in core/layers.cpp).
static bool rms_norm_tail_fits(const torch::Tensor& x, const torch::Tensor& out, const torch::Tensor& tail) {
  const auto format = torch::MemoryFormat::ChannelsLast3d;
  return x.size(0) == 1 && tail.dim() == 5 && tail.size(0) == 1 && tail.size(1) == x.size(1) &&
         tail.size(2) <= x.size(2) && tail.size(3) == x.size(3) && tail.size(4) == x.size(4) &&
         tail.scalar_type() == out.scalar_type() && tail.device() == x.device() && x.is_contiguous(format) &&
         out.is_contiguous(format) && tail.is_contiguous(format) && x.size(1) > 1;
}

// fp8_scale (a 1-element float32 tensor on x's device), where defined: out and tail are e4m3
// (Note [FP8 convolutions] in core/kernels/conv3d.cpp). mean_eps >= 0: LTX-2's form of the norm, gamma
// undefined (Note [Two RMS norms] in core/kernels/norm_silu_kernel.cu).
static bool rms_norm_silu_into_impl(const torch::Tensor& x, const torch::Tensor& gamma,
                                    const torch::Tensor& out, const torch::Tensor& bias, bool with_silu,
                                    const torch::Tensor& tail = {}, bool* tail_written = nullptr,
                                    const torch::Tensor& fp8_scale = {}, float mean_eps = -1.f) {
  if (tail_written) *tail_written = false;
  const auto out_type = fp8_scale.defined() ? c10::ScalarType::Float8_e4m3fn : x.scalar_type();
  if (!x.is_cuda() || x.dim() != 5 || out.device() != x.device() || out.scalar_type() != out_type ||
      out.sizes() != x.sizes())
    return false;
  if (fp8_scale.defined() && (fp8_scale.device() != x.device() || fp8_scale.scalar_type() != torch::kFloat ||
                              fp8_scale.numel() != 1))
    return false;
  const auto type = element_type(x.scalar_type());
  if (!type) return false;
  if (!rms_norm_silu_takes_layout(x, out)) {
    // Note [Frames of a band's buffer]
    // In a band the output is the convolution's buffer, whose rows are cut by the halo rows above and below,
    // so it is not dense as a whole, but each of its frames is: one launch per frame (of each batch item)
    // then, rather than the composite path's half-dozen passes.
    auto frame = [&](const torch::Tensor& t, int64_t b, int64_t f) {
      return t.narrow(0, b, 1).narrow(2, f, 1);
    };
    if (x.numel() == 0 || !rms_norm_silu_takes_layout(frame(x, 0, 0), frame(out, 0, 0))) return false;
    for (int64_t b = 0; b < x.size(0); ++b)
      for (int64_t f = 0; f < x.size(2); ++f)
        if (!rms_norm_silu_into_impl(frame(x, b, f), gamma, frame(out, b, f), bias, with_silu, {}, nullptr,
                                     fp8_scale, mean_eps))
          throw Error("RMSNorm+SiLU: a frame of a band's buffer was refused after its first was taken");
    return true;
  }
  const bool channels_last = x.is_contiguous(torch::MemoryFormat::ChannelsLast3d) && x.size(1) > 1;
  const int64_t batch = x.size(0), channels = x.size(1),
                spatial = x.numel() / std::max<int64_t>(1, batch * channels);
  torch::Tensor g;
  if (gamma.defined()) g = as_float(gamma, x.device()).reshape({channels});
  torch::Tensor b;
  if (bias.defined()) b = as_float(bias, x.device()).reshape({channels});
  const auto stream = c10::cuda::getCurrentCUDAStream(x.device().index());
  auto launch = [&](const torch::Tensor& t) {
    return launch_rms_norm_silu(x.data_ptr(), g.defined() ? g.data_ptr<float>() : nullptr,
                                b.defined() ? b.data_ptr<float>() : nullptr, out.data_ptr(), *type, batch,
                                channels, spatial, channels_last, mean_eps, with_silu,
                                t.defined() ? t.data_ptr() : nullptr,
                                t.defined() ? (x.numel() - t.numel()) / channels : 0,
                                fp8_scale.defined() ? fp8_scale.data_ptr<float>() : nullptr, stream.stream());
  };
  const bool with_tail = tail.defined() && rms_norm_tail_fits(x, out, tail);
  cudaError_t err = launch(with_tail ? tail : torch::Tensor());
  // Only the vectorised kernel writes a tail; where it does not apply nothing was launched.
  if (with_tail && err == cudaErrorInvalidValue)
    err = launch({});
  else if (with_tail && err == cudaSuccess && tail_written)
    *tail_written = true;
  // The e4m3 output has the vectorised kernel alone: where it does not apply the caller's composite path
  // runs.
  if (fp8_scale.defined() && err == cudaErrorInvalidValue) return false;
  if (err != cudaSuccess)
    throw Error(std::string("RMSNorm+SiLU kernel launch failed: ") + cudaGetErrorString(err));
  return true;
}

static bool add_residual_impl(const torch::Tensor& y, const torch::Tensor& s, const torch::Tensor& bias) {
  if (!y.is_cuda() || s.device() != y.device() || s.scalar_type() != y.scalar_type()) return false;
  const auto type = element_type(y.scalar_type());
  if (!type || !add_residual_takes_layout(y, s)) return false;
  const int64_t channels = y.size(1);
  const auto b = as_float(bias, y.device()).reshape({channels});
  const int processors = at::cuda::getDeviceProperties(y.device().index())->multiProcessorCount;
  const auto stream = c10::cuda::getCurrentCUDAStream(y.device().index());
  const cudaError_t err = launch_add_residual(y.data_ptr(), s.data_ptr(), b.data_ptr<float>(), *type,
                                              y.numel(), channels, processors, stream.stream());
  if (err != cudaSuccess)
    throw Error(std::string("residual add kernel launch failed: ") + cudaGetErrorString(err));
  return true;
}

static bool interleave_phases_into_impl(const torch::Tensor& phases, const torch::Tensor& bias,
                                        const torch::Tensor& out) {
  if (!phases.is_cuda() || out.device() != phases.device() || out.scalar_type() != phases.scalar_type())
    return false;
  const auto type = element_type(phases.scalar_type());
  if (!type || !interleave_phases_takes_layout(phases, out)) return false;
  const int64_t n = out.size(0), c = out.size(1), t = out.size(2), h = out.size(3) / 2, w = out.size(4) / 2;
  if (bias.defined() && (bias.scalar_type() != torch::kFloat || !bias.is_contiguous() || bias.numel() != c ||
                         bias.device() != out.device()))
    return false;
  const int processors = at::cuda::getDeviceProperties(out.device().index())->multiProcessorCount;
  const auto stream = c10::cuda::getCurrentCUDAStream(out.device().index());
  const cudaError_t err =
      launch_interleave_phases(phases.data_ptr(), bias.defined() ? bias.data_ptr<float>() : nullptr,
                               out.data_ptr(), *type, n * t, h, w, c, processors, stream.stream());
  if (err == cudaErrorInvalidValue) return false;
  if (err != cudaSuccess)
    throw Error(std::string("upsampler kernel launch failed: ") + cudaGetErrorString(err));
  return true;
}

// Note [What the engine applied] (core/kernel_log.h): each entry point counts whether its kernel ran.
bool frame_group_norm_into(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                           int64_t groups, double eps, bool silu, const torch::Tensor& out,
                           const FrameGroupPool& pool) {
  const bool ran = frame_group_norm_into_impl(x, weight, bias, groups, eps, silu, out, pool);
  KernelLog::count("frame_group_norm", ran ? "own kernel" : "composite");
  return ran;
}

bool rms_norm_silu_into(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& out,
                        const torch::Tensor& bias, const torch::Tensor& tail, bool* tail_written) {
  const bool ran = rms_norm_silu_into_impl(x, gamma, out, bias, /*with_silu=*/true, tail, tail_written);
  KernelLog::count("rms_norm_silu", ran ? "own kernel" : "composite");
  return ran;
}

bool rms_norm_silu_fp8_into(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& out,
                            const torch::Tensor& scale, const torch::Tensor& bias, const torch::Tensor& tail,
                            bool* tail_written) {
  const bool ran =
      rms_norm_silu_into_impl(x, gamma, out, bias, /*with_silu=*/true, tail, tail_written, scale);
  KernelLog::count("rms_norm_silu", ran ? "own kernel, e4m3 out" : "composite");
  return ran;
}

bool rms_norm_into(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& out) {
  const bool ran = rms_norm_silu_into_impl(x, gamma, out, {}, /*with_silu=*/false);
  KernelLog::count("rms_norm", ran ? "own kernel" : "composite");
  return ran;
}

bool pixel_norm_silu_into(const torch::Tensor& x, double eps, const torch::Tensor& out) {
  // eps < 0 would select Wan's form; a NaN eps is no norm at all.
  const bool ran = eps >= 0 && rms_norm_silu_into_impl(x, {}, out, {}, /*with_silu=*/true, {}, nullptr, {},
                                                       static_cast<float>(eps));
  KernelLog::count("pixel_norm_silu", ran ? "own kernel" : "composite");
  return ran;
}

bool add_residual_(const torch::Tensor& y, const torch::Tensor& s, const torch::Tensor& bias) {
  const bool ran = add_residual_impl(y, s, bias);
  KernelLog::count("add_residual", ran ? "own kernel" : "composite");
  return ran;
}

bool interleave_phases_into(const torch::Tensor& phases, const torch::Tensor& bias,
                            const torch::Tensor& out) {
  const bool ran = interleave_phases_into_impl(phases, bias, out);
  KernelLog::count("interleave_phases", ran ? "own kernel" : "composite");
  return ran;
}

}  // namespace vaecodec::core::kernels
