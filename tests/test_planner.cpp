// The memory planner: its cache coefficients against the model's real caches, the calibration it reproduces,
// and the choices it makes for budgets from generous to impossible.
#include <catch2/catch.hpp>

#include <array>
#include <iostream>
#include <regex>
#include <tuple>

#include "core/device/device.h"
#include "core/error.h"
#include "core/models/registry.h"
#include "core/plan_for.h"
#include "core/presets.h"
#include "tests/test_support.h"

namespace vaecodec::test {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

core::PlanRequest wan21(core::Op op, int64_t width, int64_t height,
                        torch::ScalarType dtype = torch::kBFloat16) {
  const auto& family = core::find_model_family("wan2.1-vae");
  static const auto model = family.build(family.released_config);
  return core::plan_request(model->info(), model->parameter_count(), dtype, op, width, height);
}

core::PlannerOptions budget(int64_t bytes, int64_t max_chunk = 4) {
  core::PlannerOptions o;
  o.budget_bytes = bytes;
  o.max_chunk = max_chunk;
  return o;
}

// A run's causal cache once it is full (after three chunks), float32 on the CPU.
core::CausalCache measured_cache(const std::string& name, core::Op op, int64_t width, int64_t height) {
  const auto& family = core::find_model_family(name);
  auto model = family.build(family.released_config);
  core::randomize_parameters(*model, /*seed=*/0);
  model->eval();
  torch::InferenceMode guard;
  const auto& info = model->info();
  core::CausalCache cache;
  if (op == core::Op::kDecode) {
    auto z =
        torch::randn({1, info.latent_channels, 1, height / info.spatial_factor, width / info.spatial_factor});
    // A decoder that looks ahead fills its cache only once its lag has passed (Note [Decoders that look
    // ahead] in core/vae_model.h).
    const int64_t calls = 3 + info.decode_lag / info.temporal_factor;
    for (int64_t i = 0; i < calls; ++i) model->decode(z, cache);
  } else {
    const int64_t tf = info.temporal_factor;
    model->encode(torch::rand({1, 3, 1, height, width}) * 2 - 1, cache);
    for (int i = 0; i < 2; ++i) model->encode(torch::rand({1, 3, tf, height, width}) * 2 - 1, cache);
  }
  return cache;
}

int64_t measured_cache_bytes(const std::string& name, core::Op op, int64_t width, int64_t height) {
  return measured_cache(name, op, width, height).bytes();
}

// The most bytes three consecutive slots hold (Note [Caches streamed slot by slot]).
int64_t stream_window_bytes(const core::CausalCache& cache) {
  std::vector<int64_t> bytes;
  for (const auto& slot : cache.slots())
    bytes.push_back(slot.history.defined() ? slot.history.numel() * slot.history.element_size() : 0);
  int64_t most = 0;
  for (size_t i = 0; i < bytes.size(); ++i)
    most = std::max(most, bytes[i] + (i > 0 ? bytes[i - 1] : 0) + (i + 1 < bytes.size() ? bytes[i + 1] : 0));
  return most;
}

}  // namespace

TEST_CASE("the cache coefficients match the released models' caches", "[planner]") {
  // Small frames keep the released architectures quick on the CPU; caches scale with the pixels.
  for (const core::ModelFamily& family : core::model_families()) {
    const std::string& name = family.name;
    const auto model = family.build(family.released_config);
    const int64_t width = 64, height = 2 * model->info().spatial_factor;
    for (core::Op op : {core::Op::kDecode, core::Op::kEncode}) {
      INFO(name << " " << core::op_name(op));
      const int64_t measured = measured_cache_bytes(name, op, width, height);
      const auto request =
          core::plan_request(model->info(), model->parameter_count(), torch::kFloat, op, width, height);
      const int64_t f = model->info().spatial_factor;
      const auto estimate =
          core::estimate_memory(request, 1, core::TileGrid::whole(height / f, width / f), false);
      const double pixels = static_cast<double>(width * height) * 4;
      std::cout << "planner: " << name << " " << core::op_name(op) << " cache " << measured / pixels
                << " elements per pixel (measured), " << estimate.cache / pixels << " (table)\n";
      CHECK(static_cast<double>(estimate.cache) == Approx(static_cast<double>(measured)).epsilon(0.02));
    }
  }
}

TEST_CASE("the stream window coefficients match the released models' slots", "[planner]") {
  // SeedVR2, whose tiles are not exact, streams its whole-frame cache slot by slot (Note [Caches streamed
  // slot by slot]); the planner counts the three largest consecutive slots on the device.
  for (const core::ModelFamily& family : core::model_families()) {
    const auto model = family.build(family.released_config);
    const int64_t width = 64, height = 2 * model->info().spatial_factor;
    for (const core::MemoryCalibration& row : family.calibration) {
      INFO(family.name << " " << core::op_name(row.op));
      if (row.stream_window_elements == 0) {  // streams nothing: the planner offers its exact tiles instead
        CHECK(family.name != "seedvr2-vae");
        continue;
      }
      const auto cache = measured_cache(family.name, row.op, width, height);
      const double pixels = static_cast<double>(width * height) * 4;  // float32
      const double measured = static_cast<double>(stream_window_bytes(cache)) / pixels;
      std::cout << "planner: " << family.name << " " << core::op_name(row.op) << " stream window " << measured
                << " elements per pixel (measured), " << row.stream_window_elements << " (table), of "
                << static_cast<double>(cache.bytes()) / pixels << " in " << cache.size() << " slots\n";
      CHECK(row.stream_window_elements == Approx(measured).epsilon(0.02));
    }
  }
}

TEST_CASE("the memory model reproduces its calibration run and scales with pixels and chunks", "[planner]") {
  // Every family's calibration runs (bench OP WxH xF, chunk C, with bench's clip resident): the estimate of
  // the measured run gives back its measured peak, for the family's released model.
  for (const core::ModelFamily& family : core::model_families()) {
    const auto model = family.build(family.released_config);
    for (const core::MemoryCalibration& run : family.calibration) {
      INFO(family.name << " " << core::op_name(run.op) << " " << c10::toString(run.dtype));
      const auto r = core::plan_request(model->info(), model->parameter_count(), run.dtype, run.op, run.width,
                                        run.height);
      CHECK(r.parameter_count == run.parameters);
      const int64_t f = model->info().spatial_factor;
      const auto e = core::estimate_memory(r, run.chunk, core::TileGrid::whole(run.height / f, run.width / f),
                                           false, static_cast<int64_t>(run.resident_gib * kGiB));
      CHECK(std::abs(static_cast<double>(e.total()) / kGiB - run.peak_gib) < 0.05);
      CHECK(e.weights == run.parameters * static_cast<int64_t>(c10::elementSize(run.dtype)));
      CHECK(e.activations > 0);
    }
  }

  const auto request = wan21(core::Op::kDecode, 1280, 720);
  const auto whole = core::TileGrid::whole(90, 160);
  const auto e1 = core::estimate_memory(request, 1, whole, false);

  const auto e2 = core::estimate_memory(request, 2, whole, false);
  CHECK(e2.activations == Approx(2.0 * static_cast<double>(e1.activations)).epsilon(1e-6));
  CHECK(e2.cache == e1.cache);  // the history does not grow with the chunk

  const auto big =
      core::estimate_memory(wan21(core::Op::kDecode, 2560, 1440), 1, core::TileGrid::whole(180, 320), false);
  CHECK(big.activations == Approx(4.0 * static_cast<double>(e1.activations)).epsilon(1e-6));
  CHECK(big.cache == Approx(4.0 * static_cast<double>(e1.cache)).epsilon(1e-6));

  // fp32: twice the bytes per element; a round trip holds both caches.
  const auto fp32 =
      core::estimate_memory(wan21(core::Op::kDecode, 1280, 720, torch::kFloat), 1, whole, false);
  CHECK(fp32.activations == Approx(2.0 * static_cast<double>(e1.activations)).epsilon(1e-6));
  const auto encode = core::estimate_memory(wan21(core::Op::kEncode, 1280, 720), 1, whole, false);
  const auto roundtrip = core::estimate_memory(wan21(core::Op::kRoundtrip, 1280, 720), 1, whole, false);
  CHECK(roundtrip.cache == Approx(static_cast<double>(encode.cache + e2.cache)).epsilon(1e-6));
  CHECK(roundtrip.activations == std::max(encode.activations, e1.activations));
}

TEST_CASE("tile grids cover the frame with the overlap asked for", "[planner][tiling]") {
  for (auto [h, w, th, tw, o] : std::vector<std::array<int64_t, 5>>{{90, 160, 48, 64, 8},
                                                                    {270, 480, 64, 64, 8},
                                                                    {90, 160, 90, 160, 8},
                                                                    {17, 23, 9, 10, 3},
                                                                    {90, 160, 30, 200, 8}}) {
    INFO(w << "x" << h << " tiles " << tw << "x" << th << " overlap " << o);
    const auto g = core::TileGrid::cover(h, w, {th, tw}, o);
    CHECK(g.tile_height == std::min(th, h));
    CHECK(g.tile_width == std::min(tw, w));
    for (int64_t r = 0; r < g.rows; ++r) {
      if (r == 0) CHECK(g.row_origin(r) == 0);
      if (r + 1 == g.rows) CHECK(g.row_origin(r) + g.tile_height == h);
      if (r > 0) CHECK(g.row_origin(r - 1) + g.tile_height - g.row_origin(r) >= o);
    }
    for (int64_t c = 0; c < g.cols; ++c) {
      if (c == 0) CHECK(g.col_origin(c) == 0);
      if (c + 1 == g.cols) CHECK(g.col_origin(c) + g.tile_width == w);
      if (c > 0) CHECK(g.col_origin(c - 1) + g.tile_width - g.col_origin(c) >= o);
    }
  }
  CHECK_FALSE(core::TileGrid::cover(90, 160, {90, 160}, 8).tiled());
  CHECK(core::TileGrid::cover(90, 160, {64, 64}, 8).count() == 2 * 3);
  CHECK_THROWS_WITH(core::TileGrid::cover(90, 160, {8, 8}, 8),
                    Catch::Contains("not larger than its overlap"));
  CHECK(core::parse_tile("64").width == 64);
  CHECK(core::parse_tile("80x48").height == 48);
  CHECK_THROWS_WITH(core::parse_tile("80x"), Catch::Contains("is not a tile size"));
}

TEST_CASE("the planner takes the cheapest plan that fits", "[planner]") {
  const auto request = wan21(core::Op::kDecode, 1280, 720);
  SECTION("no budget: the whole frame, one latent frame per call") {
    const auto plan = core::plan_run(request, budget(0, 3));
    CHECK(plan.chunk == 1);
    CHECK_FALSE(plan.tiles.tiled());
    CHECK(plan.cost == Approx(1.0));
  }
  SECTION("every plan fits its budget; less budget never gives a much faster plan") {
    double last_cost = 1;
    int64_t last_tiles = 1;
    bool offloaded = false;
    for (double gib = 80; gib >= 2; gib *= 0.85) {
      const auto b = static_cast<int64_t>(gib * kGiB);
      core::Plan plan;
      try {
        plan = core::plan_run(request, budget(b, 8));
      } catch (const Error& e) {
        INFO(e.what());
        CHECK(gib < 4);  // 720p decodes in 4 GiB, tiled
        break;
      }
      INFO(gib << " GiB: " << plan.summary());
      CHECK(plan.estimate.total() <=
            static_cast<int64_t>(static_cast<double>(b) * (1 - core::PlannerOptions{}.margin)));
      CHECK(plan.cost >= last_cost / 1.03 - 1e-9);  // within the planner's cost tolerance
      // The plan names where its chunks run (Plan::split): blended tiles, as this request has no exact tiles.
      CHECK(plan.split == (plan.tiles.tiled() ? core::SplitKind::kBlendedTiles : core::SplitKind::kWhole));
      if (!plan.tiles.tiled()) {
        CHECK_FALSE(plan.offload);
        CHECK(plan.chunk == 1);  // the whole frame gains nothing from longer chunks
      }
      if (plan.offload) offloaded = true;
      last_cost = plan.cost;
      last_tiles = plan.tiles.count();
    }
    CHECK(last_tiles > 1);  // the sweep reached tiled plans
    CHECK(offloaded);       // and offloaded ones
  }
  SECTION("offloaded caches travel less with longer chunks") {
    // 1080p decode in 8 GiB: the caches (about 9 GiB) cannot all stay on the device.
    const auto r = wan21(core::Op::kDecode, 1920, 1080);
    auto options = budget(8 * kGiB, 8);
    const auto plan = core::plan_run(r, options);
    INFO(plan.summary());
    REQUIRE(plan.offload);
    CHECK(plan.chunk > 1);
    options.max_chunk = 1;
    const auto short_chunks = core::plan_run(r, options);
    CHECK(short_chunks.chunk == 1);
    CHECK(short_chunks.cost > plan.cost);
  }
  SECTION("the margin is the share of the budget left unplanned") {
    // Just above the untiled estimate: it fits with no margin, not with the default one.
    const auto whole = core::estimate_memory(request, 1, core::TileGrid::whole(90, 160), false);
    auto options = budget(whole.total() + (whole.total() / 20), 8);
    options.margin = 0;
    CHECK_FALSE(core::plan_run(request, options).tiles.tiled());
    options.margin = 0.15;
    CHECK(core::plan_run(request, options).tiles.tiled());
    options.margin = 1.0;
    CHECK_THROWS_WITH(core::plan_run(request, options),
                      Catch::Contains("margin must be at least 0 and below 1"));
  }
  SECTION("untiled as long as one latent frame fits") {
    const auto plan = core::plan_run(request, core::find_preset("rtx4080-16g").planner);
    CHECK_FALSE(plan.tiles.tiled());
  }
  SECTION("a fixed chunk or tile is kept") {
    auto options = budget(40 * kGiB);
    options.chunk = 2;
    options.tile = core::TileSize{48, 64};
    const auto plan = core::plan_run(request, options);
    CHECK(plan.chunk == 2);
    CHECK(plan.tiles.tile_height == 48);
    CHECK(plan.tiles.tile_width == 64);
    CHECK(plan.tiles.count() == 3 * 3);
  }
  SECTION("3840x2160 decodes in the 24 GB tier") {
    const auto plan =
        core::plan_run(wan21(core::Op::kDecode, 3840, 2160), core::find_preset("rtx4090-24g").planner);
    std::cout << "planner: 4K decode in rtx4090-24g: " << plan.summary() << "\n";
    CHECK(plan.estimate.total() <= core::find_preset("rtx4090-24g").planner.budget_bytes);
  }
}

TEST_CASE("an impossible budget is refused with the smallest budget that works", "[planner]") {
  const auto request = wan21(core::Op::kRoundtrip, 1280, 720);
  auto options = budget(kGiB / 2);
  std::string message;
  try {
    core::plan_run(request, options);
  } catch (const Error& e) {
    message = e.what();
  }
  INFO(message);
  REQUIRE_THAT(message, Catch::Contains("roundtrip of 1280x720 does not fit in 512 MiB") &&
                            Catch::Contains("the smallest plan"));
  std::smatch m;
  REQUIRE(std::regex_search(message, m, std::regex("--vram ([0-9.]+)G")));
  options.budget_bytes = core::parse_size(m[1].str() + "G");
  CHECK_NOTHROW(core::plan_run(request, options));  // the budget it names is enough

  options = budget(3 * kGiB);
  options.tiling = false;
  CHECK_THROWS_WITH(core::plan_run(request, options), Catch::Contains("or allow tiling"));
  CHECK_THROWS_WITH(core::plan_run(wan21(core::Op::kDecode, 1281, 720), budget(0)),
                    Catch::Contains("must be a positive multiple of 8"));
}

TEST_CASE("the allocator cap is a no-op off CUDA", "[planner]") {
  CHECK(core::Device::of(torch::kCPU).cap_memory(8 * kGiB) == 0.0);
}

}  // namespace vaecodec::test

namespace vaecodec::test {

TEST_CASE("a budget that is only what is free keeps the unbudgeted plan where it fits", "[planner]") {
  const auto request = wan21(core::Op::kDecode, 1280, 720);
  core::PlannerOptions free_memory = budget(40 * kGiB, /*max_chunk=*/8);
  free_memory.budget_is_ceiling = true;
  free_memory.budget_note = "free of 79.2 GiB on cuda:0";
  const core::Plan roomy = core::plan_run(request, free_memory);
  CHECK(roomy.chunk == 1);
  CHECK_FALSE(roomy.tiles.tiled());
  CHECK(roomy.budget_bytes == 40 * kGiB);
  CHECK_THAT(roomy.summary(), Catch::Contains("of 40 GiB budget (free of 79.2 GiB on cuda:0)"));
  // It is the plan of a run without a budget.
  const core::Plan unbudgeted = core::plan_run(request, {});
  CHECK(roomy.estimate.total() == unbudgeted.estimate.total());
  // Too little free for the unbudgeted plan: the planner trades, as for any budget.
  free_memory.budget_bytes = 6 * kGiB;
  const core::Plan tight = core::plan_run(request, free_memory);
  const core::Plan given = core::plan_run(request, budget(6 * kGiB, 8));
  CHECK(tight.tiles.tiled() == given.tiles.tiled());
  CHECK(tight.chunk == given.chunk);
  CHECK(tight.estimate.total() <= 6 * kGiB);
}

}  // namespace vaecodec::test
