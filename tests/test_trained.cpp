// Quality on natural statistics: the trained demonstration model (tests/data/wan21-trained, made by
// scripts/train_tiny.py) round-trips a clip it never saw, and exact tiles, blended tiles and bf16 keep its
// PSNR. The clip (heldout_bbb.mp4: Big Buck Bunny frames 103-119, (c) Blender Foundation, CC BY 3.0, at
// 320x180 cropped to 192x128) comes from frames the training never cropped (meta.json, data.held_out).
#include <catch2/catch.hpp>

#include <cmath>
#include <iostream>

#include "core/engine.h"
#include "core/models/registry.h"
#include "core/tile_grid.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

std::filesystem::path trained_dir() {
  return data_dir() / "wan21-trained";
}

std::shared_ptr<core::VaeModel> trained_wan21(torch::ScalarType dtype = torch::kFloat) {
  return core::build_model(core::load_checkpoint(trained_dir() / "weights.safetensors"),
                           {"", torch::kCPU, dtype});
}

// The held-out clip as [1, 3, T, H, W] in [-1, 1]: its first `frames` frames, the centre `height` x `width`.
torch::Tensor held_out_clip(int64_t frames, int64_t height = 128, int64_t width = 192) {
  const auto rgb = read_rgb(trained_dir() / "heldout_bbb.mp4");  // [T, 3, 128, 192]
  return rgb.narrow(0, 0, frames)
      .narrow(2, (rgb.size(2) - height) / 2, height)
      .narrow(3, (rgb.size(3) - width) / 2, width)
      .permute({1, 0, 2, 3})
      .unsqueeze(0)
      .contiguous();
}

// PSNR in dB of two [-1, 1] videos after clamping, over the whole clip.
double psnr_db(const torch::Tensor& a, const torch::Tensor& b) {
  const auto x = a.to(torch::kDouble).clamp(-1, 1), y = b.to(torch::kDouble).clamp(-1, 1);
  const double mse = (x - y).div(2).pow(2).mean().item<double>();
  return 10 * std::log10(1.0 / mse);
}

torch::Tensor roundtrip(core::VaeModel& model, const torch::Tensor& video,
                        const core::ChunkOptions& o = {1}) {
  return core::decode_latents(model, core::encode_video(model, video, o), o);
}

}  // namespace

TEST_CASE("the trained Wan2.1 model round-trips a clip it never saw", "[trained]") {
  const auto video = held_out_clip(17);
  REQUIRE(video.sizes() == torch::IntArrayRef({1, 3, 17, 128, 192}));
  auto model = trained_wan21();
  CHECK(model->info().family == "wan2.1-vae");
  const double trained = psnr_db(roundtrip(*model, video), video);
  std::cout << "trained Wan2.1 on held-out 192x128 x17: PSNR " << trained << " dB\n";
  // Measured 24.6 dB; the random-weight tiny model gives 11.1 dB on this clip and the first trained weights
  // (1045 steps) gave 21.3 dB. The bound is this model's, below the 26 dB target: see
  // tests/data/wan21-trained/meta.json, held_out_psnr_db.
  CHECK(trained > 23.8);
}

TEST_CASE("on the trained Wan2.1 model exact tiles equal the whole frame, blended tiles keep the PSNR",
          "[trained][exact][tiling]") {
  const auto video = held_out_clip(5, 96, 128);  // 2 latent frames of 12 x 16
  auto model = trained_wan21();
  const auto latents = core::encode_video(*model, video, {1});
  const auto whole = core::decode_latents(*model, latents, {1});
  const double whole_psnr = psnr_db(whole, video);

  core::ChunkOptions exact{1};
  exact.tiles = core::TileGrid::parts(12, 16, 2, 2);
  exact.window = 1;
  const auto exact_latents = core::encode_video(*model, video, exact);
  const auto exact_decoded = core::decode_latents(*model, latents, exact);
  CHECK(relative_error(exact_latents, latents) <= 1e-5);
  CHECK(relative_error(exact_decoded, whole) <= 1e-5);
  CHECK(std::abs(psnr_db(exact_decoded, video) - whole_psnr) < 0.01);

  // Blended tiles of 8 x 10 latent pixels overlapping by 4: the seams cost little on a trained network.
  const core::ChunkOptions blended{1, core::TileGrid::cover(12, 16, {8, 10}, 4)};
  REQUIRE(blended.tiles.tiled());
  const auto blended_trip = roundtrip(*model, video, blended);
  const double blended_psnr = psnr_db(blended_trip, video);
  const double seams = psnr_db(blended_trip, whole);
  std::cout << "trained Wan2.1, 128x96 x5: whole " << whole_psnr << " dB, blended tiles " << blended_psnr
            << " dB, blended vs whole " << seams << " dB\n";
  CHECK(blended_psnr > whole_psnr - 0.5);
  CHECK(seams > 30);
}

TEST_CASE("bf16 keeps the trained Wan2.1 model's PSNR", "[trained][bf16]") {
  const auto video = held_out_clip(5, 96, 128);
  auto fp32 = trained_wan21();
  auto bf16 = trained_wan21(torch::kBFloat16);
  const auto a = roundtrip(*fp32, video);
  const auto b = roundtrip(*bf16, video).to(torch::kFloat);
  const double pa = psnr_db(a, video), pb = psnr_db(b, video), ab = psnr_db(b, a);
  std::cout << "trained Wan2.1, 128x96 x5: fp32 " << pa << " dB, bf16 " << pb << " dB, bf16 vs fp32 " << ab
            << " dB\n";
  CHECK(pb > pa - 0.3);
  CHECK(ab > 35);
}

}  // namespace vaecodec::test
