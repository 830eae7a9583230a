// Exact tiles (Note [Exact tiles] in core/trunk.h, Note [Tiles through time] in core/split/exact_tiles.h): a
// run cut into tiles, chunks and windows equals the untiled run, for every grid, chunk length and window, on
// the tiny models of the families whose trunks are local. Random inputs larger than the golden cases, so that
// the margins are narrower than the frame at every resolution.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <utility>

#include <catch2/catch.hpp>

#include "core/device/device.h"
#include "core/engine.h"
#include "core/split/exact_tiles.h"
#include "tests/gpu_support.h"
#include "tests/tiles_support.h"
#include "tests/tiny_models.h"

namespace vaecodec::test {
namespace {

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

TEST_CASE("the Wan families run exact tiles, SeedVR2 tiles through time", "[exact]") {
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
      CHECK(relative_error(tiled, whole) <= kTilesExact);
      // The window's frames kept in host memory (Note [Windows in host memory]): the same frames.
      CHECK(relative_error(core::decode_latents(*model, latents, exact(c, rows, cols, true)), whole) <=
            kTilesExact);
    }
  }
}

TEST_CASE("on CUDA, exact tiles in windows shorter than the clip park their caches and equal the whole frame",
          "[gpu][exact]") {
  // Windows of 1 and 2 latent frames over a clip of 5: every tile's cache goes to host memory between windows
  // and comes back (Note [Offloaded caches]), its window on the device or in host memory; a decode's frames
  // reach `emit` on the device either way. float32 on the GPU: the tiles' convolutions see other shapes than
  // the whole frame's, so equal to cuDNN's rounding, not bit for bit.
  if (!cuda_here()) return;
  const torch::Device gpu(torch::kCUDA, 0);
  std::shared_ptr<core::VaeModel> model;
  for (const TinyModel& tiny : tiny_models())
    if (tiny.family == "wan2.1-vae") model = load_tiny(tiny, gpu, torch::kFloat);
  REQUIRE(model);
  REQUIRE(model->exact_tiles());
  torch::manual_seed(5);
  const auto latents = torch::randn({1, 16, 5, kRows, kCols}).to(gpu);
  const auto frames = (torch::rand({1, 3, 17, kRows * 8, kCols * 8}) * 2 - 1).to(gpu);
  const auto whole = core::decode_latents(*model, latents, {1});
  const auto whole_latents = core::encode_video(*model, frames, {1});
  for (const bool host : {false, true})
    for (const Cut& c : std::vector<Cut>{{2, 2, 1, 1}, {3, 2, 2, 2}}) {
      INFO("tiles " << c.rows << "x" << c.cols << ", chunk " << c.chunk << ", window " << c.window
                    << (host ? ", host window" : ""));
      core::ChunkOptions o = exact(c, kRows, kCols, host);
      CHECK(relative_error(core::encode_video(*model, frames, o), whole_latents) <= 1e-5);
      const auto tiled = decode_emitted_on_gpu(*model, latents, o);
      REQUIRE(tiled.sizes() == whole.sizes());
      CHECK(relative_error(tiled, whole) <= 1e-5);
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
      CHECK(relative_error(tiled, whole) <= kTilesExact);
      if (c.window > 0)
        CHECK(relative_error(core::encode_video(*model, video, exact(c, rows, cols, true)), whole) <=
              kTilesExact);
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

TEST_CASE("a window's first encode tile runs as its frames come, its last decode tile hands frames on",
          "[exact]") {
  // Note [A window's edges stream]: the same values, earlier.
  auto model = load_tiny(tiny_model("wan2.1-vae"), torch::kCPU, torch::kDouble);
  torch::manual_seed(5);
  const auto video = torch::rand({1, 3, 13, kRows * 8, kCols * 8}, torch::kDouble) * 2 - 1;
  const auto mu = core::encode_video(*model, video, {1});
  for (const Cut& c : std::vector<Cut>{{2, 2, 1, 0}, {1, 3, 1, 2}}) {
    INFO("encode: tiles " << c.rows << "x" << c.cols << ", window " << c.window);
    int64_t reported = 0;
    core::ChunkOptions o = exact(c, kRows, kCols, /*host=*/true);
    o.progress = [&reported](int64_t frames) { reported = frames; };
    core::Run run(*model, core::Device::of(torch::kCPU), core::Op::kEncode, o);
    std::vector<torch::Tensor> parts;
    // The reader's pace: the first frame, then 4 at a time. Before the first window is full, its first
    // tile has run the chunks that came.
    for (int64_t at = 0; at < 13; at += at == 0 ? 1 : 4) {
      const torch::Tensor out = run.push(video.narrow(2, at, at == 0 ? 1 : 4));
      if (out.defined()) parts.push_back(out);
      if (at == 4) {
        CHECK(parts.empty());
        CHECK(reported > 0);  // counted as a quarter (a third) of the frames the lead ran through
      }
    }
    if (auto rest = run.finish(); rest.defined()) parts.push_back(rest);
    const auto tiled = torch::cat(parts, 2);
    REQUIRE(tiled.sizes() == mu.sizes());
    CHECK(relative_error(tiled, mu) <= kTilesExact);
  }
  const auto latents = torch::randn({1, 16, 5, kRows, kCols}, torch::kDouble);
  const auto whole = core::decode_latents(*model, latents, {1});
  for (const bool host : {false, true})
    for (const Cut& c : std::vector<Cut>{{2, 2, 1, 0}, {3, 1, 2, 2}}) {
      INFO("decode: tiles " << c.rows << "x" << c.cols << ", chunk " << c.chunk << ", window " << c.window
                            << (host ? ", host window" : ""));
      std::vector<torch::Tensor> emitted;
      core::ChunkOptions o = exact(c, kRows, kCols, host);
      o.emit = [&emitted](const torch::Tensor& frames) { emitted.push_back(frames.clone()); };
      core::Run run(*model, core::Device::of(torch::kCPU), core::Op::kDecode, o);
      for (int64_t t = 0; t < 5; ++t) CHECK_FALSE(run.push(latents.narrow(2, t, 1)).defined());
      CHECK_FALSE(run.finish().defined());
      // One hand-over per chunk of the last tile: the frames come as the tile makes them.
      const size_t chunks = c.chunk == 1 ? 5 : 3;  // chunks of 2 in windows of 2, 2, 1
      CHECK(emitted.size() == chunks);
      const auto tiled = torch::cat(emitted, 2);
      REQUIRE(tiled.sizes() == whole.sizes());
      CHECK(relative_error(tiled, whole) <= kTilesExact);
    }
}

TEST_CASE("exact tiles shared out among devices equal the one-device run, every grid and window",
          "[exact][bands]") {
  // Note [Exact tiles across devices]: on the CPU the places are threads, each with its own model; the
  // whole-frame part runs in bands across them (Note [Whole-frame part in bands]).
  for (const TinyModel& tiny : tiny_models()) {
    auto model = load_tiny(tiny, torch::kCPU, torch::kDouble);
    if (!model->exact_tiles()) continue;
    INFO(tiny.family);
    const int64_t cols = kCols * 8 / tiny.spatial_factor;
    // The frame's latent rows: the test frame's, or 2 (3 places: two bands of one row, the third place
    // without a band).
    struct Shared {
      int64_t devices;
      Cut cut;
      bool host;
      int64_t rows;
    };
    const int64_t tall = kRows * 8 / tiny.spatial_factor;
    // The one-device run's frames and latents, by latent rows.
    std::map<int64_t, std::pair<torch::Tensor, torch::Tensor>> references;
    for (const auto& [n, c, host, rows] : std::vector<Shared>{{2, {2, 2, 1, 0}, false, tall},
                                                              {2, {1, 3, 2, 2}, true, tall},
                                                              {3, {3, 2, 1, 1}, false, tall},
                                                              {3, {1, 3, 1, 2}, false, 2}}) {
      torch::manual_seed(6);
      const auto latents = torch::randn({1, model->info().latent_channels, 4, rows, cols}, torch::kDouble);
      const auto video =
          torch::rand({1, 3, 9, rows * tiny.spatial_factor, kCols * 8}, torch::kDouble) * 2 - 1;
      if (!references.count(rows))
        references[rows] = {core::decode_latents(*model, latents, {1}),
                            core::encode_video(*model, video, {1})};
      const auto& [decoded, encoded] = references[rows];
      std::vector<std::shared_ptr<core::VaeModel>> models;
      std::vector<core::BandPlace> places;
      for (int64_t i = 0; i < n; ++i) {
        models.push_back(load_tiny(tiny, torch::kCPU, torch::kDouble));
        places.push_back({models.back().get(), &core::Device::of(torch::kCPU)});
      }
      INFO(n << " devices, " << rows << " latent rows, tiles " << c.rows << "x" << c.cols << ", chunk "
             << c.chunk << ", window " << c.window << (host ? ", host window" : ""));
      core::ChunkOptions o = exact(c, rows, cols, host);
      o.bands = places;
      std::vector<int64_t> seen;
      o.progress = [&seen](int64_t frames) { seen.push_back(frames); };
      const auto tiled = core::decode_latents(*model, latents, o);
      REQUIRE(tiled.sizes() == decoded.sizes());
      CHECK(relative_error(tiled, decoded) <= kTilesExact);
      CHECK(seen.size() == static_cast<size_t>(c.rows * c.cols * (c.chunk == 1 ? 4 : 2)));
      CHECK(std::is_sorted(seen.begin(), seen.end()));
      CHECK(relative_error(core::encode_video(*model, video, o), encoded) <= kTilesExact);
      // Handed over whole, once per window.
      std::vector<torch::Tensor> emitted;
      o.emit = [&emitted](const torch::Tensor& frames) { emitted.push_back(frames.clone()); };
      CHECK_FALSE(core::decode_latents(*model, latents, o).defined());
      CHECK(emitted.size() == static_cast<size_t>(c.window == 0 ? 1 : (4 + c.window - 1) / c.window));
      CHECK(relative_error(torch::cat(emitted, 2), decoded) <= kTilesExact);
      // Each tile runs on its place's model, the places chosen by the tiles' work (core::places_by_work):
      // with the last place's trunk changed, exactly its tiles' pixels change.
      o.emit = {};
      for (const char* trunk : {"decoder.upsamples.", "decoder.head."})
        scale_parameters(*models.back(), trunk, 1.01);
      const auto changed = core::decode_latents(*model, latents, o);
      const core::TileGrid grid = core::TileGrid::parts(rows, cols, c.rows, c.cols);
      const int64_t f = tiny.spatial_factor;
      std::vector<double> works;
      for (int64_t i = 0; i < grid.count(); ++i) {
        const auto [r0, r1] = grid.part_rows(i / c.cols);
        const auto [c0, c1] = grid.part_cols(i % c.cols);
        const core::Area part{{r0, r1}, {c0, c1}};
        works.push_back(static_cast<double>(part.rows.size() * part.cols.size()) *
                        model->tile_work(false, part, rows, cols));
      }
      const std::vector<size_t> place = core::places_by_work(works, static_cast<size_t>(n));
      CHECK(std::count(place.begin(), place.end(), static_cast<size_t>(n - 1)) > 0);
      for (int64_t i = 0; i < grid.count(); ++i) {
        const auto [r0, r1] = grid.part_rows(i / c.cols);
        const auto [c0, c1] = grid.part_cols(i % c.cols);
        auto area = [&](const torch::Tensor& x) {
          return x.narrow(3, r0 * f, (r1 - r0) * f).narrow(4, c0 * f, (c1 - c0) * f);
        };
        INFO("tile " << i);
        const double error = relative_error(area(changed), area(decoded));
        if (place[i] == static_cast<size_t>(n - 1))
          CHECK(error > 1e-6);
        else
          CHECK(error <= kTilesExact);
      }
      // The whole-frame part runs in bands, one per place while the frame has rows for them: with the last
      // band's whole-frame layers changed (on a place that is not the run's own), the frames and the latents
      // change. Run on the first place alone, it would not see the change.
      const auto last = static_cast<size_t>(std::min(n, rows) - 1);
      REQUIRE(last > 0);
      scale_parameters(*models[last], "decoder.conv1.", 1.01);
      CHECK(relative_error(core::decode_latents(*model, latents, o), changed) > 1e-6);
      scale_parameters(*models[last], "encoder.head.", 1.01);
      CHECK(relative_error(core::encode_video(*model, video, o), encoded) > 1e-6);
    }
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

TEST_CASE("exact tiles are shared out among places by their work, the largest first", "[exact]") {
  // Note [Exact tiles across devices]: 4, 3, 3, 2, 2, 2 on two places end 8 and 8 (in turn: 9 and 7).
  const std::vector<size_t> where = core::places_by_work({4, 3, 3, 2, 2, 2}, 2);
  CHECK(where == std::vector<size_t>{0, 1, 1, 0, 0, 1});
  double load[2] = {0, 0};
  const double works[] = {4, 3, 3, 2, 2, 2};
  for (size_t i = 0; i < where.size(); ++i) load[where[i]] += works[i];
  CHECK(load[0] == 8);
  CHECK(load[1] == 8);
  // Equal works go round the places in order; one place takes everything; no jobs, no places.
  CHECK(core::places_by_work({1, 1, 1, 1, 1}, 3) == std::vector<size_t>{0, 1, 2, 0, 1});
  CHECK(core::places_by_work({5, 1, 2}, 1) == std::vector<size_t>{0, 0, 0});
  CHECK(core::places_by_work({}, 4).empty());
  // An edge tile of a real grid costs less than one inside it: its margins stop at the frame.
  const auto model = load_tiny(tiny_model("wan2.1-vae"), torch::kCPU, torch::kDouble);
  const core::Area edge{{0, 8}, {0, 8}}, inside{{8, 16}, {8, 16}};
  CHECK(model->tile_work(false, edge, 24, 24) < model->tile_work(false, inside, 24, 24));
}

}  // namespace vaecodec::test

namespace vaecodec::test {

// Run by CTest as nan_empty, with VAECODEC_TEST_NAN_EMPTY=1 (tests/main.cpp): every tensor made without
// values starts as NaN, so a tile that read memory nothing wrote (a margin, a cache, a host window) would
// show as NaN.
TEST_CASE("exact tiles read no memory that nothing wrote", "[.][nan-empty]") {
  REQUIRE(std::getenv("VAECODEC_TEST_NAN_EMPTY") != nullptr);
  REQUIRE(torch::empty({8}, torch::kDouble).isnan().all().item<bool>());
  auto model = load_tiny(tiny_model("wan2.1-vae"), torch::kCPU, torch::kDouble);
  torch::manual_seed(4);
  const auto latents = torch::randn({1, 16, 3, kRows, kCols}, torch::kDouble);
  const auto whole = core::decode_latents(*model, latents, {1});
  const auto tiled = core::decode_latents(*model, latents, exact({2, 2, 1, 2}, kRows, kCols, true));
  REQUIRE(tiled.sizes() == whole.sizes());
  CHECK(relative_error(tiled, whole) <= kTilesExact);
}

}  // namespace vaecodec::test
