// SeedVR2's crop tiles (Note [Crop tiles] in core/split/exact_tiles.h): each tile runs the whole model on its
// crop through time. Without a context they are the blended tiles of BlendedTiles (every tile the whole model
// on its own pixels, chunk by chunk) run another way; with one, each tile's crop is wider than what it
// writes. The result does not depend on chunks or windows; the planner takes them by default and --tile-norms
// frame gives the tiles through time of Note [Norms of tiles through time] instead.
#include <catch2/catch.hpp>

#include <algorithm>
#include <iostream>

#include <nlohmann/json.hpp>

#include "core/engine.h"
#include "core/error.h"
#include "core/models/registry.h"
#include "core/plan_for.h"
#include "core/planner.h"
#include "io/run_plan.h"
#include "tests/gpu_support.h"
#include "tests/norm_tile_case.h"
#include "tests/tiny_models.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

// The frames and grid of tests/test_norm_tiles.cpp (tests/norm_tile_case.h).
using tile_case::blended_tiles, tile_case::kCols, tile_case::kFrames, tile_case::kOverlap, tile_case::kRows,
    tile_case::kTile, tile_case::tiny_seedvr2;

core::ChunkOptions crop_tiles(int64_t context, int64_t chunk = 1, int64_t window = 0, bool host = false) {
  core::ChunkOptions o;
  o.latent_frames = chunk;
  o.tiles = core::TileGrid::cover_crop(kRows, kCols, kTile, kOverlap, context);
  o.window = window;
  o.window_store = host ? core::WindowStore::kHostFrames : core::WindowStore::kDevice;
  o.kind = core::SplitKind::kExactTiles;
  return o;
}

core::ChunkOptions frame_tiles(int64_t context) {
  core::ChunkOptions o = crop_tiles(context);
  o.tiles = core::TileGrid::cover_through_time(kRows, kCols, kTile, kOverlap, context);
  return o;
}

}  // namespace

TEST_CASE("SeedVR2's crop tiles without a context are the blended tiles run through time", "[crop-tiles]") {
  auto model = tiny_seedvr2();
  const auto video = halves_video(kRows, kCols, kFrames);
  const auto latents = core::encode_video(*model, video, {1});
  const auto blended = core::decode_latents(*model, latents, blended_tiles());
  const auto crop = core::decode_latents(*model, latents, crop_tiles(0));
  CHECK(relative_error(crop, blended) <= 1e-5);
  CHECK(relative_error(core::encode_video(*model, video, crop_tiles(0)),
                       core::encode_video(*model, video, blended_tiles())) <= 1e-5);
  // A context changes what the tiles compute: they are not the blended tiles any more.
  CHECK(relative_error(core::decode_latents(*model, latents, crop_tiles(4)), blended) > 1e-3);
}

TEST_CASE("SeedVR2's crop tiles give the same frames and latents for any chunk and window", "[crop-tiles]") {
  auto model = tiny_seedvr2();
  const auto video = halves_video(kRows, kCols, kFrames);
  const auto latents = core::encode_video(*model, video, {1});
  const auto decoded = core::decode_latents(*model, latents, crop_tiles(4));
  const auto encoded = core::encode_video(*model, video, crop_tiles(4));
  // Chunks of two, and windows of one latent frame in host memory (each tile's cache parked between them).
  CHECK(relative_error(core::decode_latents(*model, latents, crop_tiles(4, 2)), decoded) <= 1e-5);
  CHECK(relative_error(core::decode_latents(*model, latents, crop_tiles(4, 1, 1, true)), decoded) <= 1e-5);
  CHECK(relative_error(core::encode_video(*model, video, crop_tiles(4, 2)), encoded) <= 1e-5);
  CHECK(relative_error(core::encode_video(*model, video, crop_tiles(4, 1, 1, true)), encoded) <= 1e-5);
  // Against the untiled run: printed beside the tiles through time of the same grid (the trained model's
  // comparison is python/tests/test_seedvr2_tiles.py's).
  const auto whole_frames = core::decode_latents(*model, latents, {1});
  const auto whole_latents = core::encode_video(*model, video, {1});
  std::cout << "crop tiles: tiny SeedVR2 192x128 x5, 1x2 tiles of 14x16 (overlap 4), context 4, relative L2 "
            << "against untiled: decode " << relative_error(decoded, whole_frames) << " (frame tiles "
            << relative_error(core::decode_latents(*model, latents, frame_tiles(4)), whole_frames)
            << "), encode " << relative_error(encoded, whole_latents) << " (frame tiles "
            << relative_error(core::encode_video(*model, video, frame_tiles(4)), whole_latents) << ")\n";
  CHECK(relative_error(decoded, whole_frames) < 0.5);
  CHECK(relative_error(encoded, whole_latents) < 0.5);
}

TEST_CASE("SeedVR2's planner decodes with crop tiles and encodes with frame tiles unless told otherwise",
          "[crop-tiles][planner]") {
  const auto& family = core::find_model_family("seedvr2-vae");
  auto model = family.build(family.released_config);
  model->to(torch::kBFloat16);
  for (core::Op op : {core::Op::kDecode, core::Op::kEncode}) {
    INFO(core::op_name(op));
    const bool decode = op == core::Op::kDecode;
    const core::PlanRequest request = core::plan_request(*model, {op, 1920, 1080, /*latent_frames=*/21});
    core::PlannerOptions options;
    options.budget_bytes = 8 * (int64_t{1} << 30);
    options.host_budget_bytes = 12 * (int64_t{1} << 30);
    const core::Plan chosen = core::plan_run(request, options);  // --tile-norms auto
    REQUIRE(chosen.tiles.tiled());
    CHECK(chosen.crop_for(!decode) == decode);
    CHECK(chosen.tile_kind() == (decode ? "crop" : "through time"));
    CHECK(chosen.to_json().at("tiles").at(decode ? "crop_decode" : "crop_encode") == decode);
    options.tile_norms = core::TileNorms::kCrop;
    const core::Plan crop = core::plan_run(request, options);
    CHECK(crop.tile_kind() == "crop");
    CHECK_THAT(crop.norm_statistics(), Catch::Contains("at every resolution"));
    options.tile_norms = core::TileNorms::kFrame;
    const core::Plan frame = core::plan_run(request, options);
    REQUIRE(frame.tiles.tiled());
    CHECK_FALSE(frame.crop_for(!decode));
    CHECK(frame.tile_kind() == "through time");
    // No whole-frame part: crop tiles' caches and working set are no larger than frame tiles' of the same
    // size (where the window waits is each plan's own choice).
    options.tile = core::TileSize{frame.tiles.tile_height, frame.tiles.tile_width};
    const core::Plan frame_fixed = core::plan_run(request, options);
    options.tile_norms = core::TileNorms::kCrop;
    const core::Plan crop_fixed = core::plan_run(request, options);
    options.tile.reset();
    CHECK(crop_fixed.tiles.count() == frame_fixed.tiles.count());
    CHECK(crop_fixed.estimate.cache + crop_fixed.estimate.activations <=
          frame_fixed.estimate.cache + frame_fixed.estimate.activations);
  }
  // A round trip's one grid: crop tiles for its decode, frame tiles for its encode.
  const core::PlanRequest both =
      core::plan_request(*model, {core::Op::kRoundtrip, 1920, 1080, /*latent_frames=*/21});
  core::PlannerOptions options;
  options.budget_bytes = 8 * (int64_t{1} << 30);
  options.host_budget_bytes = 12 * (int64_t{1} << 30);
  const core::Plan trip = core::plan_run(both, options);
  REQUIRE(trip.tiles.tiled());
  CHECK(trip.tile_kind() == "crop (decode), through time (encode)");
  CHECK_THAT(trip.norm_statistics(), Catch::StartsWith("decode: each tile and"));
  CHECK(core::parse_tile_norms("frame") == core::TileNorms::kFrame);
  CHECK(core::parse_tile_norms("auto") == core::TileNorms::kAuto);
  CHECK_FALSE(core::parse_tile_norms("tile"));
}

TEST_CASE("on CUDA SeedVR2's crop tiles compute what they compute on the CPU, in any window",
          "[crop-tiles][gpu]") {
  if (!cuda_here()) return;
  auto cpu = tiny_seedvr2();
  auto gpu = load_tiny(tiny_model("seedvr2-vae"), torch::kCUDA, torch::kFloat);
  const auto video = halves_video(kRows, kCols, kFrames);
  const auto latents = core::encode_video(*cpu, video, {1});
  const auto decoded = core::decode_latents(*gpu, latents, crop_tiles(4)).cpu();
  const auto encoded = core::encode_video(*gpu, video, crop_tiles(4)).cpu();
  // The same function (cuDNN's float32 sums differ from the CPU's).
  CHECK(relative_error(decoded, core::decode_latents(*cpu, latents, crop_tiles(4))) <= 1e-3);
  CHECK(relative_error(encoded, core::encode_video(*cpu, video, crop_tiles(4))) <= 1e-3);
  // Windows of one latent frame in host memory: the tiles' caches parked between them; copies only.
  CHECK(relative_error(core::decode_latents(*gpu, latents, crop_tiles(4, 1, 1, true)).cpu(), decoded) <=
        1e-6);
  CHECK(relative_error(core::encode_video(*gpu, video, crop_tiles(4, 1, 1, true)).cpu(), encoded) <= 1e-6);
}

TEST_CASE("cli plan takes --tile-norms and says what the norms see", "[crop-tiles][cli]") {
  const std::string base =
      "plan --model seedvr2-vae --size 1920x1080 --op decode --preset rtx4060-8g "
      "--host-memory 4G --json";
  const CliResult crop = run_cli(base);
  REQUIRE(crop.status == 0);
  const auto j = nlohmann::json::parse(crop.out);
  CHECK(j.at("tile_norms") == "auto");
  CHECK(j.at("plan").at("tile_kind") == "crop");
  CHECK_THAT(j.at("plan").at("norm_statistics").get<std::string>(), Catch::Contains("at every resolution"));
  const CliResult frame = run_cli(base + " --tile-norms frame");
  REQUIRE(frame.status == 0);
  CHECK(nlohmann::json::parse(frame.out).at("plan").at("tile_kind") == "through time");
  // Without a whole-frame part the window's frames fit beside a crop tile: 4K decodes in 10 GB with 2 GiB of
  // host memory beside what a file run's writer holds (its x264 takes threads by this host's cores), where
  // frame tiles need 5.9 GiB of it (tests/test_norm_tiles.cpp).
  const core::ModelFamily& family = core::find_model_family("seedvr2-vae");
  const int64_t writer = io::pipeline_host_bytes(
      core::Op::kDecode, io::Geometry::of(family.describe(family.released_config), 3840, 2160), {.chunk = 1});
  const int64_t host = 2 * (int64_t{1} << 30) + writer;
  const CliResult small =
      run_cli("plan --model seedvr2-vae --size 3840x2160 --op decode --vram 10G --host-memory " +
              std::to_string(host >> 20) + "M --json");
  REQUIRE(small.status == 0);
  const auto four_k = nlohmann::json::parse(small.out).at("plan");
  CHECK(four_k.at("tile_kind") == "crop");
  CHECK(four_k.at("host_estimate_bytes").get<int64_t>() <= host);
  const CliResult bad = run_cli(base + " --tile-norms tiles");
  CHECK(bad.status == 2);
  CHECK_THAT(bad.err, Catch::Contains("--tile-norms"));
  CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 1);
}

}  // namespace vaecodec::test
