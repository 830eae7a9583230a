#include "core/kernels/group_norm_kernel.h"

#include <algorithm>

#include "core/kernels/element.cuh"

namespace vaecodec::core::kernels {
namespace {

// V consecutive channels of one pixel, loaded and stored as one (up to 16-byte) access.
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// Partial statistics of a run of values: count, mean and sum of squared deviations (Chan et al.'s
// parallel-variance form, so that partials combine without cancellation).
struct Moments {
  float n, mean, m2;
};

__device__ __forceinline__ Moments combine(Moments a, Moments b) {
  const float n = a.n + b.n;
  if (n == 0.f) return a;
  const float delta = b.mean - a.mean;
  const float wb = b.n / n;
  return {n, a.mean + delta * wb, a.m2 + b.m2 + delta * delta * a.n * wb};
}

struct FrameLayout {
  int64_t batch_stride,
      frame_stride;  // elements between batch items and frames; within a frame: pixel * C + c
  int64_t frames;    // per batch item
  __device__ __forceinline__ int64_t base(int64_t frame_index) const {
    return (frame_index / frames) * batch_stride + (frame_index % frames) * frame_stride;
  }
};

// Pass 1. Block (frame f, split s) reduces pixels [s * P / S, (s + 1) * P / S) of frame f. Thread `lane` of a
// row owns channels [lane * V, lane * V + V) and walks the split's pixels row by row; it sums deviations from
// the frame's pixel 0 (a shift that keeps float32 sums well conditioned), then the block folds its rows and
// channels into one Moments per group: partials[(f * S + s) * G + g].
template <typename T, int V>
__global__ void group_moments(const T* __restrict__ x, FrameLayout layout, int64_t pixels, int channels,
                              int groups, Moments* __restrict__ partials) {
  extern __shared__ Moments shared[];  // [rows * channels]
  const int lanes = channels / V;
  const int rows = blockDim.x / lanes;
  const int lane = threadIdx.x % lanes, row = threadIdx.x / lanes;
  const int64_t frame = blockIdx.x;
  const int splits = gridDim.y;
  const int64_t begin = pixels * blockIdx.y / splits, end = pixels * (blockIdx.y + 1) / splits;
  const T* in = x + layout.base(frame);

  float shift[V], sum[V], squares[V];
  const Pack<T, V> first = *reinterpret_cast<const Pack<T, V>*>(in + lane * V);
#pragma unroll
  for (int i = 0; i < V; ++i) {
    shift[i] = to_float(first.v[i]);
    sum[i] = squares[i] = 0.f;
  }
  float count = 0.f;
  if (row < rows) {
    for (int64_t p = begin + row; p < end; p += rows) {
      const Pack<T, V> pack = *reinterpret_cast<const Pack<T, V>*>(in + p * channels + lane * V);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float d = to_float(pack.v[i]) - shift[i];
        sum[i] += d;
        squares[i] += d * d;
      }
      count += 1.f;
    }
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const float mean = count > 0.f ? sum[i] / count : 0.f;
      shared[row * channels + lane * V + i] = {count, shift[i] + mean,
                                               fmaxf(squares[i] - sum[i] * mean, 0.f)};
    }
  }
  __syncthreads();
  const int per_group = channels / groups;
  for (int g = threadIdx.x; g < groups; g += blockDim.x) {
    Moments total{0.f, 0.f, 0.f};
    for (int r = 0; r < rows; ++r)
      for (int c = g * per_group; c < (g + 1) * per_group; ++c)
        total = combine(total, shared[r * channels + c]);
    partials[(frame * splits + blockIdx.y) * groups + g] = total;
  }
}

// Pass 2. Block (frame f, split s) folds frame f's partials into each group's mean and 1 / sqrt(var + eps),
// turns them into one scale and shift per channel, and writes y = x * scale + shift (then SiLU) over its
// pixels.
template <typename T, int V>
__global__ void group_apply(const T* __restrict__ x, FrameLayout in_layout, T* __restrict__ y,
                            FrameLayout out_layout, const float* __restrict__ weight,
                            const float* __restrict__ bias, const Moments* __restrict__ partials,
                            int partial_splits, int64_t pixels, int channels, int groups, float eps,
                            bool apply_silu) {
  extern __shared__ float coefficients[];  // scale[channels], shift[channels], mean[groups], rstd[groups]
  float* scale = coefficients;
  float* shift = scale + channels;
  float* mean = shift + channels;
  float* rstd = mean + groups;
  const int64_t frame = blockIdx.x;
  for (int g = threadIdx.x; g < groups; g += blockDim.x) {
    Moments total{0.f, 0.f, 0.f};
    for (int s = 0; s < partial_splits; ++s)
      total = combine(total, partials[(frame * partial_splits + s) * groups + g]);
    mean[g] = total.mean;
    rstd[g] = rsqrtf(total.m2 / fmaxf(total.n, 1.f) + eps);
  }
  __syncthreads();
  const int per_group = channels / groups;
  for (int c = threadIdx.x; c < channels; c += blockDim.x) {
    const int g = c / per_group;
    scale[c] = rstd[g] * weight[c];
    shift[c] = bias[c] - mean[g] * scale[c];
  }
  __syncthreads();

  const int lanes = channels / V;
  const int rows = blockDim.x / lanes;
  const int lane = threadIdx.x % lanes, row = threadIdx.x / lanes;
  if (row >= rows) return;
  float a[V], b[V];
#pragma unroll
  for (int i = 0; i < V; ++i) {
    a[i] = scale[lane * V + i];
    b[i] = shift[lane * V + i];
  }
  const int splits = gridDim.y;
  const int64_t begin = pixels * blockIdx.y / splits, end = pixels * (blockIdx.y + 1) / splits;
  const T* in = x + in_layout.base(frame);
  T* out = y + out_layout.base(frame);
  for (int64_t p = begin + row; p < end; p += rows) {
    const Pack<T, V> pack = *reinterpret_cast<const Pack<T, V>*>(in + p * channels + lane * V);
    Pack<T, V> result;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      float v = to_float(pack.v[i]) * a[i] + b[i];
      if (apply_silu) v = silu(v);
      result.v[i] = from_float<T>(v);
    }
    *reinterpret_cast<Pack<T, V>*>(out + p * channels + lane * V) = result;
  }
}

struct Grid {
  int threads;
  dim3 blocks;
  FrameLayout in, out;
};

template <int V>
Grid grid_of(const FrameGroupNormArgs& a) {
  const int lanes = static_cast<int>(a.channels / V);
  const int rows = std::max(1, 256 / lanes);
  return {lanes * rows, dim3(static_cast<unsigned>(a.batch * a.frames), static_cast<unsigned>(a.splits)),
          FrameLayout{a.x_batch_stride, a.x_frame_stride, a.frames},
          FrameLayout{a.y_batch_stride, a.y_frame_stride, a.frames}};
}

template <typename T, int V>
cudaError_t moments(const FrameGroupNormArgs& a, cudaStream_t stream) {
  const Grid g = grid_of<V>(a);
  const size_t moments_bytes = sizeof(Moments) * (g.threads / (a.channels / V)) * a.channels;
  group_moments<T, V><<<g.blocks, g.threads, moments_bytes, stream>>>(
      static_cast<const T*>(a.x), g.in, a.pixels, static_cast<int>(a.channels), static_cast<int>(a.groups),
      static_cast<Moments*>(a.workspace));
  return cudaGetLastError();
}

template <typename T, int V>
cudaError_t apply(const FrameGroupNormArgs& a, const Moments* partials, int partial_splits,
                  cudaStream_t stream) {
  const Grid g = grid_of<V>(a);
  const size_t coefficient_bytes = sizeof(float) * 2 * (a.channels + a.groups);
  group_apply<T, V><<<g.blocks, g.threads, coefficient_bytes, stream>>>(
      static_cast<const T*>(a.x), g.in, static_cast<T*>(a.y), g.out, a.weight, a.bias, partials,
      partial_splits, a.pixels, static_cast<int>(a.channels), static_cast<int>(a.groups), a.eps, a.silu);
  return cudaGetLastError();
}

// The passes for T at the vector width args ask for: 16-byte accesses, or one value at a time.
template <typename T>
cudaError_t moments_for(const FrameGroupNormArgs& a, cudaStream_t stream) {
  constexpr int kWide = 16 / sizeof(T);
  return a.vector_width == kWide ? moments<T, kWide>(a, stream) : moments<T, 1>(a, stream);
}

template <typename T>
cudaError_t apply_for(const FrameGroupNormArgs& a, const Moments* partials, int partial_splits,
                      cudaStream_t stream) {
  constexpr int kWide = 16 / sizeof(T);
  return a.vector_width == kWide ? apply<T, kWide>(a, partials, partial_splits, stream)
                                 : apply<T, 1>(a, partials, partial_splits, stream);
}

bool runs(const FrameGroupNormArgs& a) {
  return a.batch * a.frames * a.pixels != 0;
}

}  // namespace

int frame_group_norm_vector_width(ElementType type, int64_t channels) {
  const int wide = type == ElementType::kFloat32 ? 4 : 8;
  return channels % wide == 0 ? wide : 1;
}

size_t frame_group_norm_workspace_bytes(int64_t batch, int64_t frames, int64_t groups, int splits) {
  return sizeof(Moments) * static_cast<size_t>(batch * frames * groups * splits);
}

cudaError_t launch_frame_group_norm(const FrameGroupNormArgs& args, cudaStream_t stream) {
  if (!runs(args)) return cudaSuccess;
  if (args.channels / args.vector_width > kFrameGroupNormMaxLanes) return cudaErrorInvalidValue;
  if (const cudaError_t err = launch_frame_group_moments(args, stream); err != cudaSuccess) return err;
  return launch_frame_group_apply(args, static_cast<const float*>(args.workspace), args.splits, stream);
}

cudaError_t launch_frame_group_moments(const FrameGroupNormArgs& args, cudaStream_t stream) {
  if (!runs(args)) return cudaSuccess;
  if (args.channels / args.vector_width > kFrameGroupNormMaxLanes) return cudaErrorInvalidValue;
  return with_element_type(args.type, [&](auto zero) { return moments_for<decltype(zero)>(args, stream); });
}

cudaError_t launch_frame_group_apply(const FrameGroupNormArgs& args, const float* partials,
                                     int partial_splits, cudaStream_t stream) {
  static_assert(sizeof(Moments) == sizeof(float) * kFrameGroupPartialFloats);
  if (!runs(args)) return cudaSuccess;
  if (args.channels / args.vector_width > kFrameGroupNormMaxLanes || partial_splits < 1)
    return cudaErrorInvalidValue;
  const auto* sets = reinterpret_cast<const Moments*>(partials);
  return with_element_type(
      args.type, [&](auto zero) { return apply_for<decltype(zero)>(args, sets, partial_splits, stream); });
}

}  // namespace vaecodec::core::kernels
