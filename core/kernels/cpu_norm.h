#pragma once

#include <torch/torch.h>

namespace vaecodec::core::kernels {

// Note [The CPU's norm in one pass]
// On the CPU the decoders' and encoders' narrow full-resolution layers spend as much time in their
// element-wise work as in a good part of their convolutions: LibTorch's composite of SiLU(RMSNorm(x + bias))
// reads and writes the tensor five times (the bias, the squares, the division, the product, the SiLU), and
// the residual's add twice. Channels-last, a pixel's channels are adjacent, so one pass can do it all: each
// pixel sums its channels' squares, then writes SiLU(v / max(||v||, 1e-12) * sqrt(C) * gamma) for v = x +
// bias. The exponential is a polynomial (relative error below 1e-7, as good as float32's own), eight lanes
// at a time with AVX2 and FMA; a processor without them, or a tensor whose channels are not adjacent, takes
// the composite. A pixel's result depends on its channels alone, so any chunking, tiling, number of threads
// or block of a stream gives the same bits. The rows of pixels are shared among LibTorch's threads by
// at::parallel_for, which is OpenMP inlined from LibTorch's headers: this file is compiled with -fopenmp
// (core/CMakeLists.txt), or it would run on one thread while the others wait. The 2-core machine: 16 channels
// x 6 frames of 320x240, 5.4 ms against 18.2 ms for the composite; a CPU decode of 320x240 x49 with the
// demonstration Wan2.1, 6.9 s against 8.7 s (docs/benchmarks.md, "The CPU's norm in one pass").

// SiLU(RMSNorm(x + bias)) into `out` for float32 CPU tensors [B, C, T, H, W] whose channels are adjacent
// (stride 1 over C, as channels-last-3d tensors and their views are), out shaped like x (a view into a
// larger buffer is fine). gamma: [C] float32 contiguous (any shape of C values), scale: what it is multiplied
// by (sqrt(C)), in float32 as the composite does; bias: [C] or undefined. False, with nothing written, when
// it does not apply.
bool rms_norm_silu_cpu(const torch::Tensor& x, const torch::Tensor& gamma, float scale,
                       const torch::Tensor& out, const torch::Tensor& bias);

// y += s + bias in one pass for float32 CPU tensors of the same shape whose channels are adjacent (bias [C]
// or undefined). False, with nothing written, when it does not apply.
bool add_residual_cpu(const torch::Tensor& y, const torch::Tensor& s, const torch::Tensor& bias);

// How many of LibTorch's threads a loop of the engine's own (at::parallel_for in this library) runs on: all
// of them where the library was compiled with OpenMP, one otherwise (Note [The CPU's norm in one pass]).
int cpu_loop_threads();

}  // namespace vaecodec::core::kernels
