#pragma once

// Loads and stores of the storage types the kernels take (float, bf16, fp16), computed in float32.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
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

// e4m3, saturating: a value past 448 becomes +-448, never NaN (Note [FP8 convolutions] in
// core/kernels/conv3d.cpp); rounded to nearest even.
template <>
__device__ __forceinline__ __nv_fp8_e4m3 from_float(float v) {
  __nv_fp8_e4m3 r;
  r.__x = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
  return r;
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

// E elements of T stored or loaded with one access (16 bytes of bf16, 8 of e4m3).
template <typename T, int E>
struct alignas(sizeof(T) * E) VecOf {
  T v[E];
};

}  // namespace vaecodec::core::kernels
