// Spatial tiles: the blend weights, equality with the untiled run when nothing is cut, chunk invariance of
// the tiled run (each tile keeps its cache through time), and how close tiled output is to untiled on the
// tiny model.
#include <torch/cuda.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <iostream>

#include "core/device/device.h"
#include "core/engine.h"
#include "core/error.h"
#include "core/models/registry.h"
#include "core/split/blended_tiles.h"
#include "tests/gpu_support.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

// A plan of blended tiles on `grid`, `chunk` latent frames per call, their caches offloaded or not.
core::ChunkOptions blended(int64_t chunk, const core::TileGrid& grid, bool offload = false) {
  core::ChunkOptions o{chunk, grid, offload};
  o.kind = core::SplitKind::kBlendedTiles;
  return o;
}

std::shared_ptr<core::VaeModel> tiny_wan21_f64() {
  return core::build_model(core::load_checkpoint(data_dir() / "wan21-tiny" / "weights.safetensors"),
                           {"", torch::kCPU, torch::kDouble});
}

// A smooth moving picture in [-1, 1], [1, 3, frames, height, width], float64: something like video, so that
// tile seams would show as errors well above the model's own detail.
torch::Tensor smooth_video(int64_t frames, int64_t height, int64_t width) {
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  auto t = torch::arange(frames, opts).view({1, 1, frames, 1, 1});
  auto y = torch::linspace(0, 1, height, opts).view({1, 1, 1, height, 1});
  auto x = torch::linspace(0, 1, width, opts).view({1, 1, 1, 1, width});
  auto phase = torch::tensor({0.0, 2.0, 4.0}, opts).view({1, 3, 1, 1, 1});
  return (torch::sin(6.0 * x + 0.3 * t + phase) * torch::cos(4.0 * y - 0.2 * t) * 0.8).contiguous();
}

double psnr_db(const torch::Tensor& a, const torch::Tensor& b) {
  const double mse = (a.clamp(-1, 1) - b.clamp(-1, 1)).div(2).pow(2).mean().item<double>();
  return 10 * std::log10(1.0 / mse);
}

}  // namespace

TEST_CASE("blend weights add to 1 everywhere and ramp smoothly over the overlaps", "[tiling]") {
  for (auto [h, w, th, tw, o, scale] : std::vector<std::array<int64_t, 6>>{{12, 16, 8, 10, 4, 8},
                                                                           {90, 160, 48, 64, 8, 8},
                                                                           {90, 160, 48, 64, 8, 1},
                                                                           {17, 23, 9, 10, 3, 1},
                                                                           {30, 30, 12, 12, 8, 1}}) {
    const auto grid = core::TileGrid::cover(h, w, {th, tw}, o);
    INFO(grid.rows << "x" << grid.cols << " tiles of " << tw << "x" << th << " overlap " << o << " scale "
                   << scale);
    REQUIRE(grid.tiled());
    const auto weights = core::blend_weights(grid, scale);
    REQUIRE(static_cast<int64_t>(weights.size()) == grid.count());
    auto sum = torch::zeros({h * scale, w * scale}, torch::kDouble);
    for (int64_t r = 0; r < grid.rows; ++r)
      for (int64_t c = 0; c < grid.cols; ++c) {
        const auto& wt = weights[r * grid.cols + c];
        REQUIRE(wt.sizes() == torch::IntArrayRef({th * scale, tw * scale}));
        CHECK(wt.min().item<double>() > 0);
        CHECK(wt.max().item<double>() <= 1 + 1e-15);
        sum.narrow(0, grid.row_origin(r) * scale, th * scale)
            .narrow(1, grid.col_origin(c) * scale, tw * scale)
            .add_(wt);
      }
    CHECK((sum - 1).abs().max().item<double>() < 1e-14);
  }
  // Two tiles side by side: 1 outside the overlap, a raised-cosine crossing inside it, symmetric.
  const auto grid = core::TileGrid::cover(4, 20, {4, 12}, 4);
  REQUIRE(grid.cols == 2);
  const auto w = core::blend_weights(grid, 1);
  const auto left = w[0][0], right = w[1][0];
  CHECK(left.narrow(0, 0, 8).eq(1).all().item<bool>());
  CHECK(right.narrow(0, 4, 8).eq(1).all().item<bool>());
  for (int64_t x = 0; x < 4; ++x) {
    const double expected = 0.5 + 0.5 * std::cos(M_PI * (x + 0.5) / 4);
    CHECK(left[8 + x].item<double>() == Approx(expected).epsilon(1e-12));
    CHECK(right[x].item<double>() == Approx(1 - expected).epsilon(1e-12));
  }
}

TEST_CASE("a grid that does not cut the frame gives the engine's run exactly", "[tiling]") {
  auto model = tiny_wan21_f64();
  const auto video =
      read_tensors(data_dir() / "wan21-tiny" / "cases.safetensors").at("video").to(torch::kDouble);
  const auto latents = core::encode_video(*model, video, {1});
  for (const core::TileGrid& grid : {core::TileGrid{}, core::TileGrid::cover(8, 6, {8, 8}, 4)}) {
    CHECK(core::encode_video(*model, video, blended(2, grid)).equal(core::encode_video(*model, video, {2})));
    CHECK(core::decode_latents(*model, latents, blended(2, grid))
              .equal(core::decode_latents(*model, latents, {2})));
  }
  CHECK_THROWS_WITH(
      core::decode_latents(*model, latents, blended(1, core::TileGrid::cover(16, 16, {8, 8}, 4))),
      Catch::Contains("the tile plan is for 16x16 latent pixels, the frames are 6x8"));
}

TEST_CASE("tiled runs do not depend on the chunking: each tile keeps its cache", "[tiling][chunks]") {
  auto model = tiny_wan21_f64();
  const auto video = smooth_video(17, 96, 128);  // latent 12 x 16
  const auto grid = core::TileGrid::cover(12, 16, {8, 10}, 4);
  REQUIRE(grid.count() == 4);

  const auto latents = core::encode_video(*model, video, blended(1, grid));
  REQUIRE(latents.sizes() == torch::IntArrayRef({1, 16, 5, 12, 16}));
  for (int64_t chunk : {2, 1000}) {
    INFO("encode chunk " << chunk);
    CHECK(relative_error(core::encode_video(*model, video, blended(chunk, grid)), latents) <= 1e-12);
  }
  core::Run pieces(*model, core::Device::of(model->device()), core::Op::kEncode, blended(2, grid));
  std::vector<torch::Tensor> parts;
  int64_t t = 0;
  for (int64_t piece : {3, 1, 7, 6}) {
    if (auto z = pieces.push(video.narrow(2, t, piece)); z.defined() && z.size(2) > 0) parts.push_back(z);
    t += piece;
  }
  if (auto z = pieces.finish(); z.defined()) parts.push_back(z);
  CHECK(relative_error(torch::cat(parts, 2), latents) <= 1e-12);

  const auto decoded = core::decode_latents(*model, latents, blended(1, grid));
  REQUIRE(decoded.sizes() == video.sizes());
  for (int64_t chunk : {2, 3, 1000}) {
    INFO("decode chunk " << chunk);
    CHECK(relative_error(core::decode_latents(*model, latents, blended(chunk, grid)), decoded) <= 1e-12);
  }
  // Offloading the caches (a no-op move on the CPU) does not change the arithmetic.
  CHECK(core::decode_latents(*model, latents, blended(2, grid, /*offload=*/true))
            .equal(core::decode_latents(*model, latents, blended(2, grid))));
}

TEST_CASE("on CUDA, caches offloaded to pinned host memory give the same tiled result", "[tiling][gpu]") {
  // On the CPU the offload is a no-op move; here the caches really leave the device between tiles, on two
  // copy streams beside the model (Note [Offloaded caches]): a missing wait would show as a difference.
  if (!cuda_here()) return;
  auto model = core::build_model(core::load_checkpoint(data_dir() / "wan21-tiny" / "weights.safetensors"),
                                 {"", torch::kCUDA, torch::kFloat});
  const auto video = smooth_video(17, 96, 128).to(torch::kFloat);
  for (const auto& grid :
       {core::TileGrid::cover(12, 16, {8, 10}, 4), core::TileGrid::cover(12, 16, {6, 6}, 2)}) {
    INFO(grid.count() << " tiles");
    const auto latents = core::encode_video(*model, video, blended(1, grid));
    for (int64_t chunk : {1, 2}) {
      INFO("chunk " << chunk);
      CHECK(core::encode_video(*model, video, blended(chunk, grid, /*offload=*/true))
                .equal(core::encode_video(*model, video, blended(chunk, grid))));
      const auto decoded = core::decode_latents(*model, latents, blended(chunk, grid));
      for (int repeat = 0; repeat < 3; ++repeat)
        CHECK(core::decode_latents(*model, latents, blended(chunk, grid, /*offload=*/true)).equal(decoded));
    }
  }
}

TEST_CASE("with a pointwise model tiles are invisible: the blend is a partition of unity", "[tiling]") {
  // The pass-through "VAE" maps each 8x8 pixel block to its own latent pixel, so every tile computes exactly
  // the untiled values on its pixels and only the blend can make a difference.
  PassThroughVae model;  // float32: it has no parameters to say otherwise
  const auto video = smooth_video(9, 96, 128).to(torch::kFloat);
  const auto latents = core::encode_video(model, video, {1});
  const auto decoded = core::decode_latents(model, latents, {1});
  for (const auto& [tile, overlap] : std::vector<std::pair<core::TileSize, int64_t>>{
           {{8, 10}, 4}, {{5, 7}, 2}, {{12, 9}, 8}, {{3, 3}, 1}}) {
    const auto grid = core::TileGrid::cover(12, 16, tile, overlap);
    INFO(grid.rows << "x" << grid.cols << " tiles, overlap " << overlap);
    REQUIRE(grid.tiled());
    CHECK(relative_error(core::encode_video(model, video, blended(2, grid)), latents) < 1e-6);
    CHECK(relative_error(core::decode_latents(model, latents, blended(2, grid)), decoded) < 1e-6);
  }
}

TEST_CASE("tiled output is close to untiled on the tiny model", "[tiling]") {
  auto model = tiny_wan21_f64();
  const auto video = smooth_video(9, 192, 256);  // latent 32 x 24
  const auto latents = core::encode_video(*model, video, {1});
  const auto decoded = core::decode_latents(*model, latents, {1});
  double last_psnr = 0;
  for (const core::TileSize tile : {core::TileSize{12, 16}, core::TileSize{16, 20}, core::TileSize{20, 24}}) {
    const auto grid = core::TileGrid::cover(24, 32, tile, /*overlap=*/4);
    const auto tiled_latents = core::encode_video(*model, video, blended(1, grid));
    const auto tiled_decoded = core::decode_latents(*model, latents, blended(1, grid));
    const double encode_error = relative_error(tiled_latents, latents);
    const double decode_error = relative_error(tiled_decoded, decoded);
    const double decode_psnr = psnr_db(tiled_decoded, decoded);
    std::cout << "tiling: tiny Wan2.1, 256x192 x9, " << grid.rows << "x" << grid.cols << " tiles of "
              << tile.width << "x" << tile.height << " latent px, overlaps "
              << grid.row_origin(0) + tile.height - grid.row_origin(1) << "/"
              << grid.col_origin(0) + tile.width - grid.col_origin(1) << ": encode relative error "
              << encode_error << ", decode relative error " << decode_error << ", decode PSNR vs untiled "
              << decode_psnr << " dB\n";
    INFO("tile " << tile.width << "x" << tile.height);
    // Measured (x17 frames): encode 0.041 / 0.022 / 0.0073, decode 0.19 / 0.11 / 0.039 for the three sizes.
    CHECK(encode_error < 0.08);
    CHECK(decode_error < 0.3);
    CHECK(decode_psnr > last_psnr);  // larger tiles, less of the frame near an edge
    last_psnr = decode_psnr;
  }
}

TEST_CASE("cli: a tiled plan runs through the file pipeline, the plan is in --json", "[tiling][cli]") {
  ScratchDir dir;
  const auto in = make_clip(dir / "in.mp4",
                            "-f lavfi -i testsrc2=size=256x192:rate=24 -frames:v 9 "
                            "-pix_fmt yuv420p -c:v libx264");
  const std::string common = " --weights " + quote(tiny_weights()) + " --device cpu --json";
  // Lossless output (FFV1), so that the comparison sees the model's frames and not x264's decisions on them.
  const std::string lossless = common + " --codec ffv1";
  const CliResult whole = run_cli("roundtrip " + quote(in) + " -o " + quote(dir / "whole.mkv") + lossless);
  INFO(whole.err);
  REQUIRE(whole.status == 0);
  const CliResult tiled = run_cli("roundtrip " + quote(in) + " -o " + quote(dir / "tiled.mkv") + lossless +
                                  " --tile 20x16 --chunk 2");
  INFO(tiled.err);
  REQUIRE(tiled.status == 0);
  const auto plan = nlohmann::json::parse(tiled.out).at("plan");
  CHECK(plan.at("tiled") == true);
  CHECK(plan.at("chunk") == 2);
  CHECK(plan.at("tiles").at("rows") == 2);
  CHECK(plan.at("tiles").at("cols") == 2);
  CHECK(nlohmann::json::parse(whole.out).at("plan").at("tiled") == false);
  const auto a = read_rgb(dir / "whole.mkv"), b = read_rgb(dir / "tiled.mkv");
  REQUIRE(a.sizes() == b.sizes());
  const double db = psnr(a, b);
  std::cout << "tiling: cli roundtrip 256x192 x9, 2x2 tiles vs untiled: PSNR " << db << " dB\n";
  // Wan's tiles are exact (Note [Exact tiles] in core/trunk.h): the same frames, to float32's rounding, which
  // oneDNN's choice of algorithm by shape (Note [Convolutions on the CPU] in core/layers.cpp) lets differ in
  // the last bits: a few 8-bit codes flip (93 dB; through x264, whose choices those flips change, 47-52 dB);
  // blended tiles gave 34.1 dB here through x264.
  CHECK(plan.at("exact_tiles") == true);
  CHECK(db > 80);

  // Encode and decode through latent files, tiled, give the frames back; the plan line goes to stderr.
  const CliResult enc = run_cli("encode " + quote(in) + " -o " + quote(dir / "z.safetensors") +
                                " --weights " + quote(tiny_weights()) + " --device cpu --tile 20x16");
  INFO(enc.err);
  REQUIRE(enc.status == 0);
  CHECK_THAT(enc.err,
             Catch::Contains("plan: encode chunk 1 latent frame, 2x2 exact tiles of up to 16x12 latent px"));
  const CliResult dec = run_cli("decode " + quote(dir / "z.safetensors") + " -o " + quote(dir / "d.mp4") +
                                " --weights " + quote(tiny_weights()) + " --device cpu --quiet --tile 20x16");
  INFO(dec.err);
  REQUIRE(dec.status == 0);
  CHECK(dec.err.empty());
  CHECK(read_rgb(dir / "d.mp4").size(0) == 9);

  // A budget nothing fits: one line, before any output is made.
  const CliResult none =
      run_cli("roundtrip " + quote(in) + " -o " + quote(dir / "none.mp4") + common + " --vram 1M");
  CHECK(none.status == 1);
  CHECK_THAT(none.err, Catch::StartsWith("vaecodec: error: roundtrip of 256x192 does not fit in 1 MiB"));
  CHECK(std::count(none.err.begin(), none.err.end(), '\n') == 1);
  CHECK_FALSE(std::filesystem::exists(dir / "none.mp4"));
}

}  // namespace vaecodec::test
