// The plans of exact tiles (Note [Exact plans] in core/exact_plan.cpp) and the host memory budget
// (Note [Host memory budget] in core/host_memory.h): what the planner picks for budgets from generous to
// impossible, that more memory is never slower by its estimate, and the refusals, through the planner and the
// real CLI (the host's available memory through the test hook VAECODEC_TEST_MEM_AVAILABLE).
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "core/models/registry.h"
#include "core/plan_for.h"
#include "core/plan_model.h"
#include "tests/test_support.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

const core::VaeModel& released(const std::string& name) {
  static std::map<std::string, std::shared_ptr<core::VaeModel>> models;
  auto& m = models[name];
  if (!m) {
    const auto& family = core::find_model_family(name);
    m = family.build(family.released_config);
    m->to(torch::kBFloat16);
  }
  return *m;
}

core::PlanRequest request(const std::string& name, core::Op op, int64_t width, int64_t height,
                          int64_t latent_frames = 21) {
  const auto& model = released(name);
  return core::plan_request(model, {op, width, height, latent_frames});
}

core::PlannerOptions budget(int64_t bytes, int64_t host = 0) {
  core::PlannerOptions o;
  o.budget_bytes = bytes;
  o.max_chunk = 4;
  o.host_budget_bytes = host;
  return o;
}

}  // namespace

TEST_CASE("the planner's time: the calibration run's own, and attention that grows with the frame's square",
          "[planner][exact]") {
  // Note [Plan cost]: at each family's calibration size the whole-frame plan's time is the measured one; the
  // attention over whole latent frames is 4 x tokens^2 x channels per latent frame at kAttentionRate.
  for (const core::ModelFamily& family : core::model_families()) {
    for (const core::MemoryCalibration& row : family.calibration) {
      if (row.seconds <= 0 || row.dtype != torch::kBFloat16) continue;
      INFO(family.name << " " << core::op_name(row.op) << " " << row.width << "x" << row.height);
      const int64_t tf = released(family.name).info().temporal_factor;
      const int64_t latent_frames = 1 + (row.frames - 1) / tf;
      const core::Plan p = core::plan_run(request(family.name, row.op, row.width, row.height, latent_frames),
                                          budget(80 * kGiB));
      CHECK_FALSE(p.tiles.tiled());
      // The planner counts temporal_factor frames per latent frame (84 for 81; the attention, counted per
      // latent frame, not: a few per mille) and a fixed cost per call.
      const double frames = static_cast<double>(tf * latent_frames);
      const double calls = static_cast<double>(latent_frames) / static_cast<double>(p.chunk);
      CHECK(p.seconds == Approx(row.seconds * frames / static_cast<double>(row.frames) +
                                calls * core::plan_model::kCallSeconds)
                             .epsilon(3e-3));
    }
  }
  const core::PlanRequest hd = request("wan2.1-vae", core::Op::kDecode, 1280, 720);
  CHECK(hd.decode_attention == 384);
  CHECK(core::plan_model::attention_seconds(hd, 14400) ==
        Approx(4.0 * 14400 * 14400 * 384 / core::plan_model::kAttentionRate));
  const core::Plan at_hd = core::plan_run(hd, budget(80 * kGiB));
  const core::Plan at_4k =
      core::plan_run(request("wan2.1-vae", core::Op::kDecode, 3840, 2160), budget(400 * kGiB));
  // 9x the pixels; the attention's share makes it more than 9x the time.
  CHECK(at_4k.seconds > 9.5 * at_hd.seconds);
}

TEST_CASE("the Wan VAEs plan exact tiles where the whole frame does not fit, SeedVR2 tiles through time",
          "[planner][exact]") {
  for (const auto& [name, op] :
       std::vector<std::pair<std::string, core::Op>>{{"wan2.1-vae", core::Op::kDecode},
                                                     {"wan2.1-vae", core::Op::kEncode},
                                                     {"wan2.2-vae", core::Op::kDecode}}) {
    INFO(name << " " << core::op_name(op));
    const core::PlanRequest r = request(name, op, 1920, 1088);
    CHECK(r.exact_tiles);
    const core::Plan whole = core::plan_run(r, budget(80 * kGiB));
    CHECK_FALSE(whole.tiles.tiled());
    CHECK(whole.split == core::SplitKind::kWhole);
    CHECK(whole.cost == Approx(1.0));
    const core::Plan small = core::plan_run(r, budget(8 * kGiB));
    CHECK(small.tiles.tiled());
    CHECK(small.split == core::SplitKind::kExactTiles);
    CHECK(small.tiles.exact);
    CHECK(small.estimate.total() <= static_cast<int64_t>(8 * kGiB * 0.85));
    CHECK(small.estimate.host >= int64_t{1} << 30);
    CHECK(small.seconds > whole.seconds);
    CHECK(small.cost < 1.3);  // the margins' extra work and the model calls, not copies
    const nlohmann::json j = small.to_json();
    CHECK(j.at("exact_tiles") == true);
    CHECK(j.at("split") == "tiles through time");
    CHECK(j.at("host_estimate_bytes").get<int64_t>() == small.estimate.host);
    CHECK(j.at("estimated_seconds").get<double>() == Approx(small.seconds));
  }
  const core::PlanRequest seedvr2 = request("seedvr2-vae", core::Op::kDecode, 1920, 1080);
  CHECK_FALSE(seedvr2.exact_tiles);
  CHECK(seedvr2.tiles_through_time);
  const core::Plan through_time = core::plan_run(seedvr2, budget(8 * kGiB));
  CHECK(through_time.tiles.tiled());
  CHECK_FALSE(through_time.tiles.exact);
  CHECK(through_time.tiles.through_time);
  CHECK(through_time.split == core::SplitKind::kExactTiles);
  CHECK(through_time.to_json().at("exact_tiles") == false);
  CHECK(through_time.to_json().at("tile_kind") == "crop");  // the decode's (Note [Crop tiles])
}

TEST_CASE("more memory is never slower by the planner's estimate", "[planner][exact]") {
  for (const auto& [w, h] : std::vector<std::pair<int64_t, int64_t>>{{1280, 720}, {1920, 1080}, {3840, 2160}})
    for (core::Op op : {core::Op::kDecode, core::Op::kEncode}) {
      INFO(core::op_name(op) << " " << w << "x" << h);
      const core::PlanRequest r = request("wan2.1-vae", op, w, h);
      double previous = 1e30;
      for (int64_t gib : {8, 12, 16, 24, 48, 80}) {
        core::Plan p;
        try {
          p = core::plan_run(r, budget(gib * kGiB));
        } catch (const Error&) {
          continue;  // 4K does not fit in 8 GiB at all
        }
        INFO(gib << " GiB: " << p.summary());
        CHECK(p.seconds <= previous * 1.0001);
        previous = p.seconds;
      }
    }
}

TEST_CASE("a long clip parks the tiles' caches in host memory between windows, within the host budget",
          "[planner][exact]") {
  // 1080p decode of 1001 frames (251 latent frames): the whole clip's frames do not fit in 8 GiB.
  const core::PlanRequest r = request("wan2.1-vae", core::Op::kDecode, 1920, 1080, 251);
  const core::Plan p = core::plan_run(r, budget(8 * kGiB, 64 * kGiB));
  REQUIRE(p.tiles.exact);
  CHECK(p.window > 0);
  CHECK(p.estimate.host_cache > 0);
  CHECK(p.estimate.host <= 64 * kGiB);
  // A host with less than the caches: refused before any work, both numbers named.
  try {
    core::plan_run(r, budget(8 * kGiB, 3 * kGiB));
    FAIL("planned in 3 GiB of host memory");
  } catch (const Error& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK_THAT(m, Catch::Contains("does not fit in 8 GiB") || Catch::Contains("of host memory"));
    CHECK_THAT(m, Catch::Contains("3 GiB"));
  }
}

TEST_CASE("a host budget below what any plan keeps there is refused in one line", "[planner][exact]") {
  const core::PlanRequest r = request("wan2.1-vae", core::Op::kDecode, 1280, 720);
  try {
    core::plan_run(r, budget(0, kGiB / 2));
    FAIL("planned in 512 MiB of host memory");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("needs 1 GiB of host memory, more than the 512 MiB") &&
                             Catch::Contains("give --host-memory 1G or more"));
  }
}

TEST_CASE("a refusal names the options as the front end spells them", "[planner][exact]") {
  // Note [Option spellings]: the CLI's flags, Python's keywords; Python has no host memory option to name.
  const core::PlanRequest r = request("wan2.1-vae", core::Op::kDecode, 1280, 720);
  core::PlannerOptions host = budget(0, kGiB / 2), device = budget(kGiB / 4);
  host.spelling = device.spelling = core::OptionSpelling::python();
  CHECK_THROWS_WITH(
      core::plan_run(r, host),
      Catch::Contains("it may use; free host memory for it to use 1G or more") && !Catch::Contains("--"));
  CHECK_THROWS_WITH(core::plan_run(r, device), Catch::Contains("does not fit in 256 MiB") &&
                                                   Catch::Contains("; give vram='") &&
                                                   !Catch::Contains("--"));
  device.spelling = core::OptionSpelling::cli();
  CHECK_THROWS_WITH(core::plan_run(r, device), Catch::Contains("; give --vram "));
}

TEST_CASE("the CLI takes a host memory budget, or what the host has available", "[cli][exact]") {
  const CliResult unit = run_cli("plan --size 1920x1080 --vram 8G --host-memory 8");
  CHECK(unit.status == 2);
  CHECK_THAT(unit.err, Catch::Contains("--host-memory 8 has no unit"));
  const CliResult huge = run_cli("plan --size 1920x1080 --vram 8G --host-memory 100T");
  CHECK(huge.status == 2);
  CHECK_THAT(huge.err, Catch::Contains("is more than the") && Catch::Contains("of memory this host has"));
  CHECK(std::count(huge.err.begin(), huge.err.end(), '\n') == 1);

  const CliResult fits = run_cli("plan --size 1920x1080 --vram 8G --host-memory 4G --json");
  REQUIRE(fits.status == 0);
  const auto plan = nlohmann::json::parse(fits.out).at("plan");
  CHECK(plan.at("exact_tiles") == true);
  CHECK(plan.at("host_budget_bytes").get<int64_t>() == 4 * kGiB);
  CHECK(plan.at("host_estimate_bytes").get<int64_t>() <= 4 * kGiB);

  // 1.5 GiB available: the margin of 1 GiB leaves 512 MiB, less than the process itself.
  const CliResult tight = run_cli("plan --size 1920x1080 --vram 8G",
                                  "VAECODEC_TEST_MEM_AVAILABLE=" + std::to_string(3 * kGiB / 2));
  CHECK(tight.status == 1);
  CHECK_THAT(tight.err, Catch::Contains("of host memory, more than the 512 MiB (available on this host") &&
                            Catch::Contains("--host-memory"));
  CHECK(std::count(tight.err.begin(), tight.err.end(), '\n') == 1);
}

}  // namespace vaecodec::test
