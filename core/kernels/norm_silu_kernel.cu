#include "core/kernels/norm_silu_kernel.h"

#include "core/kernels/element.cuh"

namespace vaecodec::core::kernels {
namespace {

constexpr int kWarp = 32;
constexpr int kMaxPerLane = 32;  // channels up to 1024 held in registers

// Channels-last: one warp per voxel; the warp's lanes read consecutive channels (coalesced).
template <typename T>
__global__ void norm_silu_channels_last(const T* __restrict__ x, const float* __restrict__ gamma, T* __restrict__ y,
                                        int64_t voxels, int channels, float scale) {
  const int lane = threadIdx.x % kWarp;
  const int64_t voxel = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  if (voxel >= voxels) return;
  const T* in = x + voxel * channels;
  float v[kMaxPerLane];
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int c = lane + i * kWarp;
    v[i] = c < channels ? to_float(in[c]) : 0.f;
    sum += v[i] * v[i];
  }
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  const float inv = scale / fmaxf(sqrtf(sum), 1e-12f);
  T* out = y + voxel * channels;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int c = lane + i * kWarp;
    if (c < channels) out[c] = from_float<T>(silu(v[i] * inv * gamma[c]));
  }
}

// Planar: one thread per voxel, looping over channels; neighbouring threads read neighbouring voxels.
template <typename T>
__global__ void norm_silu_planar(const T* __restrict__ x, const float* __restrict__ gamma, T* __restrict__ y,
                                 int64_t batch, int channels, int64_t spatial, float scale) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= batch * spatial) return;
  const int64_t b = i / spatial, s = i % spatial;
  const T* in = x + b * channels * spatial + s;
  T* out = y + b * channels * spatial + s;
  float sum = 0.f;
  for (int c = 0; c < channels; ++c) {
    const float v = to_float(in[c * spatial]);
    sum += v * v;
  }
  const float inv = scale / fmaxf(sqrtf(sum), 1e-12f);
  for (int c = 0; c < channels; ++c) out[c * spatial] = from_float<T>(silu(to_float(in[c * spatial]) * inv * gamma[c]));
}

template <typename T>
cudaError_t launch(const void* x, const float* gamma, void* y, int64_t batch, int64_t channels, int64_t spatial,
                   bool channels_last, cudaStream_t stream) {
  const float scale = sqrtf(static_cast<float>(channels));
  const int threads = 256;
  if (channels_last) {
    if (channels > kWarp * kMaxPerLane) return cudaErrorInvalidValue;
    const int64_t voxels = batch * spatial;
    const int64_t blocks = (voxels * kWarp + threads - 1) / threads;
    norm_silu_channels_last<T><<<blocks, threads, 0, stream>>>(static_cast<const T*>(x), gamma, static_cast<T*>(y),
                                                                voxels, static_cast<int>(channels), scale);
  } else {
    const int64_t blocks = (batch * spatial + threads - 1) / threads;
    norm_silu_planar<T><<<blocks, threads, 0, stream>>>(static_cast<const T*>(x), gamma, static_cast<T*>(y), batch,
                                                         static_cast<int>(channels), spatial, scale);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_rms_norm_silu(const void* x, const float* gamma, void* y, ElementType type, int64_t batch,
                                 int64_t channels, int64_t spatial, bool channels_last, cudaStream_t stream) {
  if (batch * spatial == 0) return cudaSuccess;
  switch (type) {
    case ElementType::kFloat32:
      return launch<float>(x, gamma, y, batch, channels, spatial, channels_last, stream);
    case ElementType::kBFloat16:
      return launch<__nv_bfloat16>(x, gamma, y, batch, channels, spatial, channels_last, stream);
    case ElementType::kFloat16:
      return launch<__half>(x, gamma, y, batch, channels, spatial, channels_last, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace vaecodec::core::kernels
