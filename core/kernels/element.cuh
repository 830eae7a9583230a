#pragma once

// Loads and stores of the storage types the kernels take (float, bf16, fp16), computed in float32.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "core/kernels/element_type.h"

namespace vaecodec::core::kernels {

template <typename T>
__device__ __forceinline__ float to_float(T v);
template <>
__device__ __forceinline__ float to_float(float v) {
  return v;
}
template <>
__device__ __forceinline__ float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float to_float(__half v) {
  return __half2float(v);
}

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float(float v) {
  return __float2bfloat16(v);
}
template <>
__device__ __forceinline__ __half from_float(float v) {
  return __float2half(v);
}

__device__ __forceinline__ float silu(float v) {
  return v / (1.0f + __expf(-v));
}

// Calls f with a value of the storage type that `type` names, for the caller to take its type from:
// with_element_type(type, [&](auto zero) { using T = decltype(zero); return launch<T>(...); }).
template <typename F>
cudaError_t with_element_type(ElementType type, F&& f) {
  switch (type) {
    case ElementType::kFloat32:
      return f(float{});
    case ElementType::kBFloat16:
      return f(__nv_bfloat16{});
    case ElementType::kFloat16:
      return f(__half{});
  }
  return cudaErrorInvalidValue;
}

// 16 bytes of T, for one vectorised load or store.
template <typename T>
struct Vec16 {
  static constexpr int kElements = 16 / sizeof(T);
  union {
    uint4 raw;
    T v[kElements];
  };
};

}  // namespace vaecodec::core::kernels
