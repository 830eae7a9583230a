#pragma once

namespace vaecodec::core::kernels {

// The storage types the kernels take; they compute in float32 whatever the storage (element.cuh).
enum class ElementType { kFloat32, kBFloat16, kFloat16 };

}  // namespace vaecodec::core::kernels
