// Note [The CPU's norm in one pass] (core/kernels/cpu_norm.h): the one-pass SiLU(RMSNorm(x + bias)) and
// residual add of CPU runs, against float64 and LibTorch's composite.
#include <cmath>

#include <ATen/Parallel.h>
#include <catch2/catch.hpp>

#include "core/kernels/cpu_norm.h"
#include "core/layers.h"

namespace vaecodec::test {
namespace {

const auto kLast = torch::MemoryFormat::ChannelsLast3d;

// What the kernel computes, in float64.
torch::Tensor norm_silu_f64(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& bias) {
  const int64_t c = x.size(1);
  auto v = x.to(torch::kDouble);
  if (bias.defined()) v = v + bias.to(torch::kDouble).reshape({c, 1, 1, 1});
  const auto norm = v.square().sum(1, true).sqrt().clamp_min(1e-12);
  return torch::silu(v / norm *
                     (std::sqrt(static_cast<double>(c)) * gamma.to(torch::kDouble).reshape({c, 1, 1, 1})));
}

// LibTorch's thread count for a scope, the caller's back when it ends (also when a check throws).
struct Threads {
  const int before = at::get_num_threads();
  explicit Threads(int n) { at::set_num_threads(n); }
  ~Threads() { at::set_num_threads(before); }
};

double max_relative(const torch::Tensor& got, const torch::Tensor& want) {
  return ((got.to(torch::kDouble) - want).abs().max() / want.abs().max()).item<double>();
}

}  // namespace

TEST_CASE("on the CPU SiLU(RMSNorm(x + bias)) in one pass matches float64", "[model][layers][cpu-norm]") {
  torch::manual_seed(0);
  for (const int64_t c : {16, 24, 96, 256}) {
    for (const bool with_bias : {false, true}) {
      INFO(c << " channels" << (with_bias ? ", bias" : ""));
      // gamma up to 40: normalised values reach about +-200 for few channels, past the exponential's clamps.
      const auto gamma = torch::randn({c}) * 10;
      const auto bias = with_bias ? 0.3 * torch::randn({c}) : torch::Tensor();
      const auto x = (torch::randn({2, c, 3, 7, 11}) + 0.5).contiguous(kLast);
      const auto scale = static_cast<float>(std::sqrt(static_cast<double>(c)));
      // Into frames 2-4 of a causal buffer, and into a band of rows and columns of one: views.
      auto buffer = torch::full({2, c, 5, 7, 11}, 7.0).contiguous(kLast);
      REQUIRE(core::kernels::rms_norm_silu_cpu(x, gamma, scale, buffer.narrow(2, 2, 3), bias));
      const auto want = norm_silu_f64(x, gamma, bias);
      CHECK(max_relative(buffer.narrow(2, 2, 3), want) <= 2e-6);
      CHECK(torch::equal(buffer.narrow(2, 0, 2), torch::full({2, c, 2, 7, 11}, 7.0)));
      auto wide = torch::zeros({2, c, 3, 9, 15}).contiguous(kLast);
      const auto from_view = x.narrow(4, 1, 9);
      REQUIRE(core::kernels::rms_norm_silu_cpu(from_view, gamma, scale, wide.narrow(3, 1, 7).narrow(4, 2, 9),
                                               bias));
      CHECK(torch::equal(wide.narrow(3, 1, 7).narrow(4, 2, 9), buffer.narrow(2, 2, 3).narrow(4, 1, 9)));
      CHECK(wide.narrow(3, 0, 1).abs().max().item<double>() == 0);  // rows outside the view are left alone
      CHECK(wide.narrow(4, 0, 2).abs().max().item<double>() == 0);

      // One thread or two (at::parallel_for over rows of pixels): the same bits.
      auto two = torch::zeros_like(x), serial = torch::zeros_like(x);
      {
        const Threads on(2);
        REQUIRE(core::kernels::rms_norm_silu_cpu(x, gamma, scale, two, bias));
      }
      {
        const Threads on(1);
        REQUIRE(core::kernels::rms_norm_silu_cpu(x, gamma, scale, serial, bias));
      }
      CHECK(torch::equal(serial, two));
      CHECK(torch::equal(serial, buffer.narrow(2, 2, 3)));

      // Through the layer: RMSNorm::forward_silu_into takes the kernel for float32 channels-last.
      core::RMSNorm norm(c);
      {
        torch::NoGradGuard no_grad;
        norm.named_parameters()["gamma"].copy_(gamma.reshape({c, 1, 1, 1}));
      }
      auto through = torch::zeros_like(x);
      norm.forward_silu_into(x, through, bias);
      CHECK(torch::equal(through, buffer.narrow(2, 2, 3)));
    }
  }
}

TEST_CASE("on the CPU the one-pass SiLU's exponential holds over float32's range",
          "[model][layers][cpu-norm]") {
  // Pixel p is (cos t, sin t, 0, ...) for t from 0 to pi: normalised it stays so, and channel 0 comes out as
  // SiLU(120 cos t), every z from 120 to -120, past both of the exponential's clamps.
  const int64_t c = 8, pixels = 24001;
  const auto t = torch::linspace(0, M_PI, pixels, torch::kDouble);
  auto x = torch::zeros({1, c, 1, 1, pixels}, torch::kDouble);
  x.select(1, 0).copy_(t.cos().reshape({1, 1, 1, pixels}));
  x.select(1, 1).copy_(t.sin().reshape({1, 1, 1, pixels}));
  const auto xf = x.to(torch::kFloat).contiguous(kLast);
  auto gamma = torch::zeros({c});
  gamma[0] = 120.0;
  gamma[1] = 1.0;
  auto out = torch::empty_like(xf);
  REQUIRE(core::kernels::rms_norm_silu_cpu(xf, gamma, 1.0f, out, {}));
  const auto v = xf.to(torch::kDouble);
  const auto z = 120.0 * v.select(1, 0) / v.square().sum(1).sqrt();
  const auto want = torch::silu(z);
  const auto err = (out.select(1, 0).to(torch::kDouble) - want).abs() / want.abs().clamp_min(1.0);
  CHECK(err.max().item<double>() <= 1e-6);
  CHECK(z.max().item<double>() > 119);
  CHECK(z.min().item<double>() < -119);
}

TEST_CASE("on the CPU the one-pass kernels decline what they do not take", "[model][layers][cpu-norm]") {
  const auto gamma = torch::ones({12});
  auto x = torch::randn({1, 12, 2, 4, 4}).contiguous(kLast);  // 12 channels: not a multiple of 8
  auto out = torch::full_like(x, 3.0);
  CHECK_FALSE(core::kernels::rms_norm_silu_cpu(x, gamma, 1.0f, out, {}));
  CHECK(out.eq(3.0).all().item<bool>());
  const auto g16 = torch::ones({16});
  auto plain = torch::randn({1, 16, 2, 4, 4});  // channels a plane apart
  CHECK_FALSE(core::kernels::rms_norm_silu_cpu(plain, g16, 1.0f, torch::empty_like(plain), {}));
  auto f64 = torch::randn({1, 16, 2, 4, 4}, torch::kDouble).contiguous(kLast);
  CHECK_FALSE(core::kernels::rms_norm_silu_cpu(f64, g16, 1.0f, torch::empty_like(f64), {}));
  auto f32 = torch::randn({1, 16, 2, 4, 4}).contiguous(kLast);
  CHECK_FALSE(core::kernels::rms_norm_silu_cpu(f32, torch::ones({8}), 1.0f, torch::empty_like(f32), {}));
  CHECK_FALSE(core::kernels::add_residual_cpu(f32, plain, {}));
}

TEST_CASE("the engine's own CPU loops run on LibTorch's threads", "[layers][cpu-norm]") {
  // Note [The CPU's norm in one pass]: at::parallel_for is OpenMP inlined from LibTorch's headers, so a loop
  // of the engine's runs on one thread unless the engine was compiled with -fopenmp (core/CMakeLists.txt).
  const Threads on(2);
  CHECK(core::kernels::cpu_loop_threads() == 2);
}

TEST_CASE("on the CPU the one-pass residual add equals the composite's two", "[model][layers][cpu-norm]") {
  torch::manual_seed(1);
  for (const int64_t c : {32, 12})  // any number of channels: no vectors of 8 here
    for (const bool with_bias : {false, true}) {
      const auto y0 = torch::randn({2, c, 3, 5, 9}).contiguous(kLast);
      const auto s = torch::randn({2, c, 3, 5, 9}).contiguous(kLast);
      const auto bias = with_bias ? torch::randn({c}) : torch::Tensor();
      auto want = y0.clone();
      want.add_(s);
      if (with_bias) want.add_(bias.reshape({c, 1, 1, 1}));
      auto y = y0.clone();
      REQUIRE(core::kernels::add_residual_cpu(y, s, bias));
      CHECK(torch::equal(y, want));
      // A view of rows.
      auto yv = y0.clone();
      REQUIRE(core::kernels::add_residual_cpu(yv.narrow(3, 1, 3), s.narrow(3, 1, 3), bias));
      CHECK(torch::equal(yv.narrow(3, 1, 3), want.narrow(3, 1, 3)));
      CHECK(torch::equal(yv.narrow(3, 0, 1), y0.narrow(3, 0, 1)));
    }
}

}  // namespace vaecodec::test
