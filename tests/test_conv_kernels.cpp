// The own Hopper convolution kernels (Note [Own convolutions] in core/kernels/conv3d.h): which shapes take
// them, which layouts they read, and on an H100/H200 every tile against float64 and through the CLI.
#include <ATen/cuda/CUDAContext.h>
#include <torch/cuda.h>
#include <catch2/catch.hpp>

#include "core/engine_report.h"
#include "core/kernels/conv3d.h"
#include "tests/gpu_support.h"
#include "tests/test_support.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

using core::kernels::ConvBackend;
using core::kernels::ConvTile;
using core::kernels::own_tile_for;

const auto kChannelsLast = torch::MemoryFormat::ChannelsLast3d;

// The backend in force on this thread until the test ends (Note [Run choices]).
struct BackendScope {
  explicit BackendScope(ConvBackend b) : scope(choices(b)) {}
  static core::RunChoices choices(ConvBackend b) {
    core::RunChoices c;
    c.conv = b;
    return c;
  }
  core::ChoicesScope scope;
};

}  // namespace

TEST_CASE("the own convolution tiles go to the shapes they divide, on compute capability 9.0 only",
          "[conv]") {
  const std::array<int64_t, 3> k333{3, 3, 3}, k133{1, 3, 3}, k111{1, 1, 1}, k122{1, 2, 2};
  // auto: every shape a tile takes but the 128-wide tile's 3x3 convolutions at stride 1.
  CHECK(own_tile_for(ConvBackend::kAuto, 9, 0, 96, 96, k333) == ConvTile::k256x96x32);
  CHECK(own_tile_for(ConvBackend::kAuto, 9, 0, 192, 192, k133) == ConvTile::k128x192x64);
  CHECK(own_tile_for(ConvBackend::kAuto, 9, 0, 384, 384, k333) == ConvTile::k128x192x64);
  CHECK(own_tile_for(ConvBackend::kAuto, 9, 0, 192, 384, k122) == ConvTile::k128x192x64);
  CHECK(own_tile_for(ConvBackend::kAuto, 9, 0, 96, 96, k133, 2) == ConvTile::k256x96x32);
  CHECK(own_tile_for(ConvBackend::kAuto, 9, 0, 192, 96, k333) == ConvTile::k256x96x64);
  CHECK(own_tile_for(ConvBackend::kAuto, 9, 0, 384, 768, k122) == ConvTile::k128x192x64);
  CHECK(own_tile_for(ConvBackend::kAuto, 9, 0, 96, 96, k111) == ConvTile::k256x96x32);
  CHECK(own_tile_for(ConvBackend::kAuto, 9, 0, 3, 96, k333) == ConvTile::k256x96x32);  // padded to 32
  CHECK(own_tile_for(ConvBackend::kAuto, 9, 0, 96, 3, k333) == ConvTile::k128x32x32);  // the RGB head
  CHECK(own_tile_for(ConvBackend::kAuto, 9, 0, 16, 16, k111) == ConvTile::k128x32x32);
  CHECK(own_tile_for(ConvBackend::kAuto, 9, 0, 128, 128, k111) == ConvTile::k128x128x64);
  CHECK(own_tile_for(ConvBackend::kAuto, 9, 0, 128, 128, k333, 2) == ConvTile::k128x128x64);
  CHECK(!own_tile_for(ConvBackend::kAuto, 9, 0, 128, 128, k333));  // cuDNN: 628-784 against 579-630
  CHECK(!own_tile_for(ConvBackend::kAuto, 9, 0, 512, 512, k133));
  // own: wherever a tile divides the (padded) channels.
  CHECK(own_tile_for(ConvBackend::kOwn, 9, 0, 192, 96, k333) == ConvTile::k256x96x64);
  CHECK(own_tile_for(ConvBackend::kOwn, 9, 0, 32, 96, k333) == ConvTile::k256x96x32);
  CHECK(own_tile_for(ConvBackend::kOwn, 9, 0, 256, 512, k333) == ConvTile::k128x128x64);
  CHECK(own_tile_for(ConvBackend::kOwn, 9, 0, 384, 768, k122) == ConvTile::k128x192x64);
  CHECK(own_tile_for(ConvBackend::kOwn, 9, 0, 48, 96, k333) == ConvTile::k256x96x64);  // 48 -> 64
  CHECK(own_tile_for(ConvBackend::kOwn, 9, 0, 384, 32, k333) == ConvTile::k128x32x32);
  CHECK(own_tile_for(ConvBackend::kOwn, 9, 0, 256, 12, k333) == ConvTile::k128x32x32);
  CHECK(own_tile_for(ConvBackend::kOwn, 9, 0, 64, 64, k333) == ConvTile::k128x32x32);
  CHECK(!own_tile_for(ConvBackend::kOwn, 9, 0, 160, 160, k333));  // Wan2.2's widths: no tile's N fits
  CHECK(!own_tile_for(ConvBackend::kOwn, 9, 0, 320, 320, k333));
  CHECK(!own_tile_for(ConvBackend::kOwn, 9, 0, 96, 100, k333));  // wide and no tile divides it: cuDNN
  CHECK(!own_tile_for(ConvBackend::kOwn, 9, 0, 72, 96, k333));
  // The padding: counts below 64 to a multiple of 32, every other count unchanged.
  CHECK(core::kernels::own_channels(3) == 32);
  CHECK(core::kernels::own_channels(16) == 32);
  CHECK(core::kernels::own_channels(48) == 64);
  CHECK(core::kernels::own_channels(96) == 96);
  CHECK(core::kernels::own_channels(72) == 72);
  CHECK(core::kernels::own_channels(12) == 32);
  // Elsewhere cuDNN, whatever is asked.
  for (const auto& [major, minor] : {std::pair{8, 0}, std::pair{8, 9}, std::pair{10, 0}, std::pair{12, 0}})
    CHECK(!own_tile_for(ConvBackend::kOwn, major, minor, 96, 96, k333));
  CHECK(!own_tile_for(ConvBackend::kCudnn, 9, 0, 96, 96, k333));
}

TEST_CASE("the --conv option takes auto, cudnn and own", "[conv]") {
  CHECK(core::parse_conv_backend("auto") == ConvBackend::kAuto);
  CHECK(core::parse_conv_backend("cudnn") == ConvBackend::kCudnn);
  CHECK(core::parse_conv_backend("own") == ConvBackend::kOwn);
  CHECK(!core::parse_conv_backend("fast"));
  check_one_line(run_cli("bench --random --conv fast --size 64x64 --frames 1 --device cpu"), 2,
                 "--conv: fast not in {auto,cudnn,own}");
  check_one_line(run_cli("decode missing.safetensors -o out.mp4 --conv cuDNN" + weights_arg()), 2, "--conv");
}

TEST_CASE("the own convolution reads channels-last bf16 views, cut by history and halo rows", "[conv]") {
  const auto weight = torch::randn({96, 96, 3, 3, 3}).to(torch::kBFloat16).contiguous(kChannelsLast);
  const auto x = torch::randn({1, 96, 4, 10, 16}).to(torch::kBFloat16).contiguous(kChannelsLast);
  CHECK(core::kernels::conv3d_takes_layout(x, weight));
  // A causal buffer's frames after the history, rows inside the halo: strides of the whole buffer.
  const auto buffer = torch::zeros({1, 96, 6, 12, 16}, x.options()).contiguous(kChannelsLast);
  CHECK(core::kernels::conv3d_takes_layout(buffer.narrow(2, 2, 4).narrow(3, 1, 10), weight));
  CHECK_FALSE(core::kernels::conv3d_takes_layout(x.contiguous(), weight));       // NCDHW
  CHECK_FALSE(core::kernels::conv3d_takes_layout(x.to(torch::kFloat), weight));  // float32
  CHECK_FALSE(core::kernels::conv3d_takes_layout(x, weight.contiguous()));       // weight NCDHW
  // A view starting one channel in: 2 bytes off the 16-byte alignment, 95 channels.
  const auto weight95 = torch::randn({96, 95, 3, 3, 3}).to(torch::kBFloat16).contiguous(kChannelsLast);
  CHECK_FALSE(core::kernels::conv3d_takes_layout(x.narrow(1, 1, 95), weight95));
  CHECK_FALSE(core::kernels::conv3d_takes_layout(x, weight95));  // the channels differ
  const auto odd_width = torch::zeros({1, 96, 4, 10, 15}, x.options()).contiguous(kChannelsLast);
  CHECK(core::kernels::conv3d_takes_layout(odd_width, weight));  // 96 channels keep every stride aligned
  const auto odd_channels = torch::randn({1, 20, 4, 10, 16}).to(torch::kBFloat16).contiguous(kChannelsLast);
  CHECK_FALSE(core::kernels::conv3d_takes_layout(
      odd_channels, torch::randn({96, 20, 3, 3, 3}).to(torch::kBFloat16).contiguous(kChannelsLast)));
}

TEST_CASE("the own convolution declines what its GPU or build cannot run, and cuDNN runs it", "[conv][gpu]") {
  // Another GPU, or a build without the kernels: no shape; on Hopper, a shape no tile takes (100 output
  // channels: no tile divides them). Either way the entry point returns nothing and cuDNN runs.
  if (!cuda_here()) return;
  const BackendScope own(ConvBackend::kOwn);
  const int64_t out_channels = hopper_kernels_here() ? 100 : 96;
  const auto x = torch::randn({1, 96, 3, 8, 8}).to(torch::kCUDA, torch::kBFloat16).contiguous(kChannelsLast);
  const auto w =
      torch::randn({out_channels, 96, 3, 3, 3}).to(torch::kCUDA, torch::kBFloat16).contiguous(kChannelsLast);
  CHECK_FALSE(core::kernels::conv3d_own(x, w, {}, {1, 1, 1}, {0, 1, 1}).defined());
}

TEST_CASE("on Hopper every own convolution tile matches float64", "[conv][gpu][hopper]") {
  if (!hopper_here()) return;
  torch::manual_seed(0);
  struct Case {
    int64_t c, k, t, r, s;
    std::array<int64_t, 3> stride, padding;
    ConvTile tile;
  };
  const Case cases[] = {
      {96, 96, 3, 3, 3, {1, 1, 1}, {0, 1, 1}, ConvTile::k256x96x32},   // the 96-channel residual convs
      {192, 96, 3, 3, 3, {1, 1, 1}, {0, 1, 1}, ConvTile::k256x96x64},  // a residual block's narrowing conv
      {96, 96, 1, 3, 3, {1, 2, 2}, {0, 0, 0}, ConvTile::k256x96x32},   // the encoder's downsampler
      {192, 192, 3, 3, 3, {1, 1, 1}, {0, 1, 1}, ConvTile::k128x192x64},
      {192, 384, 1, 2, 2, {1, 1, 1}, {0, 1, 1}, ConvTile::k128x192x64},  // an upsampler's phase conv
      {384, 384, 3, 3, 3, {1, 1, 1}, {0, 1, 1}, ConvTile::k128x192x64},
      {128, 128, 3, 3, 3, {1, 1, 1}, {0, 1, 1}, ConvTile::k128x128x64},  // SeedVR2's widths
      {256, 512, 3, 3, 3, {1, 1, 1}, {0, 1, 1}, ConvTile::k128x128x64},
      {96, 96, 1, 1, 1, {1, 1, 1}, {0, 0, 0}, ConvTile::k256x96x32},
  };
  for (const Case& k : cases) {
    // Odd sizes; the input is a view into a causal buffer with a history head and a halo row on each side.
    for (const auto& [frames, rows, cols] : {std::tuple{2, 9, 13}, std::tuple{3, 17, 31}}) {
      for (const int variant : {0, 1, 2}) {  // plain, with a bias, with a bias and a residual
        const bool with_bias = variant >= 1, with_residual = variant == 2;
        INFO(k.c << " -> " << k.k << " channels, filter " << k.t << "x" << k.r << "x" << k.s << ", " << frames
                 << "x" << rows << "x" << cols << (with_bias ? ", bias" : "")
                 << (with_residual ? ", residual" : ""));
        const int64_t past = k.t - 1;
        auto buffer = torch::randn({2, k.c, past + frames, rows + 2, cols})
                          .to(torch::kCUDA, torch::kBFloat16)
                          .contiguous(kChannelsLast);
        const auto x = buffer.narrow(3, 1, rows);
        const auto w = (torch::randn({k.k, k.c, k.t, k.r, k.s}) / std::sqrt(double(k.c * k.t * k.r * k.s)))
                           .to(torch::kCUDA, torch::kBFloat16)
                           .contiguous(kChannelsLast);
        const auto bias = with_bias ? torch::randn({k.k}, torch::kCUDA) : torch::Tensor();
        auto expected =
            at::conv3d(x.cpu().to(torch::kDouble), w.cpu().to(torch::kDouble),
                       with_bias ? bias.cpu().to(torch::kDouble) : torch::Tensor(),
                       {k.stride[0], k.stride[1], k.stride[2]}, {k.padding[0], k.padding[1], k.padding[2]});
        torch::Tensor residual;
        if (with_residual) {
          residual =
              torch::randn(expected.sizes()).to(torch::kCUDA, torch::kBFloat16).contiguous(kChannelsLast);
          expected = expected + residual.cpu().to(torch::kDouble);
        }
        const auto cudnn_plain =
            at::conv3d(x, w, with_bias ? bias.to(torch::kBFloat16) : torch::Tensor(),
                       {k.stride[0], k.stride[1], k.stride[2]}, {k.padding[0], k.padding[1], k.padding[2]});
        const auto cudnn = with_residual ? cudnn_plain + residual : cudnn_plain;
        const double err_cudnn = relative_error(cudnn, expected);
        // Every tile that takes the shape; the case names one that must.
        int ran = 0;
        for (int t = 0; t < static_cast<int>(ConvTile::kCount); ++t) {
          const auto tile = static_cast<ConvTile>(t);
          INFO("tile " << core::kernels::conv_tile_name(tile));
          // Poison what the output's allocation will most likely reuse.
          {
            auto poison = torch::full(expected.sizes(), std::nan(""),
                                      torch::TensorOptions(torch::kCUDA).dtype(torch::kBFloat16));
            poison = poison.contiguous(kChannelsLast);
          }
          const auto got = core::kernels::conv3d_on_tile(x, w, bias, k.stride, k.padding, tile, residual);
          if (tile == k.tile) REQUIRE(got.defined());
          if (!got.defined()) continue;
          ++ran;
          CHECK(got.is_contiguous(kChannelsLast));
          REQUIRE(got.sizes() == expected.sizes());
          CHECK(torch::isfinite(got).all().item<bool>());
          // bf16 output: one rounding of about 2^-9 relative per element; cuDNN's output the same.
          const double err = relative_error(got, expected);
          INFO("own " << err << ", cuDNN " << err_cudnn);
          CHECK(err <= 4e-3);
          CHECK(err <= 1.5 * err_cudnn + 1e-4);
        }
        CHECK(ran >= 1);
      }
    }
    // A tile that does not divide the channels is refused, with nothing launched.
    if (k.k % 192 != 0) {
      const auto x =
          torch::zeros({1, k.c, k.t, 8, 8}, torch::TensorOptions(torch::kCUDA).dtype(torch::kBFloat16))
              .contiguous(kChannelsLast);
      const auto w = torch::zeros({k.k, k.c, k.t, k.r, k.s}, x.options()).contiguous(kChannelsLast);
      CHECK_FALSE(
          core::kernels::conv3d_on_tile(x, w, {}, k.stride, k.padding, ConvTile::k128x192x64).defined());
    }
  }
}

TEST_CASE("on Hopper the layers with few channels run padded and match float64", "[conv][gpu][hopper]") {
  // Note [Padded channels]: an RGB input, latents, an RGB head, a latent projection.
  if (!hopper_here()) return;
  const BackendScope auto_backend(ConvBackend::kAuto);
  torch::manual_seed(1);
  struct Case {
    int64_t c, k, t, r, s;
  };
  for (const Case& k :
       {Case{3, 96, 3, 3, 3}, Case{16, 384, 3, 3, 3}, Case{16, 16, 1, 1, 1}, Case{96, 3, 3, 3, 3},
        Case{48, 48, 1, 1, 1}, Case{12, 96, 3, 3, 3}, Case{256, 12, 3, 3, 3}, Case{384, 32, 3, 3, 3}}) {
    INFO(k.c << " -> " << k.k << " channels, filter " << k.t << "x" << k.r << "x" << k.s);
    const int64_t past = k.t - 1, rows = 11, cols = 19, frames = 3;
    const std::array<int64_t, 3> padding{0, k.r / 2, k.s / 2};
    auto buffer = torch::randn({1, k.c, past + frames, rows + 2, cols})
                      .to(torch::kCUDA, torch::kBFloat16)
                      .contiguous(kChannelsLast);
    const auto x = buffer.narrow(3, 1, rows);  // a view, as a causal buffer hands it over
    const auto w = (torch::randn({k.k, k.c, k.t, k.r, k.s}) / std::sqrt(double(k.c * k.t * k.r * k.s)))
                       .to(torch::kCUDA, torch::kBFloat16)
                       .contiguous(kChannelsLast);
    const auto bias = torch::randn({k.k}, torch::kCUDA);
    const auto expected =
        at::conv3d(x.cpu().to(torch::kDouble), w.cpu().to(torch::kDouble), bias.cpu().to(torch::kDouble),
                   {1, 1, 1}, {padding[0], padding[1], padding[2]});
    const auto cudnn =
        at::conv3d(x, w, bias.to(torch::kBFloat16), {1, 1, 1}, {padding[0], padding[1], padding[2]});
    core::kernels::PaddedWeights padded;
    // Without the padded weights a layer that needs them is left to cuDNN.
    const bool needs_padding =
        core::kernels::own_channels(k.c) != k.c || core::kernels::own_channels(k.k) != k.k;
    CHECK(core::kernels::conv3d_own(x, w, bias, {1, 1, 1}, padding).defined() == !needs_padding);
    for (int call = 0; call < 2; ++call) {  // the second call reuses the padded weights
      {
        auto poison = torch::full({1, core::kernels::own_channels(k.k), frames, rows, cols}, std::nan(""),
                                  torch::TensorOptions(torch::kCUDA).dtype(torch::kBFloat16));
        poison = poison.contiguous(kChannelsLast);
      }
      const auto got = core::kernels::conv3d_own(x, w, bias, {1, 1, 1}, padding, {}, &padded);
      REQUIRE(got.defined());
      REQUIRE(got.sizes() == expected.sizes());
      CHECK(got.is_contiguous(kChannelsLast));
      CHECK(torch::isfinite(got).all().item<bool>());
      const double err = relative_error(got, expected), err_cudnn = relative_error(cudnn, expected);
      INFO("own " << err << ", cuDNN " << err_cudnn);
      CHECK(err <= 4e-3);
      CHECK(err <= 1.5 * err_cudnn + 1e-4);
    }
    // A residual with padded outputs is cuDNN's (the kernel's residual has the padded width).
    if (core::kernels::own_channels(k.k) != k.k) {
      const auto residual = torch::zeros_like(cudnn);
      CHECK_FALSE(core::kernels::conv3d_own(x, w, bias, {1, 1, 1}, padding, residual, &padded).defined());
    }
  }
}

TEST_CASE("on Hopper the own convolutions keep a released model's bf16 error and are counted",
          "[conv][gpu][hopper]") {
  // bench --accuracy: the released Wan2.1 architecture (random weights) in bf16 against float32, once with
  // cuDNN and once with the own kernels wherever they fit; --verbose counts the kernels each call took.
  if (!hopper_here()) return;
  for (const std::string op : {"decode", "encode"}) {
    INFO(op);
    const std::string common = "bench --random --op " + op +
                               " --size 128x96 --frames 9 --dtype bf16 "
                               "--runs 1 --warmup 0 --accuracy --json --verbose --conv ";
    const auto cudnn = run_cli(common + "cudnn");
    const auto own = run_cli(common + "own");
    INFO("cudnn: " << cudnn.err << "\nown: " << own.err);
    REQUIRE(cudnn.status == 0);
    REQUIRE(own.status == 0);
    const double e_cudnn = nlohmann::json::parse(cudnn.out).at("relative_l2_vs_fp32").get<double>();
    const double e_own = nlohmann::json::parse(own.out).at("relative_l2_vs_fp32").get<double>();
    INFO("relative L2 against float32: cuDNN " << e_cudnn << ", own " << e_own);
    CHECK(e_own <= 1.25 * e_cudnn + 1e-4);
    CHECK_THAT(own.err, Catch::Contains("256x96x32 "));
    CHECK_THAT(cudnn.err, Catch::Contains("conv3d: cudnn"));
    CHECK_THAT(cudnn.err, !Catch::Contains("256x96x32"));
  }
}

}  // namespace vaecodec::test
