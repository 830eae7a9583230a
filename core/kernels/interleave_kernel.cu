#include "core/kernels/interleave_kernel.h"

#include <algorithm>
#include <cstdint>

#include "core/kernels/element.cuh"

namespace vaecodec::core::kernels {
namespace {

// One thread per output pixel and 16-byte vector of channels: out[f, 2i + a, 2j + b, c] =
// phases[f, i + a, j + b, (2a + b) * O + c] + bias[c]. Writes are consecutive across threads.
template <typename T>
__global__ void interleave_phases(const T* __restrict__ phases, const float* __restrict__ bias,
                                  T* __restrict__ out, int64_t frames, int height, int width, int channels) {
  constexpr int E = Vec16<T>::kElements;
  const int vectors = channels / E;
  const int64_t total = frames * 4 * height * width * vectors;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += stride) {
    const int vec = static_cast<int>(idx % vectors);
    const int64_t pixel = idx / vectors;
    const int x = static_cast<int>(pixel % (2 * width));
    const int y = static_cast<int>((pixel / (2 * width)) % (2 * height));
    const int64_t f = pixel / (4 * static_cast<int64_t>(height) * width);
    const int a = y & 1, b = x & 1;
    const int64_t row = f * (height + 1) + (y >> 1) + a;
    const int64_t src = (row * (width + 1) + (x >> 1) + b) * 4 * channels + (2 * a + b) * channels + vec * E;
    Vec16<T> p;
    p.raw = *reinterpret_cast<const uint4*>(phases + src);
    if (bias) {
#pragma unroll
      for (int e = 0; e < E; ++e) p.v[e] = from_float<T>(to_float(p.v[e]) + bias[vec * E + e]);
    }
    reinterpret_cast<uint4*>(out)[idx] = p.raw;
  }
}

template <typename T>
cudaError_t launch(const void* phases, const float* bias, void* out, int64_t frames, int64_t height,
                   int64_t width, int64_t channels, int processors, cudaStream_t stream) {
  constexpr int E = Vec16<T>::kElements;
  if (channels % E != 0 || reinterpret_cast<uintptr_t>(phases) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(out) % 16 != 0)
    return cudaErrorInvalidValue;
  const int64_t total = frames * 4 * height * width * (channels / E);
  if (total == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, int64_t{processors} * 32);
  interleave_phases<T><<<blocks, kThreads, 0, stream>>>(
      static_cast<const T*>(phases), bias, static_cast<T*>(out), frames, static_cast<int>(height),
      static_cast<int>(width), static_cast<int>(channels));
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_interleave_phases(const void* phases, const float* bias, void* out, ElementType type,
                                     int64_t frames, int64_t height, int64_t width, int64_t channels,
                                     int processors, cudaStream_t stream) {
  return with_element_type(type, [&](auto zero) {
    return launch<decltype(zero)>(phases, bias, out, frames, height, width, channels, processors, stream);
  });
}

}  // namespace vaecodec::core::kernels
