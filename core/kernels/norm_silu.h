#pragma once

#include <optional>

#include <torch/torch.h>

namespace vaecodec::core::kernels {

// SiLU(RMSNorm(x)) over the channel axis of a 5-D CUDA tensor in one pass (Note [RMSNorm]); nullopt when the
// kernel does not apply (CPU tensors, unsupported dtype or layout), and the caller takes the composite path.
// x: [B, C, T, H, W], contiguous or channels-last-3d; gamma: [C, ...].
std::optional<torch::Tensor> rms_norm_silu(const torch::Tensor& x, const torch::Tensor& gamma);
// The same written into `out` (shaped like x, laid out like x in memory, possibly a view into a larger buffer);
// false when the kernel does not apply and nothing was written.
bool rms_norm_silu_into(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& out);

}  // namespace vaecodec::core::kernels
