// A decode window held as 8-bit RGB (Note [A window held in 8 bits] in core/split/eight_bit_window.h): the
// frames it hands on are those of the window in the model's dtype, quantised as an 8-bit RGB writer
// quantises them, for blended tiles (whose overlap bands wait wide until their last tile) and exact ones, in
// one window or several; and the planner counts it.
#include <catch2/catch.hpp>

#include <iostream>
#include <vector>

#include "core/engine.h"
#include "core/models/registry.h"
#include "core/plan_for.h"
#include "core/planner.h"
#include "core/split/eight_bit_window.h"
#include "io/colour.h"
#include "tests/gpu_support.h"
#include "tests/norm_tile_case.h"
#include "tests/tiny_models.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

using core::EightBitWindow;
using tile_case::kCols, tile_case::kFrames, tile_case::kRows, tile_case::tiny_seedvr2;

// Crop tiles of 10x14 latent pixels sharing 4 on the case's 16x24 frame: 2x2 tiles, so that four tiles meet
// at the middle cell.
core::ChunkOptions crop_tiles_2x2(int64_t window) {
  core::ChunkOptions o;
  o.latent_frames = 1;
  o.tiles = core::TileGrid::cover_crop(kRows, kCols, core::TileSize{10, 14}, 4, /*context=*/2);
  o.window = window;
  o.window_store = core::WindowStore::kHostFrames;
  o.kind = core::SplitKind::kExactTiles;
  return o;
}

// The decode's frames as `emit` gets them, joined.
torch::Tensor emitted(core::VaeModel& model, const torch::Tensor& latents, core::ChunkOptions o,
                      bool eight_bit) {
  std::vector<torch::Tensor> frames;
  o.emit = [&frames](const torch::Tensor& f) { frames.push_back(f.cpu()); };
  o.emit_8bit = eight_bit;
  const torch::Tensor returned = core::decode_latents(model, latents, o);
  REQUIRE_FALSE(frames.empty());
  if (returned.defined()) REQUIRE(returned.size(2) == 0);
  return torch::cat(frames, 2);
}

}  // namespace

TEST_CASE("a window held in 8 bits hands on the model's window rounded to 8 bits, bit for bit",
          "[eight-bit][crop-tiles]") {
  auto model = tiny_seedvr2();
  const auto video = halves_video(kRows, kCols, kFrames);
  const auto latents = core::encode_video(*model, video, {1});
  for (int64_t window : {0, 1}) {  // the whole clip; windows of one latent frame (caches parked between)
    INFO("window " << window);
    const core::ChunkOptions o = crop_tiles_2x2(window);
    REQUIRE(o.tiles.rows == 2);
    REQUIRE(o.tiles.cols == 2);
    const torch::Tensor wide = emitted(*model, latents, o, false);
    const torch::Tensor eight = emitted(*model, latents, o, true);
    REQUIRE(eight.sizes() == wide.sizes());
    CHECK(eight.scalar_type() == torch::kFloat);
    // Exactly the wide window's frames through the 8-bit RGB quantisation, overlap bands and the cell of
    // four tiles included.
    const torch::Tensor expected = EightBitWindow::expand(EightBitWindow::quantise(wide, model->dtype()));
    CHECK(torch::equal(eight, expected));
    // And not the wide frames themselves: the 8-bit path ran.
    CHECK_FALSE(torch::equal(eight, wide));
    // Within half a step of the wide frames inside the RGB cube (the tiny random model's go beyond it, and
    // are clipped there).
    CHECK((eight - wide.clamp(-1.0, 1.0)).abs().max().item<double>() <= 1.0 / 255.0 + 1e-6);
  }
}

TEST_CASE("an 8-bit window's RGB video is the wide window's, its Y'CbCr within one code value in the cube",
          "[eight-bit]") {
  auto model = tiny_seedvr2();
  const auto video = halves_video(kRows, kCols, kFrames);
  const auto latents = core::encode_video(*model, video, {1});
  const core::ChunkOptions o = crop_tiles_2x2(0);
  // [t, 3, H, W]; inside the RGB cube, where 8-bit RGB holds them (the tiny random model's frames go
  // beyond it: clipped there, Note [A window held in 8 bits]).
  const torch::Tensor wide = emitted(*model, latents, o, false)[0].permute({1, 0, 2, 3}).clamp(-1.0, 1.0);
  const torch::Tensor eight = emitted(*model, latents, o, true)[0].permute({1, 0, 2, 3});
  // What the writer makes of each for an 8-bit 4:2:0 BT.709 video: one rounding more (the 8-bit RGB's).
  const io::TensorToFrame to_yuv(AV_PIX_FMT_YUV420P, static_cast<int>(wide.size(3)),
                                 static_cast<int>(wide.size(2)), io::ColourDetails{});
  const auto a = to_yuv.quantize(wide), b = to_yuv.quantize(eight);
  int64_t differ = 0, samples = 0;
  for (int p = 0; p < 3; ++p) {
    const torch::Tensor d = (a[p].to(torch::kInt) - b[p].to(torch::kInt)).abs();
    CHECK(d.max().item<int64_t>() <= 1);
    differ += d.gt(0).sum().item<int64_t>();
    samples += d.numel();
  }
  // An 8-bit RGB video (planar GBR) is written bit for bit as from the wide window.
  const io::TensorToFrame to_rgb(AV_PIX_FMT_GBRP, static_cast<int>(wide.size(3)),
                                 static_cast<int>(wide.size(2)), io::ColourDetails{});
  const auto c = to_rgb.quantize(wide), d = to_rgb.quantize(eight);
  for (int p = 0; p < 3; ++p) CHECK(torch::equal(c[p], d[p]));
  const double share = static_cast<double>(differ) / static_cast<double>(samples);
  std::cout << "8-bit window: " << differ << " of " << samples << " Y'CbCr samples differ by one code value ("
            << share * 100 << "%)\n";
  CHECK(share < 0.5);
}

TEST_CASE("on CUDA a window held in 8 bits hands on the model's window rounded to 8 bits, bit for bit",
          "[eight-bit][crop-tiles][gpu]") {
  if (!cuda_here()) return;
  auto model = load_tiny(tiny_model("seedvr2-vae"), torch::kCUDA, torch::kFloat);
  const auto video = halves_video(kRows, kCols, kFrames);
  const auto latents = core::encode_video(*tiny_seedvr2(), video, {1});
  for (int64_t window : {0, 1}) {
    INFO("window " << window);
    const core::ChunkOptions o = crop_tiles_2x2(window);
    const torch::Tensor wide = emitted(*model, latents, o, false);
    const torch::Tensor eight = emitted(*model, latents, o, true);
    // The same codes (the GPU's float32 division by 255 may round the values they stand for otherwise).
    CHECK(torch::equal(EightBitWindow::quantise(eight, torch::kFloat),
                       EightBitWindow::quantise(wide, model->dtype())));
    CHECK(torch::allclose(eight, EightBitWindow::expand(EightBitWindow::quantise(wide, model->dtype())), 0,
                          1e-6));
    CHECK_FALSE(torch::equal(eight, wide));
  }
}

TEST_CASE("an 8-bit window's quantisation is an 8-bit RGB writer's, and its cells are checked",
          "[eight-bit]") {
  // round(255 clamp((x + 1) / 2, 0, 1)), from the value in the given dtype.
  const torch::Tensor x = torch::tensor({-1.5, -1.0, -0.999, 0.0, 0.5, 0.99999, 1.0, 3.0}, torch::kDouble);
  const torch::Tensor q = EightBitWindow::quantise(x, torch::kDouble);
  CHECK(q.scalar_type() == torch::kUInt8);
  const std::vector<int64_t> want{0, 0, 0, 128, 191, 255, 255, 255};
  for (size_t i = 0; i < want.size(); ++i) CHECK(q[i].item<int64_t>() == want[i]);
  CHECK(EightBitWindow::expand(q)[0].item<float>() == -1.0f);
  CHECK(EightBitWindow::expand(q)[7].item<float>() == 1.0f);
  // The value in the window's dtype first (bf16 here), then the same rounding.
  CHECK(EightBitWindow::quantise(torch::tensor({0.0019}), torch::kBFloat16)[0].item<int64_t>() == 128);

  const std::vector<int64_t> sizes{1, 3, 2, 16, 16};
  using core::Area;
  // Tiles that leave pixels unwritten, and tiles that overlap without blending, are refused.
  CHECK_THROWS_WITH(
      EightBitWindow(sizes, torch::kFloat, {Area{{0, 16}, {0, 8}}, Area{{0, 8}, {8, 16}}}, true),
      Catch::Contains("unwritten"));
  CHECK_THROWS_WITH(
      EightBitWindow(sizes, torch::kFloat, {Area{{0, 16}, {0, 10}}, Area{{0, 16}, {6, 16}}}, false),
      Catch::Contains("overlap"));
  // Two tiles sharing columns 6-9: the shared band waits wide until the second tile adds to it.
  EightBitWindow w(sizes, torch::kFloat, {Area{{0, 16}, {0, 10}}, Area{{0, 16}, {6, 16}}}, true);
  const core::Device& cpu = core::Device::of(torch::kCPU);
  const torch::Tensor half = torch::full({1, 3, 2, 16, 10}, 0.25);
  w.place(w.bring_down(0, 0, half, cpu));
  CHECK(w.bytes() == 3 * 2 * 16 * 16 + 3 * 2 * 16 * 4 * 4);  // the frames, and the band's float32 sums
  w.place(w.bring_down(1, 0, half, cpu));
  CHECK(w.bytes() == 3 * 2 * 16 * 16);  // the band quantised and dropped
  const torch::Tensor f = w.frames(0, 2);
  CHECK(f.index({0, 0, 0, 0, 0}).item<int64_t>() == 159);  // 0.25 -> round(159.375)
  CHECK(f.index({0, 0, 0, 0, 7}).item<int64_t>() == 191);  // 0.25 + 0.25 -> round(191.25)
  CHECK(f.index({0, 0, 0, 0, 12}).item<int64_t>() == 159);
  // Frames handed on give their memory back; what is left reads as before.
  const torch::Tensor second = w.frames(1, 1).clone();
  w.release(1);
  CHECK(w.bytes() == 3 * 1 * 16 * 16);
  CHECK(torch::equal(w.frames(1, 1), second));
  CHECK_THROWS_WITH(w.bring_down(2, 0, half, cpu), Catch::Contains("no tile 2"));
  // Frames of several pages each: the pages of frame 0 go back, frames 1 and 2 are untouched.
  EightBitWindow big({1, 3, 3, 64, 64}, torch::kFloat, {Area{{0, 64}, {0, 64}}}, false);
  big.place(big.bring_down(0, 0, torch::full({1, 3, 3, 64, 64}, 0.5), cpu));
  big.release(1);
  CHECK(big.frames(1, 2).eq(191).all().item<bool>());
  big.release(3);
  CHECK(big.bytes() == 0);
  CHECK_THROWS_WITH(w.bring_down(0, 1, half, cpu), Catch::Contains("do not fit"));
}

TEST_CASE("the planner counts a decode window held in 8 bits", "[eight-bit][planner]") {
  const auto& family = core::find_model_family("seedvr2-vae");
  auto model = family.build(family.released_config);
  model->to(torch::kBFloat16);
  const core::PlanRequest request = core::plan_request(*model, {core::Op::kDecode, 3840, 2160, 21});
  core::PlannerOptions options;
  options.budget_bytes = 24 * (int64_t{1} << 30);
  options.host_budget_bytes = 16 * (int64_t{1} << 30);
  const core::Plan wide = core::plan_run(request, options);
  options.output_8bit = true;
  const core::Plan eight = core::plan_run(request, options);
  REQUIRE(wide.window_store == core::WindowStore::kHostFrames);
  REQUIRE(eight.window_store == core::WindowStore::kHostFrames);
  CHECK(eight.tiles.rows == wide.tiles.rows);
  CHECK(eight.tiles.cols == wide.tiles.cols);
  // The window of 81 frames of 4K in bf16 is 3.75 GiB in a 4 GiB pinned block; in 8 bits, 1.88 GiB paged;
  // two tiles' bf16 frames in pinned blocks become one tile's 8-bit frames.
  const double gib = static_cast<double>(int64_t{1} << 30);
  const double saved = static_cast<double>(wide.estimate.host - eight.estimate.host) / gib;
  INFO("host " << wide.estimate.host / gib << " -> " << eight.estimate.host / gib << " GiB");
  CHECK(saved > 2.2);
  CHECK(saved < 4.5);
  // An encode has no decode window: nothing changes.
  const core::PlanRequest encode = core::plan_request(*model, {core::Op::kEncode, 3840, 2160, 21});
  options.output_8bit = false;
  const int64_t before = core::plan_run(encode, options).estimate.host;
  options.output_8bit = true;
  CHECK(core::plan_run(encode, options).estimate.host == before);
}

}  // namespace vaecodec::test
