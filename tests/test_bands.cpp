// One clip split across devices in horizontal bands (Note [Bands across devices] in core/band_exchange.h):
// the split run equals the one-device run for all three families, encode and decode, at odd sizes, with any
// chunking; without the exchanges it would not; a failing band stops the others instead of leaving them
// waiting. On the CPU the bands are threads on the one CPU device, which runs the same exchanges as GPUs do.
#include <torch/cuda.h>
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device/device.h"
#include "core/engine.h"
#include "core/error.h"
#include "core/kernel_log.h"
#include "core/models/registry.h"
#include "core/plan_for.h"
#include "tests/gpu_support.h"
#include "tests/test_support.h"
#include "tests/tiles_support.h"
#include "tests/tiny_models.h"

namespace vaecodec::test {
namespace {

// Every registered family's tiny model (tests/tiny_models.h), found when a test first asks: a family without
// one fails those tests, not the start of the program (and with it CTest's discovery of every test).
using Family = TinyModel;
const std::vector<TinyModel>& families() {
  static const std::vector<TinyModel> all = tiny_models();
  return all;
}

std::shared_ptr<core::VaeModel> load(const Family& family, torch::Device device, torch::ScalarType dtype) {
  return load_tiny(family, device, dtype);
}

// `n` models of the family on `device`, and their places.
struct Bands {
  std::vector<std::shared_ptr<core::VaeModel>> models;
  std::vector<core::BandPlace> places;
  Bands(const Family& family, int64_t n, torch::Device device, torch::ScalarType dtype) {
    for (int64_t i = 0; i < n; ++i) {
      models.push_back(load(family, device, dtype));
      places.push_back({models.back().get(), &core::Device::of(device)});
    }
  }
};

core::ChunkOptions split(const Bands& bands, int64_t chunk) {
  core::ChunkOptions options;
  options.latent_frames = chunk;
  options.bands = bands.places;
  options.kind = core::SplitKind::kBands;
  return options;
}

// Frames [1, 3, frames, height, width] in [-1, 1]: smooth structure plus noise, so that every row differs.
torch::Tensor video(int64_t frames, int64_t height, int64_t width, torch::ScalarType dtype) {
  torch::manual_seed(7);
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  auto y = torch::linspace(0, 3, height, opts).view({1, 1, 1, height, 1});
  auto x = torch::linspace(0, 4, width, opts).view({1, 1, 1, 1, width});
  auto t = torch::arange(frames, opts).view({1, 1, frames, 1, 1});
  auto picture = torch::sin(x + 0.4 * t) * torch::cos(y - 0.3 * t) * 0.6 +
                 0.3 * torch::rand({1, 3, frames, height, width}, opts) - 0.15;
  return picture.clamp(-1, 1).to(dtype);
}

}  // namespace

TEST_CASE("band rows: near-equal whole latent rows, the taller bands first", "[bands]") {
  auto rows = core::band_rows(7, 3);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].first == 0);
  CHECK(rows[0].count == 3);
  CHECK(rows[1].first == 3);
  CHECK(rows[1].count == 2);
  CHECK(rows[2].first == 5);
  CHECK(rows[2].count == 2);
  rows = core::band_rows(90, 8);
  int64_t next = 0;
  for (const auto& r : rows) {
    CHECK(r.first == next);
    CHECK((r.count == 11 || r.count == 12));
    next += r.count;
  }
  CHECK(next == 90);
  CHECK_THROWS_WITH(core::band_rows(2, 3), Catch::Contains("2 latent rows cannot be split into 3 bands"));
}

// For every family in float64 and float32: `run(family, model, chunks)` on one device against the same with
// the frame split into 2 and 3 bands of that many more models, at `chunk` latent frames per call.
template <typename Run>
void check_split_equals_whole(int64_t chunk, Run run) {
  for (const auto& family : families()) {
    for (auto dtype : {torch::kDouble, torch::kFloat}) {
      auto model = load(family, torch::kCPU, dtype);
      const auto whole = run(family, *model, core::ChunkOptions{chunk});
      for (int64_t n : {2, 3}) {
        Bands bands(family, n, torch::kCPU, dtype);
        const auto banded = run(family, *model, split(bands, chunk));
        INFO(family.family << " " << c10::toString(dtype) << ", " << n << " bands");
        REQUIRE(banded.sizes() == whole.sizes());
        CHECK(relative_error(banded, whole) <= (dtype == torch::kDouble ? 1e-12 : 1e-5));
      }
    }
  }
}

TEST_CASE("a split decode equals the one-device decode, every family, float64 and float32", "[bands]") {
  check_split_equals_whole(2, [](const Family&, core::VaeModel& model, const core::ChunkOptions& chunks) {
    // 7 latent rows (odd) by 5 columns, 4 latent frames.
    torch::manual_seed(3);
    const auto latents =
        torch::randn({1, model.info().latent_channels, 4, 7, 5}, torch::TensorOptions().dtype(model.dtype()));
    return core::decode_latents(model, latents, chunks);
  });
}

TEST_CASE("a split encode equals the one-device encode, every family, float64 and float32", "[bands]") {
  check_split_equals_whole(
      1, [](const Family& family, core::VaeModel& model, const core::ChunkOptions& chunks) {
        // 5 latent rows, 3 latent columns, 9 frames.
        return core::encode_video(
            model, video(9, 5 * family.spatial_factor, 3 * family.spatial_factor, model.dtype()), chunks);
      });
}

TEST_CASE("4 and 8 bands, as on 4 and 8 GPUs, equal the one-device run, every family", "[bands]") {
  // The split of the 4- and 8-GPU machines, simulated on the CPU: bands of 2 and 3 latent rows, so that every
  // band's halo comes from both neighbours at every resolution.
  for (const auto& family : families()) {
    auto model = load(family, torch::kCPU, torch::kDouble);
    torch::manual_seed(17);
    const auto latents = torch::randn({1, model->info().latent_channels, 2, 17, 3}, torch::kDouble);
    const auto frames = video(5, 17 * family.spatial_factor, 2 * family.spatial_factor, torch::kDouble);
    const auto decoded = core::decode_latents(*model, latents, {1});
    const auto encoded = core::encode_video(*model, frames, {1});
    for (int64_t n : {4, 8}) {
      INFO(family.family << ", " << n << " bands");
      Bands bands(family, n, torch::kCPU, torch::kDouble);
      CHECK(relative_error(core::decode_latents(*model, latents, split(bands, 1)), decoded) <= 1e-12);
      CHECK(relative_error(core::encode_video(*model, frames, split(bands, 1)), encoded) <= 1e-12);
    }
  }
}

TEST_CASE("a split LTX-2 run equals the one-device run, its held-back frames ended in every band",
          "[bands][ltx2]") {
  // 2.0's decoder pads by reflection, 2.3's with zeros. 5 latent rows: 3 bands of 2, 2 and 1 rows, the last
  // reflecting its bottom edge through its halo.
  for (const std::string tag : {"20", "23"}) {
    auto model = tiny_ltx2(tag);
    torch::manual_seed(11);
    const auto latents = torch::randn({1, 4, 4, 5, 3}, torch::kDouble);
    const auto frames = video(17, 5 * 32, 2 * 32, torch::kDouble);
    const auto decoded = core::decode_latents(*model, latents, {1});
    const auto encoded = core::encode_video(*model, frames, {1});
    REQUIRE(decoded.size(2) == 1 + 8 * 3);
    for (int64_t n : {2, 3}) {
      std::vector<std::shared_ptr<core::VaeModel>> models;
      core::ChunkOptions options;
      options.kind = core::SplitKind::kBands;
      for (int64_t i = 0; i < n; ++i) {
        models.push_back(tiny_ltx2(tag));
        options.bands.push_back({models.back().get(), &core::Device::of(torch::kCPU)});
      }
      for (int64_t chunk : {1, 2, 4}) {
        INFO("ltx2 " << tag << ", " << n << " bands, chunks of " << chunk);
        options.latent_frames = chunk;
        const auto banded = core::decode_latents(*model, latents, options);
        REQUIRE(banded.sizes() == decoded.sizes());
        CHECK(relative_error(banded, decoded) <= 1e-12);
      }
      INFO("ltx2 " << tag << ", " << n << " bands, encode");
      options.latent_frames = 1;
      CHECK(relative_error(core::encode_video(*model, frames, options), encoded) <= 1e-12);
    }
  }
}

TEST_CASE("a split run does not depend on its chunking, and streams like the one-device run",
          "[bands][chunks]") {
  const Family family = tiny_model("wan2.1-vae");
  auto model = load(family, torch::kCPU, torch::kDouble);
  torch::manual_seed(5);
  auto latents = torch::randn({1, 16, 5, 6, 4}, torch::kDouble);
  const auto whole = core::decode_latents(*model, latents, {1});
  Bands bands(family, 2, torch::kCPU, torch::kDouble);
  // Fed one latent frame at a time into a run of chunk 3: the pushes and the chunks do not line up.
  core::Run run(*model, core::Device::of(torch::kCPU), core::Op::kDecode, split(bands, 3));
  std::vector<torch::Tensor> parts;
  for (int64_t i = 0; i < latents.size(2); ++i)
    if (auto out = run.push(latents.narrow(2, i, 1)); out.defined()) parts.push_back(out);
  if (auto out = run.finish(); out.defined()) parts.push_back(out);
  const auto streamed = torch::cat(parts, 2);
  REQUIRE(streamed.sizes() == whole.sizes());
  CHECK(relative_error(streamed, whole) <= 1e-12);
}

TEST_CASE("without the exchanges the bands would not match: each band alone differs", "[bands]") {
  // The check above can fail: bands decoded as separate pictures (zero padding at their edges, attention over
  // their own pixels) are far from the one-device rows.
  const Family family = tiny_model("wan2.1-vae");
  auto model = load(family, torch::kCPU, torch::kDouble);
  torch::manual_seed(3);
  auto latents = torch::randn({1, 16, 2, 6, 5}, torch::kDouble);
  const auto whole = core::decode_latents(*model, latents, {2});
  const auto top = core::decode_latents(*model, latents.narrow(3, 0, 3), {2});
  const auto bottom = core::decode_latents(*model, latents.narrow(3, 3, 3), {2});
  CHECK(relative_error(torch::cat({top, bottom}, 3), whole) > 1e-3);
}

TEST_CASE("a failing band stops the split run with its own error, and the others do not hang", "[bands]") {
  // Band 1 holds a Wan2.2 model given Wan2.1 latents: its first convolution refuses the channel count while
  // band 0 waits for it at its first exchange.
  auto wan21 = load(tiny_model("wan2.1-vae"), torch::kCPU, torch::kFloat);
  auto wan22 = load(tiny_model("wan2.2-vae"), torch::kCPU, torch::kFloat);
  core::ChunkOptions options;
  options.bands = {{wan21.get(), &core::Device::of(torch::kCPU)},
                   {wan22.get(), &core::Device::of(torch::kCPU)}};
  options.kind = core::SplitKind::kBands;
  auto latents = torch::randn({1, 16, 1, 4, 4});
  try {
    core::decode_latents(*wan21, latents, options);
    FAIL("the split run did not fail");
  } catch (const std::exception& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("another band") == std::string::npos);                 // the failing band's own error
    CHECK_THAT(what, Catch::Contains("(16)") && Catch::Contains("(48)"));  // its channel counts
  }
}

TEST_CASE("a split run refuses what it cannot do", "[bands]") {
  auto model = load(tiny_model("wan2.1-vae"), torch::kCPU, torch::kFloat);
  Bands bands(tiny_model("wan2.1-vae"), 3, torch::kCPU, torch::kFloat);
  CHECK_THROWS_WITH(core::decode_latents(*model, torch::randn({1, 16, 1, 2, 4}), split(bands, 1)),
                    Catch::Contains("cannot be split into 3 bands"));
  auto shared = split(bands, 1);
  shared.bands[1].model = shared.bands[0].model;
  CHECK_THROWS_WITH(core::decode_latents(*model, torch::randn({1, 16, 1, 6, 4}), shared),
                    Catch::Contains("share one model"));
  auto tiled = split(bands, 1);
  tiled.tiles = core::TileGrid::cover(6, 4, {3, 4}, 1);
  CHECK_THROWS_WITH(core::decode_latents(*model, torch::randn({1, 16, 1, 6, 4}), tiled),
                    Catch::Contains("not into 3 rows of tiles"));
  auto offloaded = split(bands, 1);
  offloaded.tiles = core::TileGrid::cover(6, 6, {6, 4}, 1);
  offloaded.offload = true;
  CHECK_THROWS_WITH(core::decode_latents(*model, torch::randn({1, 16, 1, 6, 6}), offloaded),
                    Catch::Contains("does not offload"));
}

TEST_CASE("a split run in columns equals the one-device run tiled in the same columns, every family",
          "[bands][tiles]") {
  // Bands cut into columns (Note [Bands across devices]): column c of the split is one-device tile c cut
  // into bands, blended as the one-device tiles are.
  for (const auto& family : families()) {
    for (auto dtype : {torch::kDouble, torch::kFloat}) {
      auto model = load(family, torch::kCPU, dtype);
      Bands bands(family, 2, torch::kCPU, dtype);
      // Decode: 7 x 9 latent pixels in 3 columns of 5 sharing 2; encode: 5 x 7 in 2 columns of 4 sharing 1.
      torch::manual_seed(13);
      const auto latents =
          torch::randn({1, model->info().latent_channels, 3, 7, 9}, torch::TensorOptions().dtype(dtype));
      const auto frames = video(5, 5 * family.spatial_factor, 7 * family.spatial_factor, dtype);
      struct Case {
        const char* op;
        core::TileGrid columns;
        std::function<torch::Tensor(const core::ChunkOptions&)> run;
      };
      const Case cases[] = {
          {"decode", core::TileGrid::cover(7, 9, {7, 5}, 2),
           [&](const core::ChunkOptions& c) { return core::decode_latents(*model, latents, c); }},
          {"encode", core::TileGrid::cover(5, 7, {5, 4}, 1),
           [&](const core::ChunkOptions& c) { return core::encode_video(*model, frames, c); }},
      };
      for (const auto& c : cases) {
        INFO(family.family << " " << c10::toString(dtype) << " " << c.op);
        REQUIRE(c.columns.rows == 1);
        REQUIRE(c.columns.cols >= 2);
        core::ChunkOptions one{1, c.columns};
        one.kind = core::SplitKind::kBlendedTiles;
        core::ChunkOptions cut = split(bands, 1);
        cut.tiles = c.columns;
        const auto tiled = c.run(one);
        const auto banded = c.run(cut);
        REQUIRE(banded.sizes() == tiled.sizes());
        CHECK(relative_error(banded, tiled) <= (dtype == torch::kDouble ? 1e-12 : 1e-5));
        // The columns are real tiles: the untiled run differs from both.
        CHECK(relative_error(c.run(core::ChunkOptions{1}), tiled) > 1e-4);
      }
    }
  }
}

TEST_CASE("a band that does not fit whole is planned in the fewest columns that fit", "[bands][planner]") {
  const auto& family = core::find_model_family("wan2.1-vae");
  const auto model = family.build(family.released_config);
  const auto whole = core::plan_request(model->info(), model->parameter_count(), torch::kBFloat16,
                                        core::Op::kDecode, 1920, 1088);
  core::PlannerOptions options;
  options.max_chunk = 2;
  const core::Plan roomy = core::plan_band_run(whole, 2, options);
  CHECK_FALSE(roomy.tiles.tiled());
  // Just under what the whole band needs: columns, and under the budget.
  options.tiling = false;
  options.budget_bytes = core::smallest_budget(core::band_plan_request(whole, 2), options) - 1;
  CHECK_THROWS_WITH(core::plan_band_run(whole, 2, options), Catch::Contains("needs"));
  options.tiling = true;
  const core::Plan cut = core::plan_band_run(whole, 2, options);
  CHECK(cut.tiles.rows == 1);
  CHECK(cut.tiles.cols == 2);
  CHECK(cut.tiles.latent_width == 1920 / 8);
  CHECK(cut.tiles.latent_height == 1088 / 8);
  CHECK_FALSE(cut.offload);
  CHECK(cut.estimate.total() <= options.budget_bytes);
  // Tighter: more columns, each narrower.
  options.budget_bytes = options.budget_bytes * 3 / 4;
  const core::Plan tighter = core::plan_band_run(whole, 2, options);
  CHECK(tighter.tiles.rows == 1);
  CHECK(tighter.tiles.cols > 2);
  CHECK(tighter.estimate.total() <= options.budget_bytes);
  // A given tile size: columns of its width, whatever its height.
  options.budget_bytes = 0;
  options.tile = core::TileSize{32, 96};
  const core::Plan given = core::plan_band_run(whole, 2, options);
  CHECK(given.tiles.rows == 1);
  CHECK(given.tiles.tile_width == 96);
  // Nothing fits: the narrowest columns' refusal.
  options.tile.reset();
  options.budget_bytes = int64_t{1} << 28;
  CHECK_THROWS_WITH(core::plan_band_run(whole, 2, options), Catch::Contains("needs"));
}

TEST_CASE("bands that do not fit whole share the one-device plan's exact tiles out among the devices",
          "[bands][planner]") {
  // Note [Exact tiles across devices]: a family that runs exact tiles is planned as on one device.
  const auto& family = core::find_model_family("wan2.1-vae");
  const auto model = family.build(family.released_config);
  const auto whole = core::plan_request(*model, {core::Op::kDecode, 1920, 1088, /*latent_frames=*/21});
  REQUIRE(whole.exact_tiles);
  core::PlannerOptions options;
  options.max_chunk = 2;
  CHECK(core::plan_band_run(whole, 2, options).tile_devices == 1);  // whole bands fit
  options.tiling = false;
  options.budget_bytes = core::smallest_budget(core::band_plan_request(whole, 2), options) - 1;
  options.tiling = true;
  const core::Plan shared = core::plan_band_run(whole, 2, options);
  CHECK(shared.tile_devices == 2);
  CHECK(shared.tiles.exact);
  CHECK(shared.tiles.tiled());
  CHECK(shared.estimate.total() <= options.budget_bytes);
  const core::Plan one = core::plan_run(whole, options);  // the same plan as one device's
  CHECK(shared.tiles.rows == one.tiles.rows);
  CHECK(shared.tiles.cols == one.tiles.cols);
  CHECK(shared.chunk == one.chunk);
  CHECK(shared.to_json()["tile_devices"] == 2);
  CHECK_THAT(shared.summary(), Catch::Contains("shared out among 2 devices"));
}

namespace {

// On CUDA, for every family at two sizes in float32 and bf16: the decode and encode split into bands on each
// layout's devices, one band per entry, against the one-GPU run (float32: to rounding) and the float32 CPU
// run (bf16: the golden tests' bound).
void check_cuda_split(const std::vector<std::vector<torch::Device>>& layouts) {
  const torch::Device gpu0(torch::kCUDA, 0);
  for (const auto& family : families()) {
    for (auto [height, width] : {std::pair<int64_t, int64_t>{256, 256}, {208, 176}}) {
      const int64_t rows = height / family.spatial_factor, cols = width / family.spatial_factor;
      for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
        auto model = load(family, gpu0, dtype);
        auto reference = load(family, torch::kCPU, torch::kFloat);
        torch::manual_seed(11);
        auto latents = torch::randn({1, model->info().latent_channels, 3, rows, cols});
        const auto frames = video(9, height, width, torch::kFloat);
        const auto decoded = core::decode_latents(*reference, latents, {2});
        const auto encoded = core::encode_video(*reference, frames, {1});
        const auto one_gpu_decoded = core::decode_latents(*model, latents.to(gpu0, dtype), {2});
        const auto one_gpu_encoded = core::encode_video(*model, frames.to(gpu0, dtype), {1});
        for (const auto& layout : layouts) {
          std::vector<std::shared_ptr<core::VaeModel>> models;
          core::ChunkOptions options;
          options.latent_frames = 2;
          options.kind = core::SplitKind::kBands;
          for (const auto& d : layout) {
            models.push_back(load(family, d, dtype));
            options.bands.push_back({models.back().get(), &core::Device::of(d)});
          }
          INFO(family.family << " " << width << "x" << height << " " << c10::toString(dtype) << ", "
                             << layout.size() << " bands, the last on " << layout.back().str());
          const bool f32 = dtype == torch::kFloat;
          const double bound = f32 ? 1e-5 : 5e-2;
          core::KernelLog::reset();
          core::KernelLog::enable(true);
          const auto split_decode = core::decode_latents(*model, latents.to(gpu0, dtype), options);
          REQUIRE(split_decode.device() == gpu0);
          CHECK(relative_error(split_decode, f32 ? one_gpu_decoded : decoded) <= bound);
          options.latent_frames = 1;
          const auto split_encode = core::encode_video(*model, frames.to(gpu0, dtype), options);
          CHECK(relative_error(split_encode, f32 ? one_gpu_encoded : encoded) <= bound);
          core::KernelLog::enable(false);
          // Note [SeedVR2 GroupNorm in bands]: a band's norms run the own kernel, none the composite path.
          if (family.family == "seedvr2-vae") {
            int64_t own = 0, composite = 0;
            for (const auto& e : core::KernelLog::entries())
              if (e.kernel == "frame_group_norm") (e.path == "own kernel" ? own : composite) += e.calls;
            CHECK(own > 0);
            CHECK(composite == 0);
          }
        }
      }
    }
  }
}

// The 2x2 exact tiles of the one-GPU run shared out among models on `devices`, plain and through the host
// window: the same decode and encode as the one-GPU run with those tiles.
void check_shared_tiles(const std::vector<torch::Device>& devices) {
  const torch::Device gpu0(torch::kCUDA, 0);
  const auto family = tiny_model("wan2.1-vae");
  auto model = load(family, gpu0, torch::kFloat);
  std::vector<std::shared_ptr<core::VaeModel>> models;
  for (const auto& d : devices) models.push_back(load(family, d, torch::kFloat));
  for (const bool host : {false, true}) {
    core::ChunkOptions tiles{2, core::TileGrid::parts(32, 32, 2, 2)};
    tiles.window_store = host ? core::WindowStore::kHostFrames : core::WindowStore::kDevice;
    tiles.kind = core::SplitKind::kExactTiles;
    core::ChunkOptions shared = tiles;
    for (const auto& m : models) shared.bands.push_back({m.get(), &core::Device::of(m->device())});
    torch::manual_seed(23);
    const auto latents = torch::randn({1, 16, 3, 32, 32}).to(gpu0);
    const auto frames = video(9, 256, 256, torch::kFloat).to(gpu0);
    INFO(devices.size() << " places, the last on " << devices.back().str() << (host ? ", host window" : ""));
    const auto one = core::decode_latents(*model, latents, tiles);
    const auto spread = core::decode_latents(*model, latents, shared);
    REQUIRE(spread.sizes() == one.sizes());
    // The tiles are the one-GPU tiles; the whole-frame part runs in bands across the GPUs (Note [Whole-frame
    // part in bands]), whose attention and halos add in another order: a split's float32 bound.
    CHECK(relative_error(spread.to(gpu0), one.to(gpu0)) <= 1e-5);
    CHECK(relative_error(core::encode_video(*model, frames, shared),
                         core::encode_video(*model, frames, tiles)) <= 1e-5);
  }
}

// Wan2.1 and SeedVR2 (its pooled GroupNorm) split into bands on `devices` and cut into two columns: the
// one-GPU run tiled in the same columns.
void check_split_columns(const std::vector<torch::Device>& devices) {
  const torch::Device gpu0(torch::kCUDA, 0);
  for (const auto& family : {tiny_model("wan2.1-vae"), tiny_model("seedvr2-vae")}) {
    auto model = load(family, gpu0, torch::kFloat);
    std::vector<std::shared_ptr<core::VaeModel>> models;
    for (const auto& d : devices) models.push_back(load(family, d, torch::kFloat));
    core::ChunkOptions columns{2, core::TileGrid::cover(32, 32, {32, 20}, 8)};
    REQUIRE(columns.tiles.cols == 2);
    columns.kind = core::SplitKind::kBlendedTiles;
    core::ChunkOptions split = columns;
    split.kind = core::SplitKind::kBands;
    for (const auto& m : models) split.bands.push_back({m.get(), &core::Device::of(m->device())});
    torch::manual_seed(19);
    const auto latents = torch::randn({1, model->info().latent_channels, 3, 32, 32}).to(gpu0);
    INFO(family.family << ", " << devices.size() << " bands, the last on " << devices.back().str());
    const auto tiled = core::decode_latents(*model, latents, columns);
    const auto banded = core::decode_latents(*model, latents, split);
    REQUIRE(banded.sizes() == tiled.sizes());
    CHECK(relative_error(banded, tiled) <= 1e-5);
  }
}

}  // namespace

// The [gpu] tests split across two bands of one GPU; their [multi-gpu] twins put one band on each of the
// first 2, 3, ... GPUs (Note [Tests on several GPUs] in tests/gpu_support.h).
TEST_CASE("on CUDA, a split decode and encode in two bands of one GPU equal the one-device run",
          "[bands][gpu]") {
  if (!cuda_here()) return;
  const torch::Device gpu0(torch::kCUDA, 0);
  check_cuda_split({{gpu0, gpu0}});
}

TEST_CASE("on several GPUs, a split decode and encode, a band per GPU, equal the one-device run",
          "[bands][gpu][multi-gpu]") {
  std::vector<std::vector<torch::Device>> layouts;
  for (const int64_t n : gpu_counts_here()) layouts.push_back(first_gpus(n));
  if (!layouts.empty()) check_cuda_split(layouts);
}

TEST_CASE(
    "on CUDA, exact tiles shared out among two places of one GPU equal the one-GPU run with the same tiles",
    "[bands][gpu]") {
  if (!cuda_here()) return;
  const torch::Device gpu0(torch::kCUDA, 0);
  check_shared_tiles({gpu0, gpu0});
}

TEST_CASE("on several GPUs, exact tiles shared out among them equal the one-GPU run with the same tiles",
          "[bands][gpu][multi-gpu]") {
  for (const int64_t n : gpu_counts_here()) check_shared_tiles(first_gpus(n));
}

TEST_CASE(
    "on CUDA, a split run in columns, two bands of one GPU, equals the one-GPU run tiled in the same columns",
    "[bands][gpu]") {
  if (!cuda_here()) return;
  const torch::Device gpu0(torch::kCUDA, 0);
  check_split_columns({gpu0, gpu0});
}

TEST_CASE("on several GPUs, a split run in columns equals the one-GPU run tiled in the same columns",
          "[bands][gpu][multi-gpu]") {
  for (const int64_t n : gpu_counts_here()) check_split_columns(first_gpus(n));
}

}  // namespace vaecodec::test
