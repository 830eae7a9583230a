// Exact tiles (Note [Exact tiles] in core/trunk.h, Note [Tiles through time] in core/exact_tiles.h): a run
// cut into tiles, chunks and windows equals the untiled run, for every grid, chunk length and window, on the
// tiny models of the families whose trunks are local. Random inputs larger than the golden cases, so that the
// margins are narrower than the frame at every resolution.
#include <algorithm>

#include <catch2/catch.hpp>

#include "core/engine.h"
#include "core/exact_tiles.h"
#include "tests/tiny_models.h"

namespace vaecodec::test {
namespace {

struct Cut {
  int64_t rows, cols, chunk, window;
};

core::ChunkOptions exact(const Cut& c, int64_t latent_height, int64_t latent_width, bool host = false) {
  core::ChunkOptions o;
  o.latent_frames = c.chunk;
  o.tiles = core::TileGrid::parts(latent_height, latent_width, c.rows, c.cols);
  o.window = c.window;
  o.host_window = host;
  return o;
}

// Latent rows and columns of the test frames: 24 x 20 latent pixels (Wan2.1: 192 x 160 pixels).
constexpr int64_t kRows = 24, kCols = 20;

}  // namespace

TEST_CASE("a trunk's reach: what each block reads shrinks towards the output", "[exact]") {
  const core::Reach same{2}, up{0, core::Resize::kUp2}, down{0, core::Resize::kDown2};
  CHECK(core::input_span(same, {10, 20}, 100) == core::Span{8, 22});
  CHECK(core::input_span(same, {0, 20}, 21) == core::Span{0, 21});   // clipped at the frame
  CHECK(core::input_span(up, {10, 21}, 100) == core::Span{4, 12});   // rows 9..11 and one more each side
  CHECK(core::input_span(down, {5, 9}, 100) == core::Span{10, 20});  // 2a, 2b + 2, even
  CHECK(core::input_span({1, core::Resize::kDown2}, {5, 9}, 100) == core::Span{8, 22});
  CHECK(core::output_span(up, {4, 12}) == core::Span{8, 24});
  CHECK(core::output_span(down, {10, 20}) == core::Span{5, 10});
}

TEST_CASE("the Wan families run exact tiles, SeedVR2 keeps blended ones", "[exact]") {
  for (const TinyModel& tiny : tiny_models()) {
    INFO(tiny.family);
    auto model = load_tiny(tiny);
    CHECK(model->exact_tiles() == (tiny.family != "seedvr2-vae"));
  }
  // The tiny Wan2.1 decoder's trunk: per stage three residual blocks (2 pixels each) and a 2x upsampler, then
  // the head (1 pixel). Interior rows [20, 24) are output rows [160, 192), which read [159, 193), [153, 199)
  // at full resolution, [75, 101) and [69, 107) at half, [33, 55) and [27, 61) at a quarter, [12, 32) and
  // [6, 38) at latent resolution: 14 latent pixels each side.
  auto wan = load_tiny(tiny_model("wan2.1-vae"));
  const core::Area interior{{20, 24}, {20, 24}};
  CHECK(wan->tile_input(false, interior, 60, 60) == core::Area{{6, 38}, {6, 38}});
  CHECK(wan->tile_input(false, {{0, 4}, {56, 60}}, 60, 60) == core::Area{{0, 18}, {42, 60}});  // at the edges
  CHECK(wan->tile_work(false, interior, 60, 60) > 1.5);
}

TEST_CASE("exact tiles decode as the whole frame does, for every grid, chunk and window", "[exact]") {
  for (const TinyModel& tiny : tiny_models()) {
    auto model = load_tiny(tiny, torch::kCPU, torch::kDouble);
    if (!model->exact_tiles()) continue;
    INFO(tiny.family);
    const int64_t rows = kRows * 8 / tiny.spatial_factor, cols = kCols * 8 / tiny.spatial_factor;
    torch::manual_seed(1);
    const auto latents = torch::randn({1, model->info().latent_channels, 5, rows, cols}, torch::kDouble);
    const auto whole = core::decode_latents(*model, latents, {1});
    for (const Cut& c : std::vector<Cut>{
             {1, 2, 1, 0}, {2, 1, 2, 0}, {2, 3, 1, 2}, {3, 2, 3, 0}, {6, 1, 1, 3}, {2, 2, 2, 1}}) {
      INFO("tiles " << c.rows << "x" << c.cols << ", chunk " << c.chunk << ", window " << c.window);
      const auto tiled = core::decode_latents(*model, latents, exact(c, rows, cols));
      REQUIRE(tiled.sizes() == whole.sizes());
      CHECK(relative_error(tiled, whole) <= 1e-12);
      // The window's frames kept in host memory (Note [Windows in host memory]): the same frames.
      CHECK(relative_error(core::decode_latents(*model, latents, exact(c, rows, cols, true)), whole) <=
            1e-12);
    }
  }
}

TEST_CASE("exact tiles encode as the whole frame does, for every grid, chunk and window", "[exact]") {
  for (const TinyModel& tiny : tiny_models()) {
    auto model = load_tiny(tiny, torch::kCPU, torch::kDouble);
    if (!model->exact_tiles()) continue;
    INFO(tiny.family);
    const int64_t rows = kRows * 8 / tiny.spatial_factor, cols = kCols * 8 / tiny.spatial_factor;
    torch::manual_seed(2);
    const auto video = torch::rand({1, 3, 13, kRows * 8, kCols * 8}, torch::kDouble) * 2 - 1;
    const auto whole = core::encode_video(*model, video, {1});
    for (const Cut& c : std::vector<Cut>{{1, 2, 1, 0}, {2, 1, 2, 0}, {3, 2, 1, 2}, {2, 2, 2, 3}}) {
      INFO("tiles " << c.rows << "x" << c.cols << ", chunk " << c.chunk << ", window " << c.window);
      const auto tiled = core::encode_video(*model, video, exact(c, rows, cols));
      REQUIRE(tiled.sizes() == whole.sizes());
      CHECK(relative_error(tiled, whole) <= 1e-12);
      if (c.window > 0)
        CHECK(relative_error(core::encode_video(*model, video, exact(c, rows, cols, true)), whole) <= 1e-12);
    }
  }
}

TEST_CASE("exact tiles in float32 stay within float32's rounding of the whole frame", "[exact]") {
  auto model = load_tiny(tiny_model("wan2.1-vae"));
  torch::manual_seed(3);
  const auto latents = torch::randn({1, 16, 3, kRows, kCols});
  const auto whole = core::decode_latents(*model, latents, {1});
  const auto tiled = core::decode_latents(*model, latents, exact({2, 2, 1, 2}, kRows, kCols));
  CHECK(relative_error(tiled, whole) <= 1e-5);
  const auto video = torch::rand({1, 3, 9, kRows * 8, kCols * 8}) * 2 - 1;
  const auto mu = core::encode_video(*model, video, {1});
  CHECK(relative_error(core::encode_video(*model, video, exact({3, 2, 2, 0}, kRows, kCols)), mu) <= 1e-5);
}

TEST_CASE("exact tiles report their frames as each tile finishes a chunk", "[exact]") {
  // Small tiles: the reports, not the values, are tested (the tests above test the values).
  auto model = load_tiny(tiny_model("wan2.1-vae"));
  torch::manual_seed(4);
  for (const bool decode : {true, false}) {
    INFO((decode ? "decode" : "encode"));
    std::vector<int64_t> seen;
    // 2x2 tiles, chunks of 1 latent frame, windows of 2: 3 windows of 2, 2, 1 latent frames.
    core::ChunkOptions o = exact({2, 2, 1, 2}, kRows, kCols);
    o.progress = [&seen](int64_t frames) { seen.push_back(frames); };
    int64_t frames = 0;
    if (decode) {
      frames = core::decode_latents(*model, torch::randn({1, 16, 5, kRows, kCols}), o).size(2);
    } else {
      frames = 17;
      core::encode_video(*model, torch::rand({1, 3, frames, kRows * 8, kCols * 8}) * 2 - 1, o);
    }
    REQUIRE(frames == 17);
    CHECK(seen.size() == 4 * 5);  // every tile's every chunk
    CHECK(std::is_sorted(seen.begin(), seen.end()));
    CHECK(seen[1] > 0);
    CHECK(seen.back() == frames);
    // Inside the first window (5 frames, 8 tile chunks): the count moves before the window is done.
    CHECK(seen[3] < 5);
  }
}

TEST_CASE("a window's pieces are sliced and taken along time as one tensor", "[exact]") {
  core::Pieces p;
  p.push(torch::arange(0, 3).view({1, 1, 3, 1, 1}));
  p.push(torch::arange(3, 8).view({1, 1, 5, 1, 1}));
  CHECK(p.size() == 8);
  CHECK(torch::equal(p.slice(2, 4).flatten(), torch::arange(2, 6)));
  core::Pieces head = p.take(4);
  CHECK(head.size() == 4);
  CHECK(p.size() == 4);
  CHECK(torch::equal(p.slice(0, 4).flatten(), torch::arange(4, 8)));
  CHECK_THROWS(p.slice(2, 3));
}

}  // namespace vaecodec::test
