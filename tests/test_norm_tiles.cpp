// SeedVR2's tiles through time (Note [Norms of tiles through time] in core/split/exact_tiles.h): how close
// the tiled decode and encode come to the untiled run on the tiny model (they are not exact: each tile's
// norms see the tile and its context, not the frame), that a wider context comes closer, that the result does
// not depend on chunks, windows or where the window waits, the plans and refusals the planner gives SeedVR2's
// users, and the tile overlap and norm context they may choose.
#include <catch2/catch.hpp>

#include <cmath>
#include <iostream>

#include "core/engine.h"
#include "core/error.h"
#include "core/models/registry.h"
#include "core/plan_for.h"
#include "core/presets.h"
#include "core/safetensors.h"
#include "io/run_plan.h"
#include "tests/gpu_support.h"
#include "tests/norm_tile_case.h"
#include "tests/tiny_models.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
// The test frames and grid (tests/norm_tile_case.h).
using tile_case::blended_tiles, tile_case::kCols, tile_case::kFrames, tile_case::kRows,
    tile_case::tiny_seedvr2;
// What the tiled runs must stay within, relative L2 against the untiled run (measured: see the tests' lines;
// a random-weight model on a picture whose halves differ, which is hard on per-tile statistics).
constexpr double kDecodeBound = 0.3, kEncodeBound = 0.3;

// The test frames, as halves_video makes them.
torch::Tensor uneven_video() {
  return halves_video(kRows, kCols, kFrames);
}

// 1x2 tiles through time of 14x16 latent pixels sharing 4, with `context` around each; `host`: the window's
// frames wait in host memory, and a decode's features there too unless `features_on_device`.
core::ChunkOptions through_time(int64_t context, int64_t chunk = 1, int64_t window = 0, bool host = false,
                                bool features_on_device = false) {
  core::ChunkOptions o;
  o.latent_frames = chunk;
  o.tiles = core::TileGrid::cover_through_time(kRows, kCols, tile_case::kTile, tile_case::kOverlap, context);
  o.window = window;
  o.window_store = !host                ? core::WindowStore::kDevice
                   : features_on_device ? core::WindowStore::kHostFrames
                                        : core::WindowStore::kHostFeatures;
  o.kind = core::SplitKind::kExactTiles;
  return o;
}

// One tile over the whole frame, through time in windows of one latent frame: the split into a whole-frame
// part and a trunk alone, which sees the whole frame.
core::ChunkOptions one_tile() {
  core::ChunkOptions o;
  o.tiles = core::TileGrid::whole(kRows, kCols);
  o.tiles.through_time = true;
  o.window = 1;
  o.kind = core::SplitKind::kExactTiles;
  return o;
}

struct Quality {
  double relative = 0, db = 0;
};

Quality quality(const torch::Tensor& got, const torch::Tensor& reference) {
  return {relative_error(got, reference), psnr(got.clamp(-1, 1), reference.clamp(-1, 1))};
}

core::PlanRequest released_request(core::Op op, int64_t width, int64_t height) {
  static std::shared_ptr<core::VaeModel> model = [] {
    const auto& family = core::find_model_family("seedvr2-vae");
    auto m = family.build(family.released_config);
    m->to(torch::kBFloat16);
    return m;
  }();
  return core::plan_request(*model, {op, width, height, /*latent_frames=*/21});  // 81 frames
}

}  // namespace

TEST_CASE("SeedVR2 runs tiles through time, not exact ones, and the Wan families exact ones",
          "[norm-tiles]") {
  for (const TinyModel& tiny : tiny_models()) {
    INFO(tiny.family);
    auto model = load_tiny(tiny);
    CHECK(model->tiles_through_time());
    CHECK(model->exact_tiles() == (tiny.family != "seedvr2-vae"));
  }
}

TEST_CASE("SeedVR2's tiled decode comes close to the untiled one, closer with a wider norm context",
          "[norm-tiles]") {
  auto model = tiny_seedvr2();
  const auto latents = core::encode_video(*model, uneven_video(), {1});
  const auto whole = core::decode_latents(*model, latents, {1});
  // The split into a whole-frame part and a trunk, alone: one tile over the frame sees the frame.
  CHECK(relative_error(core::decode_latents(*model, latents, one_tile()), whole) <= 1e-5);
  const Quality local = quality(core::decode_latents(*model, latents, through_time(0)), whole);
  // A window of one latent frame kept in host memory, chunks of one: each frame's statistics are its own, so
  // nothing changes but where the frames wait (the whole clip in one window, below).
  const auto wide_frames = core::decode_latents(*model, latents, through_time(4, 1, 1, true));
  const Quality wide = quality(wide_frames, whole);
  const Quality old = quality(core::decode_latents(*model, latents, blended_tiles()), whole);
  std::cout << "norm tiles: tiny SeedVR2 decode 192x128 x5, 1x2 tiles of 14x16 (overlap 4) against untiled: "
            << "through time, context 0: " << local.relative << " (" << local.db
            << " dB); context 4: " << wide.relative << " (" << wide.db
            << " dB); blended (BlendedTiles): " << old.relative << " (" << old.db << " dB)\n";
  CHECK(wide.relative < local.relative);
  CHECK(wide.relative < old.relative);
  CHECK(wide.relative < kDecodeBound);
  CHECK(relative_error(core::decode_latents(*model, latents, through_time(4, 2)), wide_frames) <= 1e-5);
}

TEST_CASE("SeedVR2's tiled encode comes close to the untiled one, closer with a wider norm context",
          "[norm-tiles]") {
  auto model = tiny_seedvr2();
  const auto video = uneven_video();
  const auto whole = core::encode_video(*model, video, {1});
  CHECK(relative_error(core::encode_video(*model, video, one_tile()), whole) <= 1e-5);
  const double local = relative_error(core::encode_video(*model, video, through_time(0)), whole);
  const auto wide_latents = core::encode_video(*model, video, through_time(4, 1, 1, true));
  const double wide = relative_error(wide_latents, whole);
  const double old = relative_error(core::encode_video(*model, video, blended_tiles()), whole);
  std::cout << "norm tiles: tiny SeedVR2 encode 192x128 x5, 1x2 tiles of 14x16 (overlap 4), relative error "
            << "against untiled: through time, context 0: " << local << "; context 4: " << wide
            << "; blended (BlendedTiles): " << old << "\n";
  CHECK(wide < local);
  CHECK(wide < old);
  CHECK(wide < kEncodeBound);
  CHECK(relative_error(core::encode_video(*model, video, through_time(4, 2)), wide_latents) <= 1e-5);
  // Note [An encode window's features in host memory]: where the features wait changes nothing, for the whole
  // clip in one window and in windows of two latent frames (whose tiles' caches are parked between them).
  for (const int64_t window : {0, 2}) {
    INFO("window " << window);
    const auto on_device = core::encode_video(*model, video, through_time(4, 1, window));
    CHECK(torch::equal(core::encode_video(*model, video, through_time(4, 1, window, true)), on_device));
    CHECK(torch::equal(core::encode_video(*model, video, through_time(4, 1, window, true, true)), on_device));
  }
}

TEST_CASE("SeedVR2 at 1080p and 4K plans tiles through time on 8-24 GB cards and 12 GiB of host memory",
          "[norm-tiles][planner]") {
  for (core::Op op : {core::Op::kDecode, core::Op::kEncode})
    for (const auto& [w, h] : std::vector<std::pair<int64_t, int64_t>>{{1920, 1080}, {3840, 2160}})
      for (const std::string& budget : {"rtx4060-8g", "rtx5070ti-16g", "rtx4090-24g", "12G"}) {
        core::PlannerOptions options =
            budget == "12G" ? core::PlannerOptions{} : core::find_preset(budget).planner;
        if (budget == "12G") options.budget_bytes = 12 * kGiB;
        options.host_budget_bytes = 12 * kGiB;
        const core::PlanRequest r = released_request(op, w, h);
        CHECK(r.tiles_through_time);
        CHECK_FALSE(r.exact_tiles);
        core::Plan p;
        REQUIRE_NOTHROW(p = core::plan_run(r, options));
        INFO(p.summary());
        if (!p.tiles.tiled()) {  // 1080p encode fits a 24 GB card whole
          CHECK(p.norm_statistics() == "the whole frame");
          continue;
        }
        const std::string kind = op == core::Op::kDecode ? "crop" : "through time";  // --tile-norms auto
        CHECK(p.tile_kind() == kind);
        CHECK(p.estimate.total() <= static_cast<int64_t>(static_cast<double>(options.budget_bytes) * 0.85));
        CHECK(p.estimate.host <= 12 * kGiB);
        const nlohmann::json j = p.to_json();
        CHECK(j.at("tile_kind") == kind);
        CHECK(j.at("tiles").at("context").get<int64_t>() == p.tiles.context);
        CHECK_THAT(j.at("norm_statistics").get<std::string>(), Catch::Contains("around it"));
      }
  // Where the whole frame fits, it runs: its norms see the frame.
  const core::Plan whole = core::plan_run(released_request(core::Op::kDecode, 1920, 1080),
                                          core::PlannerOptions{.budget_bytes = 80 * kGiB});
  CHECK_FALSE(whole.tiles.tiled());
  CHECK(whole.norm_statistics() == "the whole frame");
}

TEST_CASE("SeedVR2's plans never cost more with more device memory, once exact stay exact",
          "[norm-tiles][planner]") {
  // Note [More memory is never slower] in core/planner.cpp: the 4K encode in 16 GB once took tiles whose
  // norms saw more than 12 GB's at 4% more time. The whole frame with its cache streamed wins over tiles
  // where it fits within 1.5x, even at more time than tiles (Note [Planner]: exactness first); among each
  // kind more memory is never slower, and a larger budget never goes back to tiles.
  for (const int64_t host_gib : {16, 20})
    for (core::Op op : {core::Op::kDecode, core::Op::kEncode})
      for (const auto& [w, h] : std::vector<std::pair<int64_t, int64_t>>{{1920, 1080}, {3840, 2160}}) {
        double last = 0;
        bool exact = false;
        int streamed = 0;
        for (int64_t gib = 6; gib <= 40; gib += 2) {
          const core::PlannerOptions options{.budget_bytes = gib * kGiB,
                                             .host_budget_bytes = host_gib * kGiB};
          core::Plan p;
          try {
            p = core::plan_run(released_request(op, w, h), options);
          } catch (const Error&) {
            continue;  // does not fit yet
          }
          INFO(core::op_name(op) << " " << w << "x" << h << " in " << gib << " GiB, host " << host_gib
                                 << " GiB: " << p.summary());
          if (exact) CHECK_FALSE(p.tiles.tiled());
          if (last > 0 && exact == !p.tiles.tiled()) CHECK(p.seconds <= last);
          if (!p.tiles.tiled()) CHECK(p.estimate.host <= host_gib * kGiB);
          streamed += p.offload && !p.tiles.tiled();
          exact = !p.tiles.tiled();
          last = p.seconds;
        }
        CHECK(last > 0);
        // 81 frames do not pay for a streamed cache's pinning (tests/test_cache_stream.cpp has the long clips
        // that do); 4K's activations alone pass 40 GB.
        CHECK(streamed == 0);
      }
}

TEST_CASE(
    "SeedVR2's 4K decode in 8 GB keeps the window's frames and features in host memory, and its device peak "
    "is the whole-frame part's or the tiles'",
    "[norm-tiles][planner]") {
  // Note [A window's features in host memory] and Note [The whole-frame cache ends with the clip] in
  // core/split/exact_tiles.cpp; Note [Decode tiles through time, measured] in core/exact_plan.cpp. The
  // frame tiles' (--tile-norms frame): crop tiles have no features (tests/test_crop_tiles.cpp).
  core::PlannerOptions options = core::find_preset("rtx4060-8g").planner;
  options.tile_norms = core::TileNorms::kFrame;
  options.host_budget_bytes = 16 * kGiB;
  const core::Plan p = core::plan_run(released_request(core::Op::kDecode, 3840, 2160), options);
  INFO(p.summary());
  REQUIRE(p.tiles.tiled());
  CHECK(p.window == 0);  // one window: every tile's cache parked would be ~90 GiB at 4K
  CHECK(p.host_window());
  CHECK(p.host_features());
  CHECK(p.to_json().at("host_features") == true);
  const double frames = 3.0 * 81 * 3840 * 2160 * 2, features = 512.0 * 21 * 270 * 480 * 2;  // bf16
  CHECK(static_cast<double>(p.estimate.host) >= frames + features);
  // Neither is on the device: with the features there the plan would not fit the usable 85% of 7 GiB.
  const double usable = 0.85 * static_cast<double>(options.budget_bytes);
  CHECK(static_cast<double>(p.estimate.total()) <= usable);
  CHECK(static_cast<double>(p.estimate.total()) + features > usable);
  // The whole-frame part's own peak is counted: its cache (ten 512-channel convolutions keeping two frames,
  // 10240 values per latent pixel) beside the weights.
  CHECK(static_cast<double>(p.estimate.total()) >=
        static_cast<double>(p.estimate.weights) + 10240.0 * 270 * 480 * 2);
  // An encode's features likewise (Note [An encode window's features in host memory] in
  // core/split/exact_tiles_encode.cpp): the device holds one tile's, in float32 where tiles blend; with them
  // there, 6x9 tiles at 1.99x the untiled time were the most that fitted.
  const core::Plan encode_8g = core::plan_run(released_request(core::Op::kEncode, 3840, 2160), options);
  INFO(encode_8g.summary());
  CHECK(encode_8g.host_window());
  CHECK(encode_8g.host_features());
  CHECK(static_cast<double>(encode_8g.estimate.host) >= frames + features);
  CHECK(static_cast<double>(encode_8g.estimate.io) < features);
  CHECK(static_cast<double>(encode_8g.estimate.total()) <= usable);
  CHECK(encode_8g.tiles.count() < 6 * 9);
  // Where the features fit beside a tile they can stay on the device: in 10 GB with 6 GiB of host memory
  // the window's frames wait there and its features do not (Note [Features in host memory, measured] in
  // core/exact_plan.cpp); an encode's stay there too where host memory has no room for them beside its
  // window.
  options.budget_bytes = 10 * kGiB;
  options.host_budget_bytes = 6 * kGiB;
  const core::Plan roomy = core::plan_run(released_request(core::Op::kDecode, 3840, 2160), options);
  INFO(roomy.summary());
  CHECK(roomy.host_window());
  CHECK_FALSE(roomy.host_features());
  CHECK_FALSE(roomy.to_json().at("host_features").get<bool>());
  options.host_budget_bytes =
      7 * kGiB;  // the encode window's 21 pinned pieces take 5.25 GiB (Note [Pinned blocks])
  const core::Plan encode = core::plan_run(released_request(core::Op::kEncode, 3840, 2160), options);
  CHECK(encode.host_window());
  CHECK_FALSE(encode.host_features());
}

TEST_CASE("a host window's pinned blocks and a file run's reader and writer are in the host estimate",
          "[norm-tiles][planner]") {
  // Note [Pinned blocks] in core/plan_model.cpp: SeedVR2's 4K encode in 8 GB keeps its window in host memory,
  // 21 pieces of four frames in bf16 (190 MiB), each a block of 256 MiB.
  core::PlannerOptions options = core::find_preset("rtx4060-8g").planner;
  options.host_budget_bytes = 16 * kGiB;
  const core::PlanRequest r = released_request(core::Op::kEncode, 3840, 2160);
  const core::Plan p = core::plan_run(r, options);
  INFO(p.summary());
  REQUIRE(p.host_window());
  REQUIRE(p.chunk == 1);
  CHECK(p.estimate.host >= kGiB + 21 * (int64_t{256} << 20));
  // What the caller holds is added to the estimate, the plan unchanged.
  options.host_reserved_bytes = kGiB;
  const core::Plan held = core::plan_run(r, options);
  CHECK(held.chunk == p.chunk);
  CHECK(held.window_store == p.window_store);
  CHECK(held.tiles.rows == p.tiles.rows);
  CHECK(held.tiles.cols == p.tiles.cols);
  CHECK(held.estimate.host == p.estimate.host + kGiB);
  // Note [A file run's host memory] in io/run_plan.cpp: a 4K decode's x264 with 24 threads and the writer's
  // queue; an encode's reader with 8 decoder threads; a round trip both.
  const core::ModelFamily& family = core::find_model_family("seedvr2-vae");
  const io::Geometry g = io::Geometry::of(family.describe(family.released_config), 3840, 2160);
  const double px = 3840.0 * 2160;
  const int64_t writer = static_cast<int64_t>(px * (65 + 10.5 * 24) + (5 + 4) * 3 * px);
  const int64_t reader = 6 * (int64_t{128} << 20) + static_cast<int64_t>((8 + 16) * 1.5 * px);
  const io::RunPlanOptions threads{.chunk = 1, .encoder_threads = 24, .decoder_threads = 8};
  CHECK(io::pipeline_host_bytes(core::Op::kDecode, g, threads) == writer);
  CHECK(io::pipeline_host_bytes(core::Op::kEncode, g, threads) == reader);
  CHECK(io::pipeline_host_bytes(core::Op::kRoundtrip, g, threads) == writer + reader);
  // `plan` counts them as a file run does.
  const CliResult cli = run_cli(
      "plan --model seedvr2-vae --op encode --size 3840x2160 --frames 81 --preset rtx4060-8g --host-memory "
      "16G "
      "--json");
  REQUIRE(cli.status == 0);
  const int64_t file = io::pipeline_host_bytes(core::Op::kEncode, g, {.chunk = 1});
  CHECK(nlohmann::json::parse(cli.out).at("plan").at("host_estimate_bytes").get<int64_t>() ==
        p.estimate.host + file);
}

TEST_CASE("SeedVR2 plans that fit neither budget are refused naming the budgets that would do",
          "[norm-tiles][planner]") {
  const core::PlanRequest r = released_request(core::Op::kDecode, 3840, 2160);
  core::PlannerOptions options = core::find_preset("rtx4060-8g").planner;
  options.tile_norms = core::TileNorms::kFrame;  // the figures below are frame tiles' (crop tiles: below)
  SECTION("a host budget given too small for one tile's window: a usage error naming the smallest") {
    options.budget_bytes = 10 * kGiB;  // 4K decode fits 10 GB's device budget with its window in host memory
    options.host_budget_bytes = 2 * kGiB;
    options.host_budget_note = "--host-memory";
    options.host_budget_given = true;
    try {
      core::plan_run(r, options);
      FAIL("planned 4K in 2 GiB of host memory");
    } catch (const UsageError& e) {
      // The window's frames (4K x81 in bf16: 3.9 GiB), two tiles' frames on their way into it (Note
      // [Windows in host memory] in core/split/exact_tiles.cpp), their pinned blocks' rounding (Note [Pinned
      // blocks] in core/exact_plan.cpp) and the process's 1 GiB; in 10 GB the features fit on the device
      // (Note [A window's features in host memory]).
      const std::string m = e.what();
      CHECK_THAT(m, Catch::Contains("needs 5.13 GiB of host memory, more than the 2 GiB (--host-memory)") &&
                        Catch::Contains("give --host-memory 5.2G or more, or --vram 11.2G or more"));
      CHECK(m.find('\n') == std::string::npos);
    }
    options.host_budget_given = false;  // what the host has available: not the user's mistake
    CHECK_THROWS_MATCHES(core::plan_run(r, options), Error,
                         Catch::Matchers::Predicate<Error>(
                             [](const Error& e) { return dynamic_cast<const UsageError*>(&e) == nullptr; }));
  }
  SECTION("a device budget too small for any tile: both budgets named") {
    options.budget_bytes = kGiB;
    options.host_budget_bytes = 12 * kGiB;
    try {
      core::plan_run(r, options);
      FAIL("planned 4K in 1 GiB");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("does not fit in 1 GiB") && Catch::Contains("give --vram") &&
                               Catch::Contains("within the host's 12 GiB"));
    }
  }
}

TEST_CASE("cli plan says which tiles run for SeedVR2 and what their norms see", "[norm-tiles][cli]") {
  const CliResult r = run_cli(
      "plan --model seedvr2-vae --size 1920x1080 --op decode --preset rtx4060-8g --host-memory 4G --json");
  REQUIRE(r.status == 0);
  const auto plan = nlohmann::json::parse(r.out).at("plan");
  CHECK(plan.at("tile_kind") == "crop");
  CHECK(plan.at("exact_tiles") == false);
  CHECK_THAT(plan.at("norm_statistics").get<std::string>(), Catch::Contains("latent px around it"));
  const CliResult line = run_cli(
      "plan --model seedvr2-vae --size 1920x1080 --op decode --preset rtx4060-8g "
      "--host-memory 4G");
  REQUIRE(line.status == 0);
  CHECK_THAT(line.out, Catch::Contains("crop tiles") && Catch::Contains("norms: each tile and"));
  const CliResult small = run_cli(
      "plan --model seedvr2-vae --size 3840x2160 --op decode --vram 10G --host-memory 1500M "
      "--tile-norms frame");
  CHECK(small.status == 2);
  // The plan's 5.13 GiB and what a file run's writer holds (Note [A file run's host memory] in
  // io/run_plan.cpp: x264's threads follow the host's cores, at least 0.8 GiB at 4K).
  const std::string give = "give --host-memory ";
  REQUIRE(small.err.find(give) != std::string::npos);
  CHECK(std::stod(small.err.substr(small.err.find(give) + give.size())) >= 5.9);
  CHECK_THAT(small.err, Catch::Contains("G or more"));
  CHECK(std::count(small.err.begin(), small.err.end(), '\n') == 1);
}

TEST_CASE("cli plan takes --tile-overlap and --norm-context for SeedVR2's tiles and reports them",
          "[norm-tiles][cli]") {
  const std::string plan = "plan --model seedvr2-vae --size 1920x1080 --op decode --tile 64 --json";
  const auto defaults = nlohmann::json::parse(run_cli(plan).out);
  CHECK(defaults.at("tile_overlap") == 8);
  CHECK(defaults.at("norm_context") == 8);
  CHECK(defaults.at("plan").at("tiles").at("overlap") == 8);
  const CliResult given = run_cli(plan + " --tile-overlap 24 --norm-context 12");
  REQUIRE(given.status == 0);
  const auto j = nlohmann::json::parse(given.out);
  CHECK(j.at("tile_overlap") == 24);
  CHECK(j.at("norm_context") == 12);
  const auto& tiles = j.at("plan").at("tiles");
  CHECK(tiles.at("overlap") == 24);
  CHECK(tiles.at("context") == 12);  // given: taken, not the planner's choice between none and it
  CHECK(tiles.at("cols") == 6);      // 240 latent columns in tiles of 64 sharing 24 (5 when sharing 8)
  CHECK(defaults.at("plan").at("tiles").at("cols") == 5);
  const auto none = nlohmann::json::parse(run_cli(plan + " --norm-context 0").out);
  CHECK(none.at("plan").at("tiles").at("context") == 0);
  const CliResult line =
      run_cli("plan --model seedvr2-vae --size 1920x1080 --tile 64 --tile-overlap 24 --norm-context 8");
  CHECK_THAT(line.out, Catch::Contains("(overlap 24; norms: each tile and 8 latent px around it"));

  check_one_line(run_cli("plan --tile-overlap -1"), 2, "--tile-overlap: Value -1 not in range 0 to 2048");
  check_one_line(run_cli("plan --norm-context 2049"), 2, "--norm-context: Value 2049 not in range 0 to 2048");
  check_one_line(run_cli("plan --norm-context eight"), 2, "--norm-context");
  check_one_line(run_cli("plan --model seedvr2-vae --tile 16 --tile-overlap 16"), 2,
                 "a tile of 16x16 latent pixels is not larger than its overlap of 16");
}

TEST_CASE("bench's SeedVR2 tiles come closer to the untiled run with the --norm-context given",
          "[norm-tiles][cli]") {
  // The tiny model states its 8 norm groups in the file (Note [Config in the weights file]).
  TempDir dir;
  const TinyModel tiny = tiny_model("seedvr2-vae");
  const auto weights = dir / "seedvr2-tiny.safetensors";
  core::write_safetensors(weights, read_tensors(tiny.folder / "weights.safetensors"),
                          {{"vaecodec_config", read_json(tiny.folder / "meta.json").at("config").dump()}});
  auto bench = [&](const std::string& options) {
    const CliResult r = run_cli("bench --weights " + quote(weights) +
                                " --device cpu --dtype fp32 --size 128x128 --frames 5 --op decode --runs 1"
                                " --warmup 0 --compare-untiled --json --tile 10 --tile-norms frame " +
                                options);
    INFO(r.err);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out.substr(r.out.find('{')));
  };
  const auto local = bench("--tile-overlap 4 --norm-context 0");
  const auto wide = bench("--tile-overlap 4 --norm-context 4");
  const auto wider_overlap = bench("--tile-overlap 6 --norm-context 0");
  CHECK(local.at("plan").at("tiles").at("context") == 0);
  CHECK(wide.at("plan").at("tiles").at("context") == 4);
  CHECK(wider_overlap.at("plan").at("tiles").at("overlap") == 6);
  CHECK(wider_overlap.at("plan").at("tiles").at("cols") == 3);  // 16 latent columns: 2 tiles of 10 share 4
  const double e0 = local.at("tiled_vs_untiled_relative_l2"), e4 = wide.at("tiled_vs_untiled_relative_l2"),
               o6 = wider_overlap.at("tiled_vs_untiled_relative_l2");
  std::cout
      << "norm tiles: bench tiny SeedVR2 decode 128x128 x5, tiles of 10 against untiled: overlap 4 context "
         "0: "
      << e0 << ", context 4: " << e4 << "; overlap 6 context 0: " << o6 << "\n";
  CHECK(e4 < e0);
  CHECK(o6 != e0);
}

TEST_CASE(
    "on CUDA SeedVR2's tiles through time park the whole-frame cache and keep a host window's features "
    "in host memory, and nothing changes",
    "[norm-tiles][gpu]") {
  if (!cuda_here()) return;
  auto cpu = tiny_seedvr2();
  auto gpu = load_tiny(tiny_model("seedvr2-vae"), torch::kCUDA, torch::kFloat);
  const auto latents = core::encode_video(*cpu, uneven_video(), {1});
  const auto reference = core::decode_latents(*cpu, latents, through_time(4));
  const auto on_device = core::decode_latents(*gpu, latents, through_time(4)).cpu();
  CHECK(relative_error(on_device, reference) <= 1e-3);  // the same function (cuDNN's float32 sums differ)
  // Windows of one latent frame park the tiles' caches and the whole-frame part's (Note [The whole-frame
  // cache ends with the clip] in core/split/exact_tiles.cpp); a host window keeps the window's frames and
  // features in host memory unless they stay on the device (Note [A window's features in host memory]):
  // copies only.
  struct Case {
    int64_t window;
    bool host, features_on_device;
  };
  for (const Case& c :
       std::vector<Case>{{0, true, false}, {0, true, true}, {1, false, false}, {1, true, false}}) {
    INFO("window " << c.window << (c.host ? ", in host memory" : ", on the device")
                   << (c.host && c.features_on_device ? ", features on the device" : ""));
    const auto frames =
        core::decode_latents(*gpu, latents, through_time(4, 1, c.window, c.host, c.features_on_device)).cpu();
    CHECK(relative_error(frames, on_device) <= 1e-6);
  }
  // An encode's features in host memory (Note [An encode window's features in host memory] in
  // core/split/exact_tiles_encode.cpp): each tile's come down pinned while the next tile runs; copies only.
  const auto video = uneven_video();
  for (const int64_t window : {0, 2}) {
    INFO("encode, window " << window);
    const auto device_features =
        core::encode_video(*gpu, video, through_time(4, 1, window, true, true)).cpu();
    CHECK(relative_error(device_features, core::encode_video(*cpu, video, through_time(4, 1, window))) <=
          1e-3);
    CHECK(torch::equal(core::encode_video(*gpu, video, through_time(4, 1, window, true)).cpu(),
                       device_features));
  }
}

}  // namespace vaecodec::test
