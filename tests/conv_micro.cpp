// Times one convolution shape at a time: cuDNN (LibTorch's conv3d, heuristics or timing) against each own
// Hopper tile that takes it (Note [Own convolutions] in core/kernels/conv3d.h), bf16, channels-last, and
// prints a line per shape and kernel: milliseconds (median of the timed runs, CUDA events), TFLOP/s and the
// relative difference to cuDNN's output. A development tool for docs/benchmarks.md, run by
// scripts/gpu_check.sh (phase conv); not a test.
//   vaecodec_conv_micro [--autotune] [--runs N] [C K T R S D H W [stride] ...]
// Without shapes: the Wan2.1 decoder's and encoder's convolutions at 1280x720.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "core/kernels/conv3d.h"

namespace {

using vaecodec::core::kernels::ConvTile;

struct Shape {
  int64_t c, k, t, r, s, d, h, w, stride;
};

template <typename Run>
double median_ms(Run&& run, int runs) {
  const auto stream = c10::cuda::getCurrentCUDAStream();
  run();  // warm-up: cuDNN's plan, the kernel's module
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start, stream.stream());
    run();
    cudaEventRecord(stop, stream.stream());
    cudaEventSynchronize(stop);
    float t = 0;
    cudaEventElapsedTime(&t, start, stop);
    ms.push_back(t);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  bool autotune = false;
  int runs = 10;
  std::vector<Shape> shapes;
  std::vector<int64_t> numbers;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--autotune") {
      autotune = true;
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else {
      numbers.push_back(std::atoll(a.c_str()));
    }
  }
  for (size_t i = 0; i + 8 <= numbers.size(); i += 9) {
    const int64_t stride = i + 8 < numbers.size() ? numbers[i + 8] : 1;
    shapes.push_back({numbers[i], numbers[i + 1], numbers[i + 2], numbers[i + 3], numbers[i + 4],
                      numbers[i + 5], numbers[i + 6], numbers[i + 7], stride});
  }
  if (shapes.empty()) {
    // Decoder at 720p, steady chunks (4 output frames after the temporal upsamplers; +2 history frames).
    shapes = {{96, 96, 3, 3, 3, 6, 720, 1280, 1},  {192, 96, 3, 3, 3, 6, 720, 1280, 1},
              {192, 192, 3, 3, 3, 6, 360, 640, 1}, {384, 192, 3, 3, 3, 6, 360, 640, 1},
              {384, 384, 3, 3, 3, 6, 180, 320, 1}, {384, 384, 3, 3, 3, 4, 90, 160, 1},
              {192, 384, 1, 2, 2, 4, 361, 641, 1}, {384, 768, 1, 2, 2, 4, 181, 321, 1},
              {96, 96, 1, 3, 3, 4, 721, 1281, 2},  {192, 192, 1, 3, 3, 4, 361, 641, 2}};
  }
  if (!torch::cuda::is_available()) {
    std::fprintf(stderr, "vaecodec_conv_micro: error: no CUDA device to time the convolutions on\n");
    return 2;
  }
  at::globalContext().setBenchmarkCuDNN(autotune);
  const auto cl = torch::MemoryFormat::ChannelsLast3d;
  const auto* props = at::cuda::getDeviceProperties(0);
  std::printf("device %s (%d.%d), cuDNN %s, %d runs each, own kernels %s\n", props->name, props->major,
              props->minor, autotune ? "timed" : "heuristics", runs,
              vaecodec::core::kernels::conv3d_sm90_built() ? "built" : "not built");
  torch::NoGradGuard no_grad;
  for (const Shape& s : shapes) {
    const int64_t pad = s.stride == 1 && s.r == 3 ? 1 : (s.r == 2 ? 1 : 0);
    const std::array<int64_t, 3> stride{1, s.stride, s.stride}, padding{0, pad, pad};
    const auto x = torch::randn({1, s.c, s.d, s.h, s.w}, torch::kCUDA).to(torch::kBFloat16).contiguous(cl);
    const auto w =
        (torch::randn({s.k, s.c, s.t, s.r, s.s}, torch::kCUDA) / std::sqrt(double(s.c * s.t * s.r * s.s)))
            .to(torch::kBFloat16)
            .contiguous(cl);
    torch::Tensor reference;
    const double ms_cudnn = median_ms(
        [&] {
          reference =
              at::conv3d(x, w, {}, {stride[0], stride[1], stride[2]}, {padding[0], padding[1], padding[2]});
        },
        runs);
    const double flop =
        2.0 * static_cast<double>(reference.numel()) * static_cast<double>(s.c * s.t * s.r * s.s);
    const auto line = [&](const char* kernel, double ms, double diff) {
      std::printf(
          "%4ld -> %4ld  %ldx%ldx%ld  in %ldx%ldx%ld /%ld  %-16s %8.3f ms  %6.1f TFLOP/s  diff %.2e\n",
          static_cast<long>(s.c), static_cast<long>(s.k), static_cast<long>(s.t), static_cast<long>(s.r),
          static_cast<long>(s.s), static_cast<long>(s.d), static_cast<long>(s.h), static_cast<long>(s.w),
          static_cast<long>(s.stride), kernel, ms, flop / ms / 1e9, diff);
    };
    line("cudnn", ms_cudnn, 0.0);
    // The fp8 tiles (Note [FP8 convolutions]) on the same values in e4m3, the weights scaled per channel.
    const auto e4m3 = c10::ScalarType::Float8_e4m3fn;
    vaecodec::core::kernels::Fp8Weights quantised;
    const auto x8 = x.to(e4m3).contiguous(cl);
    const auto& w8 = quantised.weight(w);
    const auto& alpha = quantised.alpha(w, torch::ones({1}, torch::kCUDA));
    for (int t = 0; t < static_cast<int>(ConvTile::kCount); ++t) {
      const auto tile = static_cast<ConvTile>(t);
      const bool fp8 = vaecodec::core::kernels::conv_tile_fp8(tile);
      const auto run = [&] {
        return fp8 ? vaecodec::core::kernels::conv3d_on_tile(x8, w8, {}, stride, padding, tile, {}, alpha)
                   : vaecodec::core::kernels::conv3d_on_tile(x, w, {}, stride, padding, tile);
      };
      torch::Tensor y = run();
      if (!y.defined()) continue;
      const double ms = median_ms([&] { y = run(); }, runs);
      const double diff =
          ((y.to(torch::kFloat) - reference.to(torch::kFloat)).norm() / reference.to(torch::kFloat).norm())
              .item<double>();
      line(vaecodec::core::kernels::conv_tile_name(tile), ms, diff);
    }
    std::fflush(stdout);
  }
  return 0;
}
