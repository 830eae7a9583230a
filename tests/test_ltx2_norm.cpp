// LTX-2's pixel norm + SiLU on the GPU (Note [LTX-2 pixel norm on the GPU] in
// core/models/ltx2/ltx2_blocks.cpp): the layouts the model hands the fused kernel, checked on the CPU; the
// kernel against the composite, and the tiny models' encode and decode against the CPU, on CUDA. LibTorch
// before Catch: c10 defines a CHECK macro of its own, and Catch's must be the one left.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <utility>

#include "core/engine.h"
#include "core/kernel_log.h"
#include "core/kernels/norm_silu.h"
#include "core/models/ltx2/ltx2_blocks.h"
#include "core/models/registry.h"
#include "tests/gpu_support.h"
#include "tests/test_support.h"
#include "tests/tiles_support.h"

namespace vaecodec::test {
namespace {

constexpr auto kChannelsLast = torch::MemoryFormat::ChannelsLast3d;

// ltx2_pixel_norm_silu's composite path, which the kernel replaces on CUDA.
torch::Tensor composite_pixel_norm_silu(const torch::Tensor& x) {
  const auto xf = x.to(torch::kFloat);
  return torch::silu(xf * torch::rsqrt(xf.square().mean(1, /*keepdim=*/true) + 1e-8)).to(x.scalar_type());
}

// Whether the kernels take what norm_operands makes of x, and whether it had to copy x for that.
void check_operands(const torch::Tensor& x, bool copied) {
  const auto [in, out] = core::kernels::norm_operands(x);
  CHECK(in.is_same(x) == !copied);
  CHECK(torch::equal(in, x));
  CHECK(out.sizes() == x.sizes());
  CHECK(out.scalar_type() == x.scalar_type());
  CHECK(core::kernels::rms_norm_silu_takes_layout(in, out));
}

void randomise(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.parameters()) {
    p.copy_(0.1 * torch::randn(p.sizes()));
    // As VaeModel::set_channels_last stores the convolutions' weights on the GPU.
    if (p.dim() == 5) p.set_data(p.contiguous(kChannelsLast));
  }
}

// Pixel-norm calls counted by KernelLog: (own kernel, composite).
std::pair<int64_t, int64_t> pixel_norm_calls() {
  int64_t own = 0, composite = 0;
  for (const auto& e : core::KernelLog::entries()) {
    if (e.kernel != "pixel_norm_silu") continue;
    (e.path == "own kernel" ? own : composite) += e.calls;
  }
  return {own, composite};
}

}  // namespace

TEST_CASE("the LTX-2 pixel norm's kernel takes every tensor the model hands it", "[ltx2][norm][layout]") {
  // On the GPU the model runs channels-last (Note [Channels-last]); here on the CPU, in float32, as there.
  // The kernels' layout conditions do not depend on the device.
  SECTION("the released widths, in both layouts") {
    for (const int64_t c : {128, 256, 512, 1024}) {
      for (const auto format : {kChannelsLast, torch::MemoryFormat::Contiguous}) {
        INFO(c << " channels, " << (format == kChannelsLast ? "channels-last" : "contiguous"));
        check_operands(torch::randn({1, c, 3, 4, 6}).contiguous(format), /*copied=*/false);
      }
    }
    // 2.0's encoder is 2048 wide at its end: its convolutions' channels-last outputs are past the
    // channels-last kernels' 1024 channels (the composite runs there); the downsampler's contiguous output is
    // taken.
    const auto wide = torch::randn({1, 2048, 2, 2, 3});
    CHECK_FALSE(core::kernels::rms_norm_silu_takes_layout(wide.contiguous(kChannelsLast),
                                                          torch::empty_like(wide, kChannelsLast)));
    check_operands(wide, /*copied=*/false);
  }

  SECTION("the blocks' outputs, chunk after chunk") {
    torch::manual_seed(0);
    torch::NoGradGuard no_grad;
    const int64_t c = 16;
    const auto ahead = core::LTX2Conv::Time::kLookAhead;
    const auto input = [&](int64_t channels, int64_t frames) {
      return torch::randn({1, channels, frames, 4, 6}).contiguous(kChannelsLast);
    };
    {
      INFO("a residual block");
      core::LTX2ResBlock block(c, ahead, /*reflect=*/true);
      randomise(block);
      core::CausalCache cache;
      for (const int64_t frames : {2, 3, 1}) {
        cache.rewind();
        const auto y = block.forward(input(c, frames), cache, false);
        check_operands(y, /*copied=*/false);  // empty too: a chunk that settles no frame yet
      }
    }
    for (const std::array<int64_t, 3> stride : {std::array<int64_t, 3>{2, 2, 2}, {1, 2, 2}, {2, 1, 1}}) {
      INFO("an upsampler of stride " << stride[0] << "x" << stride[1] << "x" << stride[2]);
      core::LTX2Upsampler up(c, /*multiplier=*/2, stride, /*residual=*/true, /*reflect=*/false);
      randomise(up);
      core::CausalCache cache;
      for (const int64_t frames : {2, 3, 1, 2}) {
        INFO(frames << " frames in");
        cache.rewind();
        const auto y = up.forward(input(c, frames), cache, false);
        const bool dense = y.is_contiguous() || y.is_contiguous(kChannelsLast);
        check_operands(y, /*copied=*/!dense);
        if (y.size(2) == 0) continue;
        // The unfold is made in the input's layout (Note [Folds in the input's layout]), so every output is
        // dense, the chunk whose first frame a temporal upsampler drops too (one batch item: the dropped
        // frame only moves the batch's stride), and the norm reads it as it is.
        CHECK(dense);
      }
    }
    for (const std::array<int64_t, 3> stride : {std::array<int64_t, 3>{2, 2, 2}, {1, 2, 2}, {2, 1, 1}}) {
      INFO("a downsampler of stride " << stride[0] << "x" << stride[1] << "x" << stride[2]);
      core::LTX2Downsampler down(c, /*multiplier=*/2, stride);
      randomise(down);
      core::CausalCache cache;
      for (const int64_t frames : {1, 2, 4}) {
        cache.rewind();
        const auto y = down.forward(input(c, frames), cache, false);
        check_operands(y, /*copied=*/false);  // empty too: a chunk that settles no frame yet
      }
    }
  }

  SECTION("CPU tensors are left to the composite path") {
    const auto x = torch::randn({1, 128, 2, 3, 4}).contiguous(kChannelsLast);
    auto out = torch::zeros_like(x);
    CHECK_FALSE(core::kernels::pixel_norm_silu_into(x, 1e-8, out));
    CHECK(out.abs().max().item<double>() == 0);
    // ... and the CPU path is the composite, exactly.
    CHECK(torch::equal(core::ltx2_pixel_norm_silu(x), composite_pixel_norm_silu(x)));
  }
}

TEST_CASE("on CUDA the fused LTX-2 pixel norm + SiLU matches the composite", "[ltx2][norm][gpu]") {
  // Note [Two RMS norms] in core/kernels/norm_silu_kernel.cu. The vectorised kernel for the released widths
  // (128, 256, 512 and, in bf16, 1024), the warp-per-voxel kernel for 40 channels and float32's 1024, the
  // planar kernel for contiguous tensors. One voxel of zeros (eps keeps it 0, not NaN) and one of 1e-5 in
  // every channel, where eps inside the mean matters: 0.0995 before the SiLU, where Wan's form gives 1.
  if (!cuda_here()) return;
  torch::manual_seed(0);
  for (const int64_t c : {128, 256, 512, 1024, 40}) {
    for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
      for (const auto format : {kChannelsLast, torch::MemoryFormat::Contiguous}) {
        INFO(c << " channels, " << c10::toString(dtype) << ", "
               << (format == kChannelsLast ? "channels-last" : "contiguous"));
        auto host = torch::randn({2, c, 3, 5, 7}) + 0.3;
        host.select(4, 0).select(3, 0).select(2, 0).select(0, 0).zero_();
        host.select(4, 1).select(3, 0).select(2, 0).select(0, 1).fill_(1e-5);
        const auto x = host.to(torch::kCUDA, dtype).contiguous(format);
        auto out = torch::empty_like(x);
        REQUIRE(core::kernels::pixel_norm_silu_into(x, 1e-8, out));
        CHECK(out.is_contiguous(format));
        const auto got = out.cpu().to(torch::kDouble);
        const auto composite = composite_pixel_norm_silu(x).cpu().to(torch::kDouble);
        const auto exact = core::ltx2_pixel_norm_silu(x.cpu().to(torch::kDouble));
        CHECK(torch::isfinite(got).all().item<bool>());
        CHECK(got.select(4, 0).select(3, 0).select(2, 0).select(0, 0).abs().max().item<double>() == 0);
        // The tiny voxel from the value the kernel read.
        const double v = x.cpu().to(torch::kDouble)[1][0][0][0][1].item<double>();
        const double e = v / std::sqrt(v * v + 1e-8);
        const double tiny = e / (1 + std::exp(-e));
        const auto tiny_got = got.select(4, 1).select(3, 0).select(2, 0).select(0, 1);
        if (dtype == torch::kFloat) {
          CHECK(relative_error(got, composite) <= 1e-6);
          CHECK(relative_error(got, exact) <= 1e-6);
          CHECK((tiny_got - tiny).abs().max().item<double>() <= 1e-6 * tiny);
        } else {
          // Both rounded once to bf16 from float32 values a few float32 ulps apart: at most one bf16 ulp
          // (2^-7 of the value at worst) apart, two allowed.
          const auto bound = 2 * std::ldexp(1.0, -7) * torch::maximum(got.abs(), composite.abs());
          CHECK(((got - composite).abs() <= bound).all().item<bool>());
          CHECK((got - composite).abs().max().item<double>() <= 1e-2 * composite.abs().max().item<double>());
          CHECK(relative_error(got, exact) <= 1e-2);
          CHECK((tiny_got - tiny).abs().max().item<double>() <= 1e-2 * tiny);
        }

        // Through the model's entry: out laid out like x, and a view dense in neither layout (a temporal
        // upsampler's output after its first frame) copied once, then the kernel.
        core::KernelLog::reset();
        core::KernelLog::enable(true);
        const auto y = core::ltx2_pixel_norm_silu(x);
        const auto dropped = x.narrow(2, 1, 2);
        REQUIRE_FALSE((dropped.is_contiguous() || dropped.is_contiguous(kChannelsLast)));
        const auto y_dropped = core::ltx2_pixel_norm_silu(dropped);
        core::KernelLog::enable(false);
        const auto [own, composite_calls] = pixel_norm_calls();
        CHECK(own == 2);
        CHECK(composite_calls == 0);
        CHECK(y.is_contiguous(format));
        CHECK(torch::equal(y, out));
        CHECK(torch::equal(y_dropped, y.narrow(2, 1, 2)));
      }
    }
  }
  // Where no kernel applies nothing is written: 2048 channels channels-last (the planar kernel takes them
  // contiguous), float64, a negative eps.
  const auto wide = torch::randn({1, 2048, 2, 2, 3}, torch::kCUDA).contiguous(kChannelsLast);
  auto untouched = torch::zeros_like(wide);
  CHECK_FALSE(core::kernels::pixel_norm_silu_into(wide, 1e-8, untouched));
  CHECK(relative_error(core::ltx2_pixel_norm_silu(wide), composite_pixel_norm_silu(wide)) <= 1e-6);
  const auto plain = wide.contiguous();
  auto plain_out = torch::zeros_like(plain);
  CHECK_FALSE(core::kernels::pixel_norm_silu_into(plain, -1, plain_out));
  CHECK(plain_out.abs().max().item<double>() == 0);
  CHECK(core::kernels::pixel_norm_silu_into(plain, 1e-8, plain_out));
  CHECK(relative_error(plain_out, composite_pixel_norm_silu(plain)) <= 1e-6);
  const auto f64 = torch::randn({1, 128, 2, 2, 3}, torch::TensorOptions(torch::kCUDA).dtype(torch::kDouble));
  auto untouched64 = torch::zeros_like(f64);
  CHECK_FALSE(core::kernels::pixel_norm_silu_into(f64, 1e-8, untouched64));
  CHECK(untouched.abs().max().item<double>() == 0);
  CHECK(untouched64.abs().max().item<double>() == 0);
}

TEST_CASE("on CUDA the tiny LTX-2 models encode and decode as on the CPU, every pixel norm in the own kernel",
          "[ltx2][norm][gpu]") {
  if (!cuda_here()) return;
  const auto cases = read_tensors(data_dir() / "ltx2-tiny" / "cases.safetensors");
  for (const std::string tag : {"20", "23"}) {
    INFO(tag);
    const auto checkpoint = core::load_checkpoint(tiny_ltx2_weights(tag));
    auto cpu = core::build_model(checkpoint, {"", torch::kCPU, torch::kFloat});
    auto gpu = core::build_model(checkpoint, {"", torch::kCUDA, torch::kFloat});
    REQUIRE(gpu->channels_last());
    const auto latent = cases.at(tag + ".latent").to(torch::kFloat);
    const auto video = cases.at("video").to(torch::kFloat);
    core::KernelLog::reset();
    core::KernelLog::enable(true);
    const auto decoded = core::decode_latents(*gpu, latent).cpu();
    const auto chunked = core::decode_latents(*gpu, latent, {1}).cpu();
    const auto encoded = core::encode_video(*gpu, video).cpu();
    core::KernelLog::enable(false);
    const auto [own, composite] = pixel_norm_calls();
    CHECK(own > 0);
    CHECK(composite == 0);
    CHECK(relative_error(decoded, core::decode_latents(*cpu, latent)) <= 1e-5);
    CHECK(relative_error(chunked, decoded) <= 1e-5);
    CHECK(relative_error(encoded, core::encode_video(*cpu, video)) <= 1e-5);
    CHECK(relative_error(decoded, cases.at(tag + ".latent_decoded")) <= 1e-4);
    CHECK(relative_error(encoded, cases.at(tag + ".video_mu")) <= 1e-4);

    // bf16: the kernel throughout, a decode near float64's.
    auto half = core::build_model(checkpoint, {"", torch::kCUDA, torch::kBFloat16});
    core::KernelLog::reset();
    core::KernelLog::enable(true);
    const auto decoded16 = core::decode_latents(*half, latent).cpu().to(torch::kDouble);
    core::KernelLog::enable(false);
    CHECK(pixel_norm_calls().second == 0);
    CHECK(torch::isfinite(decoded16).all().item<bool>());
    CHECK(relative_error(decoded16, cases.at(tag + ".latent_decoded")) <= 1e-1);
  }
}

}  // namespace vaecodec::test
