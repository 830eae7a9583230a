#include "core/kernels/norm_silu_kernel.h"

#include <algorithm>
#include <cstdint>

#include "core/kernels/element.cuh"

namespace vaecodec::core::kernels {
namespace {

constexpr int kWarp = 32;
constexpr int kMaxPerLane = 32;  // channels up to 1024 held in registers
constexpr int kThreads = 256;

// Note [Two RMS norms]
// The kernels normalise each voxel's channel vector v (C values) in one of two forms, chosen by mean_eps:
//   Wan's (mean_eps < 0; PyTorch's F.normalize times sqrt(C)): v / max(||v||_2, 1e-12) * sqrt(C) * gamma,
//   LTX-2's pixel norm (mean_eps >= 0, no gamma):             v * rsqrt(mean_c(v^2) + mean_eps).
// Away from zero they are one function up to gamma (sqrt(C) / ||v|| = rsqrt(mean_c(v^2))); near zero they
// are not. LTX-2's eps (1e-8) sits inside the root, added to the mean, because that is how its reference
// defines the norm (PixelNorm, diffusers' per-channel RMS norm) and its weights were trained with it: it
// caps the gain at 1 / sqrt(eps) = 1e4 and damps every voxel whose RMS is not far above sqrt(eps) = 1e-4
// (all channels 1e-5 give 0.0995, where Wan's form gives 1), and keeps a zero voxel at 0 rather than
// 0 * inf. Wan's floor acts only on a norm below 1e-12. A null gamma multiplies by 1, which is exact, so
// Wan's arithmetic is unchanged, in the same order.

// The factor a voxel's values are multiplied by, from their sum of squares (Note [Two RMS norms]).
__device__ __forceinline__ float norm_factor(float sum, int channels, float scale, float mean_eps) {
  if (mean_eps < 0.f) return scale / fmaxf(sqrtf(sum), 1e-12f);
  return rsqrtf(sum / static_cast<float>(channels) + mean_eps);
}

__device__ __forceinline__ float gain(const float* __restrict__ gamma, int c) {
  return gamma ? gamma[c] : 1.f;
}

// Note [Vectorised norm]
// The norm is memory-bound: a 96-channel bf16 voxel is 192 bytes read and 192 written. One warp per voxel
// (norm_silu_channels_last, the fallback) moves 2 bytes per lane per access and spends five shuffles per
// voxel; it reached about 600 GB/s on the H100. Here a voxel belongs to a group of G lanes (a power of two,
// at most a warp) and each lane moves V 16-byte vectors, so a warp reads 32 * 16 bytes per access and reduces
// in log2(G) shuffles. G * V * E == C exactly (E elements per vector), chosen by the launcher. The optional
// bias (the previous convolution's, deferred: Note [Deferred bias] in core/layers.h) is added in float32
// before the norm.
// With an e4m3 output O (Note [FP8 convolutions] in core/kernels/conv3d.cpp) each value is multiplied by
// *out_scale before it is rounded, and a lane stores 8 bytes per vector instead of 16.
template <typename T, typename O, int V>
__global__ void norm_silu_vectorised(const T* __restrict__ x, const float* __restrict__ gamma,
                                     const float* __restrict__ bias, O* __restrict__ y, int64_t voxels,
                                     int channels, int group_shift, float scale, float mean_eps,
                                     bool with_silu, O* __restrict__ tail, int64_t tail_from,
                                     const float* __restrict__ out_scale) {
  constexpr int E = Vec16<T>::kElements;
  using Out = VecOf<O, E>;
  const int group = 1 << group_shift;
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t voxel = thread >> group_shift;
  const int lane = static_cast<int>(thread & (group - 1));
  const bool active =
      voxel < voxels;  // whole groups are active or not: the shuffles below stay inside a group
  float v[V][E];
  float sum = 0.f;
  if (active) {
    const T* in = x + voxel * channels;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const int c0 = (lane + k * group) * E;
      Vec16<T> p;
      p.raw = *reinterpret_cast<const uint4*>(in + c0);
#pragma unroll
      for (int e = 0; e < E; ++e) {
        v[k][e] = to_float(p.v[e]) + (bias ? bias[c0 + e] : 0.f);
        sum += v[k][e] * v[k][e];
      }
    }
  }
  for (int offset = group / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (!active) return;
  const float inv = norm_factor(sum, channels, scale, mean_eps);
  const float multiplier = out_scale ? *out_scale : 1.f;
  O* out = y + voxel * channels;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const int c0 = (lane + k * group) * E;
    Out p;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float z = v[k][e] * inv * gain(gamma, c0 + e);
      p.v[e] = from_float<O>((with_silu ? silu(z) : z) * multiplier);
    }
    *reinterpret_cast<Out*>(out + c0) = p;
    if (tail && voxel >= tail_from) *reinterpret_cast<Out*>(tail + (voxel - tail_from) * channels + c0) = p;
  }
}

// Channels-last, any channel count up to 1024: one warp per voxel; the warp's lanes read consecutive
// channels.
template <typename T>
__global__ void norm_silu_channels_last(const T* __restrict__ x, const float* __restrict__ gamma,
                                        const float* __restrict__ bias, T* __restrict__ y, int64_t voxels,
                                        int channels, float scale, float mean_eps, bool with_silu) {
  const int lane = threadIdx.x % kWarp;
  const int64_t voxel = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  if (voxel >= voxels) return;
  const T* in = x + voxel * channels;
  float v[kMaxPerLane];
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int c = lane + i * kWarp;
    v[i] = c < channels ? to_float(in[c]) + (bias ? bias[c] : 0.f) : 0.f;
    sum += v[i] * v[i];
  }
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  const float inv = norm_factor(sum, channels, scale, mean_eps);
  T* out = y + voxel * channels;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int c = lane + i * kWarp;
    if (c < channels) {
      const float z = v[i] * inv * gain(gamma, c);
      out[c] = from_float<T>(with_silu ? silu(z) : z);
    }
  }
}

// Planar: one thread per voxel, looping over channels; neighbouring threads read neighbouring voxels.
template <typename T>
__global__ void norm_silu_planar(const T* __restrict__ x, const float* __restrict__ gamma,
                                 const float* __restrict__ bias, T* __restrict__ y, int64_t batch,
                                 int channels, int64_t spatial, float scale, float mean_eps, bool with_silu) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= batch * spatial) return;
  const int64_t b = i / spatial, s = i % spatial;
  const T* in = x + b * channels * spatial + s;
  T* out = y + b * channels * spatial + s;
  float sum = 0.f;
  for (int c = 0; c < channels; ++c) {
    const float v = to_float(in[c * spatial]) + (bias ? bias[c] : 0.f);
    sum += v * v;
  }
  const float inv = norm_factor(sum, channels, scale, mean_eps);
  for (int c = 0; c < channels; ++c) {
    const float v = to_float(in[c * spatial]) + (bias ? bias[c] : 0.f);
    const float z = v * inv * gain(gamma, c);
    out[c * spatial] = from_float<T>(with_silu ? silu(z) : z);
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// The vectorised kernel's shape for `channels`: V vectors per lane and log2 of the group size, or V = 0.
template <typename T>
void vector_shape(int64_t channels, int& vectors, int& group_shift) {
  constexpr int E = Vec16<T>::kElements;
  vectors = 0;
  for (int v : {3, 4, 2, 1}) {
    if (channels % (v * E) != 0) continue;
    const int64_t group = channels / (v * E);
    if (group > kWarp || (group & (group - 1)) != 0) continue;
    vectors = v;
    group_shift = 0;
    while ((int64_t{1} << group_shift) < group) ++group_shift;
    return;
  }
}

template <typename T, typename O, int V>
void launch_vectorised(const T* x, const float* gamma, const float* bias, O* y, int64_t voxels, int channels,
                       int group_shift, float scale, float mean_eps, bool with_silu, O* tail,
                       int64_t tail_from, const float* out_scale, cudaStream_t stream) {
  const int64_t threads = voxels << group_shift;
  const int64_t blocks = (threads + kThreads - 1) / kThreads;
  norm_silu_vectorised<T, O, V><<<blocks, kThreads, 0, stream>>>(x, gamma, bias, y, voxels, channels,
                                                                 group_shift, scale, mean_eps, with_silu,
                                                                 tail, tail_from, out_scale);
}

// The vectorised kernel with output O, or cudaErrorInvalidValue (nothing launched) where it does not apply.
template <typename T, typename O>
cudaError_t launch_vectorised_for(const T* x, const float* gamma, const float* bias, O* y, int64_t voxels,
                                  int64_t channels, float mean_eps, bool with_silu, O* tail,
                                  int64_t tail_from, const float* out_scale, cudaStream_t stream) {
  constexpr int kOutAlign = sizeof(O) * Vec16<T>::kElements;
  const auto aligned_out = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % kOutAlign == 0; };
  int vectors = 0, shift = 0;
  vector_shape<T>(channels, vectors, shift);
  if (vectors == 0 || !aligned16(x) || !aligned_out(y) || (tail && !aligned_out(tail)))
    return cudaErrorInvalidValue;
  const int c = static_cast<int>(channels);
  const float scale = sqrtf(static_cast<float>(channels));
  switch (vectors) {
    case 1:
      launch_vectorised<T, O, 1>(x, gamma, bias, y, voxels, c, shift, scale, mean_eps, with_silu, tail,
                                 tail_from, out_scale, stream);
      break;
    case 2:
      launch_vectorised<T, O, 2>(x, gamma, bias, y, voxels, c, shift, scale, mean_eps, with_silu, tail,
                                 tail_from, out_scale, stream);
      break;
    case 3:
      launch_vectorised<T, O, 3>(x, gamma, bias, y, voxels, c, shift, scale, mean_eps, with_silu, tail,
                                 tail_from, out_scale, stream);
      break;
    default:
      launch_vectorised<T, O, 4>(x, gamma, bias, y, voxels, c, shift, scale, mean_eps, with_silu, tail,
                                 tail_from, out_scale, stream);
      break;
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch(const void* xv, const float* gamma, const float* bias, void* yv, int64_t batch,
                   int64_t channels, int64_t spatial, bool channels_last, float mean_eps, bool with_silu,
                   void* tailv, int64_t tail_from, const float* fp8_scale, cudaStream_t stream) {
  const auto* x = static_cast<const T*>(xv);
  const float scale = sqrtf(static_cast<float>(channels));
  if (fp8_scale) {
    // e4m3 output: the vectorised channels-last kernel alone.
    if (!channels_last) return cudaErrorInvalidValue;
    return launch_vectorised_for<T, __nv_fp8_e4m3>(
        x, gamma, bias, static_cast<__nv_fp8_e4m3*>(yv), batch * spatial, channels, mean_eps, with_silu,
        static_cast<__nv_fp8_e4m3*>(tailv), tail_from, fp8_scale, stream);
  }
  auto* y = static_cast<T*>(yv);
  auto* tail = static_cast<T*>(tailv);
  if (channels_last) {
    const int64_t voxels = batch * spatial;
    const cudaError_t vectorised = launch_vectorised_for<T, T>(x, gamma, bias, y, voxels, channels, mean_eps,
                                                               with_silu, tail, tail_from, nullptr, stream);
    if (vectorised != cudaErrorInvalidValue) return vectorised;
    if (channels > kWarp * kMaxPerLane || tail) return cudaErrorInvalidValue;  // nothing launched
    const int64_t blocks = (voxels * kWarp + kThreads - 1) / kThreads;
    norm_silu_channels_last<T><<<blocks, kThreads, 0, stream>>>(
        x, gamma, bias, y, voxels, static_cast<int>(channels), scale, mean_eps, with_silu);
  } else {
    if (tail) return cudaErrorInvalidValue;
    const int64_t blocks = (batch * spatial + kThreads - 1) / kThreads;
    norm_silu_planar<T><<<blocks, kThreads, 0, stream>>>(x, gamma, bias, y, batch, static_cast<int>(channels),
                                                         spatial, scale, mean_eps, with_silu);
  }
  return cudaGetLastError();
}

// y += s (+ bias[c]), channels-last (element i has channel i % C), 16 bytes per thread and step.
template <typename T>
__global__ void add_residual_vectorised(T* __restrict__ y, const T* __restrict__ s,
                                        const float* __restrict__ bias, int64_t vectors, int channels) {
  constexpr int E = Vec16<T>::kElements;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < vectors; i += stride) {
    Vec16<T> a, b;
    a.raw = reinterpret_cast<const uint4*>(y)[i];
    b.raw = reinterpret_cast<const uint4*>(s)[i];
    const int c0 = static_cast<int>((i * E) % channels);
#pragma unroll
    for (int e = 0; e < E; ++e)
      a.v[e] = from_float<T>(to_float(a.v[e]) + to_float(b.v[e]) + (bias ? bias[c0 + e] : 0.f));
    reinterpret_cast<uint4*>(y)[i] = a.raw;
  }
}

template <typename T>
cudaError_t launch_residual(void* y, const void* s, const float* bias, int64_t elements, int64_t channels,
                            int processors, cudaStream_t stream) {
  constexpr int E = Vec16<T>::kElements;
  if (channels % E != 0 || !aligned16(y) || !aligned16(s)) return cudaErrorInvalidValue;
  const int64_t vectors = elements / E;
  const int64_t blocks = std::min<int64_t>((vectors + kThreads - 1) / kThreads, int64_t{processors} * 16);
  add_residual_vectorised<T><<<blocks, kThreads, 0, stream>>>(static_cast<T*>(y), static_cast<const T*>(s),
                                                              bias, vectors, static_cast<int>(channels));
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_rms_norm_silu(const void* x, const float* gamma, const float* bias, void* y,
                                 ElementType type, int64_t batch, int64_t channels, int64_t spatial,
                                 bool channels_last, float mean_eps, bool with_silu, void* tail,
                                 int64_t tail_from, const float* fp8_scale, cudaStream_t stream) {
  if (batch * spatial == 0) return cudaSuccess;
  return with_element_type(type, [&](auto zero) {
    return launch<decltype(zero)>(x, gamma, bias, y, batch, channels, spatial, channels_last, mean_eps,
                                  with_silu, tail, tail_from, fp8_scale, stream);
  });
}

cudaError_t launch_add_residual(void* y, const void* s, const float* bias, ElementType type, int64_t elements,
                                int64_t channels, int processors, cudaStream_t stream) {
  if (elements == 0) return cudaSuccess;
  return with_element_type(type, [&](auto zero) {
    return launch_residual<decltype(zero)>(y, s, bias, elements, channels, processors, stream);
  });
}

}  // namespace vaecodec::core::kernels
