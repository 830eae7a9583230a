// --dtype fp8 (Note [FP8 convolutions] in core/kernels/conv3d.cpp): the quantisation of weights and norm
// outputs, which devices and families take it, and on an H100/H200 the e4m3 tiles against float64 of their
// e4m3 inputs, the norm's e4m3 output against a float64 norm rounded by LibTorch, and a released model's
// error against float32.
#include <ATen/cuda/CUDAContext.h>
#include <torch/cuda.h>
#include <catch2/catch.hpp>

#include "core/engine_report.h"
#include "core/kernels/conv3d.h"
#include "core/kernels/norm_silu.h"
#include "core/layers.h"
#include "tests/gpu_support.h"
#include "tests/test_support.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

using core::kernels::ConvTile;

const auto kChannelsLast = torch::MemoryFormat::ChannelsLast3d;
const auto kE4m3 = c10::ScalarType::Float8_e4m3fn;

// The fp8 convolutions in force on this thread until the test ends (Note [Run choices]).
struct Fp8Scope {
  Fp8Scope() : scope(fp8()) {}
  static core::RunChoices fp8() {
    core::RunChoices c;
    c.fp8 = true;
    return c;
  }
  core::ChoicesScope scope;
};

// Random values already on e4m3's grid, as float32 (so float64 of them is what the kernel multiplies).
torch::Tensor e4m3_values(at::IntArrayRef sizes, double scale) {
  return (torch::randn(sizes) * scale).clamp(-448, 448).to(kE4m3).to(torch::kFloat);
}

}  // namespace

TEST_CASE("fp8 tiles go to the norm-fed convolutions' channels, on compute capability 9.0 only", "[fp8]") {
  using core::kernels::fp8_tile_for;
  CHECK(fp8_tile_for(9, 0, 192, 96) == ConvTile::kFp8_256x96x64);
  CHECK(fp8_tile_for(9, 0, 192, 192) == ConvTile::kFp8_128x192x64);
  CHECK(fp8_tile_for(9, 0, 384, 384) == ConvTile::kFp8_128x192x128);
  CHECK(fp8_tile_for(9, 0, 128, 384) == ConvTile::kFp8_128x192x128);
  CHECK(fp8_tile_for(9, 0, 64, 192) == ConvTile::kFp8_128x192x64);
  CHECK(fp8_tile_for(9, 0, 64, 96) == ConvTile::kFp8_256x96x64);
  CHECK(fp8_tile_for(9, 0, 96, 96) == ConvTile::kFp8_256x96x32);   // Wan2.1's full resolution
  CHECK(fp8_tile_for(9, 0, 96, 192) == ConvTile::kFp8_256x96x32);  // the encoder's widening block
  CHECK(fp8_tile_for(9, 0, 32, 96) == ConvTile::kFp8_256x96x32);
  CHECK(fp8_tile_for(9, 0, 256, 512) == ConvTile::kFp8_128x128x64);
  CHECK(!fp8_tile_for(9, 0, 160, 160));  // Wan2.2's encoder widths: bf16
  CHECK(!fp8_tile_for(9, 0, 8, 8));      // the tiny test models: bf16
  CHECK(!fp8_tile_for(8, 9, 96, 96));    // Ada has e4m3 tensor cores but no kernel here
  CHECK(!fp8_tile_for(10, 0, 96, 96));
  for (int t = 0; t < static_cast<int>(ConvTile::kCount); ++t) {
    const auto tile = static_cast<ConvTile>(t);
    const std::string name = core::kernels::conv_tile_name(tile);
    CHECK(core::kernels::conv_tile_fp8(tile) == (name.find(" fp8") != std::string::npos));
  }
}

TEST_CASE("fp8 weights: each output channel's largest weight is 448, the rest within e4m3's rounding",
          "[fp8]") {
  torch::manual_seed(3);
  auto w = torch::randn({8, 32, 3, 3, 3}) * torch::logspace(-3, 1, 8).reshape({8, 1, 1, 1, 1});
  w = w.to(torch::kBFloat16).contiguous(kChannelsLast);
  core::kernels::Fp8Weights q;
  const auto& quantised = q.weight(w);
  REQUIRE(quantised.scalar_type() == kE4m3);
  CHECK(quantised.is_contiguous(kChannelsLast));
  const auto qf = quantised.to(torch::kDouble);
  CHECK(torch::allclose(qf.abs().amax({1, 2, 3, 4}), torch::full({8}, 448.0, torch::kDouble)));
  // alpha = weight scale / input scale; dequantised, each weight within half an e4m3 step (2^-4 of its
  // magnitude) or, below e4m3's normal range, half of its smallest step (2^-10 of the channel's scale).
  const auto input_scale = torch::full({1}, 4.0);
  const auto alpha = q.alpha(w, input_scale).to(torch::kDouble);
  const auto scale = (alpha * 4.0).reshape({8, 1, 1, 1, 1});
  const auto wd = w.to(torch::kDouble);
  const auto err = (qf * scale - wd).abs();
  const auto bound = torch::maximum(wd.abs() * std::pow(2.0, -4), scale * std::pow(2.0, -10));
  CHECK((err <= bound * (1 + 1e-6)).all().item<bool>());
  // Kept while the weights and the input scale stay; a new input scale makes a new alpha.
  CHECK(q.weight(w).data_ptr() == quantised.data_ptr());
  const auto& alpha2 = q.alpha(w, torch::full({1}, 8.0));
  CHECK(torch::allclose(alpha2.to(torch::kDouble) * 2, alpha));
}

TEST_CASE("the fp8 input scale is the power of two that maps the norm's bound into e4m3's range", "[fp8]") {
  for (const double g : {1.0, 0.3, 7.5, 1e-4}) {
    for (const int64_t c : {96, 384}) {
      INFO(c << " channels, largest gamma " << g);
      core::RMSNorm norm(c);
      {
        torch::NoGradGuard no_grad;
        auto gamma = norm.named_parameters()["gamma"];
        gamma.fill_(0.5 * g);
        gamma[c / 2].fill_(-g);  // the largest magnitude, negative
      }
      const double scale = norm.fp8_scale().item<double>();
      const double bound = std::max(std::sqrt(double(c)) * g, 0.28);
      CHECK(std::exp2(std::round(std::log2(scale))) == scale);
      CHECK(bound * scale <= 448);
      CHECK(bound * scale * 2 > 448);
    }
  }
}

TEST_CASE("fp8 (--dtype fp8) is refused, with one line, where it cannot run", "[fp8]") {
  // The CPU has no fp8 path; --conv cudnn turns off the kernels it needs.
  check_one_line(run_cli("bench --random --dtype fp8 --size 64x64 --frames 1 --device cpu"), 2,
                 "dtype fp8: it runs on a GPU's fp8 tensor cores, and cpu is not a GPU");
  check_one_line(run_cli("bench --random --dtype fp8 --conv cudnn --size 64x64 --frames 1 --device cpu"), 2,
                 "dtype fp8 runs on vaecodec's own convolution kernels, which --conv cudnn turns off");
  check_one_line(run_cli("bench --random --dtype fp4 --size 64x64 --frames 1 --device cpu"), 2, "--dtype");
  const TempDir dir;
  const auto clip = make_clip(dir / "in.mp4", kTestsrc + "64x48:rate=24 -frames:v 5 -c:v libx264");
  const auto latents = dir / "in.safetensors";
  REQUIRE(run_cli("encode " + quote(clip) + " -o " + quote(latents) + " --device cpu --dtype fp32 --quiet" +
                  weights_arg())
              .status == 0);
  const auto out = dir / "out.mp4";
  check_one_line(
      run_cli("decode " + quote(latents) + " -o " + quote(out) + " --device cpu --dtype fp8" + weights_arg()),
      2, "dtype fp8: ");
  CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("on a GPU fp8 is refused exactly where the own kernels cannot run, in one line", "[fp8][gpu]") {
  if (!cuda_here()) return;
  CHECK(core::kernels::fp8_refusal(torch::Device(torch::kCUDA, 0)).empty() == hopper_kernels_here());
  if (!hopper_kernels_here())
    check_one_line(run_cli("bench --random --dtype fp8 --size 64x64 --frames 1"), 2, "dtype fp8: ");
}

TEST_CASE("on Hopper every fp8 tile matches float64 of its e4m3 inputs", "[fp8][gpu][hopper]") {
  if (!hopper_here()) return;
  torch::manual_seed(0);
  struct Case {
    int64_t c, k, t, r, s;
  };
  int ran_total = 0;
  for (const Case& k : {Case{192, 96, 3, 3, 3}, Case{192, 192, 3, 3, 3}, Case{384, 384, 1, 3, 3},
                        Case{384, 192, 3, 3, 3}, Case{128, 256, 3, 3, 3}, Case{128, 384, 3, 3, 3},
                        Case{64, 96, 3, 3, 3}, Case{96, 96, 3, 3, 3}, Case{96, 192, 1, 3, 3}}) {
    for (const bool with_residual : {false, true}) {
      INFO(k.c << " -> " << k.k << ", filter " << k.t << "x" << k.r << "x" << k.s
               << (with_residual ? ", residual" : ""));
      const int64_t past = k.t - 1, frames = 3, rows = 11, cols = 21;
      // A causal buffer with a history head and a halo row on each side; the view is what the layer hands.
      const auto buffer_values = e4m3_values({1, k.c, past + frames, rows + 2, cols}, 40);
      const auto buffer = buffer_values.to(torch::kCUDA).to(kE4m3).contiguous(kChannelsLast);
      const auto x = buffer.narrow(3, 1, rows);
      const auto w_values = e4m3_values({k.k, k.c, k.t, k.r, k.s}, 60);
      const auto w = w_values.to(torch::kCUDA).to(kE4m3).contiguous(kChannelsLast);
      const auto alpha =
          (torch::rand({k.k}) + 0.5) / (40.0 * 60.0 * std::sqrt(double(k.c * k.t * k.r * k.s)));
      const auto bias = torch::randn({k.k});
      const std::array<int64_t, 3> padding{0, k.r / 2, k.s / 2};
      auto expected =
          at::conv3d(buffer_values.narrow(3, 1, rows).to(torch::kDouble), w_values.to(torch::kDouble), {},
                     {1, 1, 1}, {padding[0], padding[1], padding[2]}) *
              alpha.to(torch::kDouble).reshape({k.k, 1, 1, 1}) +
          bias.to(torch::kDouble).reshape({k.k, 1, 1, 1});
      torch::Tensor residual;
      if (with_residual) {
        residual =
            torch::randn(expected.sizes()).to(torch::kCUDA, torch::kBFloat16).contiguous(kChannelsLast);
        expected = expected + residual.cpu().to(torch::kDouble);
      }
      // Every fp8 tile that takes the shape; the one fp8_tile_for picks must.
      const auto chosen = core::kernels::fp8_tile_for(9, 0, k.c, k.k);
      REQUIRE(chosen);
      for (int t = 0; t < static_cast<int>(ConvTile::kCount); ++t) {
        const auto tile = static_cast<ConvTile>(t);
        if (!core::kernels::conv_tile_fp8(tile)) continue;
        INFO("tile " << core::kernels::conv_tile_name(tile));
        {
          auto poison = torch::full(expected.sizes(), std::nan(""),
                                    torch::TensorOptions(torch::kCUDA).dtype(torch::kBFloat16));
          poison = poison.contiguous(kChannelsLast);
        }
        const auto got = core::kernels::conv3d_on_tile(x, w, bias.cuda(), {1, 1, 1}, padding, tile, residual,
                                                       alpha.cuda().contiguous());
        if (tile == *chosen) REQUIRE(got.defined());
        if (!got.defined()) continue;
        ++ran_total;
        CHECK(got.scalar_type() == torch::kBFloat16);
        CHECK(got.is_contiguous(kChannelsLast));
        REQUIRE(got.sizes() == expected.sizes());
        CHECK(torch::isfinite(got).all().item<bool>());
        // The products of e4m3 values are exact; what remains is the tensor cores' sum and one bf16 rounding.
        const double err = relative_error(got, expected);
        INFO("relative error " << err);
        CHECK(err <= 4e-3);
      }
      // Without alpha an fp8 tile refuses; a bf16 tile refuses e4m3 inputs.
      CHECK_FALSE(core::kernels::conv3d_on_tile(x, w, bias.cuda(), {1, 1, 1}, padding, *chosen).defined());
      CHECK_FALSE(core::kernels::conv3d_on_tile(x, w, bias.cuda(), {1, 1, 1}, padding, ConvTile::k256x96x32)
                      .defined());
    }
  }
  CHECK(ran_total >= 24);
}

TEST_CASE("on CUDA the norm writes e4m3 as LibTorch rounds the float64 norm, tail included", "[fp8][gpu]") {
  if (!cuda_here()) return;
  torch::manual_seed(2);
  for (const int64_t c : {96, 192, 384}) {
    for (const bool with_bias : {false, true}) {
      INFO(c << " channels" << (with_bias ? ", bias" : ""));
      core::RMSNorm norm(c);
      {
        torch::NoGradGuard no_grad;
        // bf16 values, so that the bf16 norm and the float64 reference use the same gamma.
        norm.named_parameters()["gamma"].copy_((1 + 0.3 * torch::randn({c, 1, 1, 1})).to(torch::kBFloat16));
      }
      core::RMSNorm reference(c);
      {
        torch::NoGradGuard no_grad;
        reference.named_parameters()["gamma"].copy_(norm.named_parameters()["gamma"]);
      }
      reference.to(torch::kDouble);
      norm.to(torch::kCUDA, torch::kBFloat16);
      REQUIRE(norm.fp8_scale().device().is_cuda());
      const double scale = norm.fp8_scale().item<double>();
      const auto x =
          (torch::randn({1, c, 4, 9, 13}) + 0.5).to(torch::kCUDA, torch::kBFloat16).contiguous(kChannelsLast);
      const auto bias =
          with_bias ? (0.3 * torch::randn({c})).to(torch::kCUDA, torch::kBFloat16) : torch::Tensor();
      auto xd = x.cpu().to(torch::kDouble);
      if (with_bias) xd = xd + bias.cpu().to(torch::kDouble).reshape({c, 1, 1, 1});
      const auto exact = torch::silu(reference.forward(xd)) * scale;
      const auto rounded = exact.to(torch::kFloat).to(kE4m3).to(torch::kDouble);
      auto buffer = torch::zeros({1, c, 6, 9, 13}, x.options().dtype(kE4m3)).contiguous(kChannelsLast);
      auto tail = torch::full({1, c, 2, 9, 13}, 7.0, x.options()).to(kE4m3).contiguous(kChannelsLast);
      const bool tail_written = norm.forward_silu_fp8_into(x, buffer.narrow(2, 2, 4), bias, tail);
      CHECK(tail_written);
      const auto got = buffer.narrow(2, 2, 4).cpu().to(torch::kDouble);
      // Float32 arithmetic may land a value on the other side of a rounding midpoint: one e4m3 step apart
      // (2^-3 of the value) at most, and rarely.
      const auto differs = got != rounded;
      CHECK(((got - rounded).abs() <= rounded.abs() * 0.125 + 1e-9).all().item<bool>());
      CHECK(differs.to(torch::kDouble).mean().item<double>() < 0.01);
      CHECK(buffer.narrow(2, 0, 2).to(torch::kFloat).abs().max().item<float>() == 0);  // the head untouched
      CHECK(torch::equal(tail.to(torch::kFloat), buffer.narrow(2, 4, 2).to(torch::kFloat)));
      CHECK(got.abs().max().item<double>() <= 448);
    }
  }
}

TEST_CASE("on Hopper --dtype fp8 runs the e4m3 tiles and reports its error beside bf16's",
          "[fp8][gpu][hopper]") {
  if (!hopper_here()) return;
  for (const std::string op : {"decode", "encode"}) {
    INFO(op);
    const auto r =
        run_cli("bench --random --op " + op +
                " --size 128x96 --frames 9 --dtype fp8 --runs 1 --warmup 0 --accuracy --json --verbose");
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    const double fp8 = j.at("relative_l2_vs_fp32").get<double>();
    const double bf16 = j.at("bf16_relative_l2_vs_fp32").get<double>();
    INFO("relative L2 against float32: fp8 " << fp8 << ", bf16 " << bf16);
    CHECK(fp8 > bf16);  // e4m3 is coarser: a run that took no fp8 tile would match bf16
    CHECK(fp8 <= 0.1);  // a few per cent, not a broken kernel
    CHECK(fp8 <= 10 * bf16);
    CHECK_THAT(r.err, Catch::Contains("128x192x128 fp8"));
    CHECK_THAT(r.err, Catch::Contains("256x96x32 fp8"));
    CHECK_THAT(r.err, Catch::Contains("e4m3 out"));
    CHECK_THAT(r.err, Catch::Contains("with fp8 (e4m3) convolutions"));
  }
  // SeedVR2 has no fp8 path: refused before any work.
  check_one_line(run_cli("bench --random --model seedvr2-vae --dtype fp8 --size 64x64 --frames 1"), 2,
                 "SeedVR2");
}

}  // namespace vaecodec::test
