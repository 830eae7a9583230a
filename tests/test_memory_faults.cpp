// Running out of device memory part way through a run (Note [Running out of memory]): the run plans again for
// what is free and starts over, and the result is that of the new plan from the start. Driven on the CPU by
// the test hook VAECODEC_TEST_OOM; the budget checks against free memory need a GPU.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <sstream>
#include <thread>

#include "core/device/device.h"
#include "core/device/memory_faults.h"
#include "core/models/registry.h"
#include "core/plan_for.h"
#include "core/safetensors.h"
#include "tests/gpu_support.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A budget between the smallest tiled plan's and the untiled one's, for the tiny model at 1024x768.
int64_t tiling_budget() {
  const auto model = core::build_model(core::load_checkpoint(tiny_weights()));
  const auto request = core::plan_request(model->info(), model->parameter_count(), torch::kFloat,
                                          core::Op::kRoundtrip, 1024, 768);
  core::PlannerOptions untiled;
  untiled.tiling = false;
  const int64_t whole = core::smallest_budget(request, untiled);
  const int64_t smallest = core::smallest_budget(request, {});
  REQUIRE(smallest < whole * 9 / 10);
  return (whole + smallest) / 2;
}

// Five frames of 1024x768, which tiling_budget() tiles.
std::filesystem::path tiling_clip(const ScratchDir& dir) {
  return make_clip(dir / "in.mp4",
                   "-f lavfi -i testsrc2=size=1024x768:rate=24 -frames:v 5 -pix_fmt yuv420p -c:v libx264");
}

}  // namespace

TEST_CASE("out of memory mid-run: planned again for what is free, started over, same as that plan",
          "[oom][cli]") {
  ScratchDir dir;
  const auto in = tiling_clip(dir);
  const int64_t budget = tiling_budget();
  const std::string common = " --weights " + quote(tiny_weights()) + " --device cpu";

  // The second model call fails; the memory then free is `budget`.
  const CliResult r = run_cli("roundtrip " + quote(in) + " -o " + quote(dir / "out.mp4") + common + " --json",
                              "VAECODEC_TEST_OOM=call=2,free=" + std::to_string(budget));
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.err, Catch::Contains("out of memory (out of memory at model call 2") &&
                        Catch::Contains("planning again for the") && Catch::Contains("starting over"));
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.at("replans").size() == 1);
  CHECK(j.at("replans")[0].at("budget_bytes") == budget);
  CHECK_THAT(j.at("replans")[0].at("reason").get<std::string>(), Catch::Contains("model call 2"));
  // The new plan keeps a larger share of its budget free than the one that failed (15%).
  const double margin = j.at("replans")[0].at("margin").get<double>();
  CHECK(margin == Approx(1 - 0.85 * 0.8));
  CHECK(j.at("plan").at("tiled") == true);
  CHECK(j.at("plan").at("budget_bytes") == budget);
  CHECK(j.at("frames") == 5);

  // The same as a run planned for that budget and margin from the start, frame for frame.
  const CliResult ref = run_cli("roundtrip " + quote(in) + " -o " + quote(dir / "ref.mp4") + common +
                                " --quiet --vram " + std::to_string(budget) + "B" +  // bytes, said so
                                " --vram-margin " + std::to_string(margin));
  INFO(ref.err);
  REQUIRE(ref.status == 0);
  CHECK(torch::equal(read_rgb(dir / "out.mp4"), read_rgb(dir / "ref.mp4")));
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"in.mp4", "out.mp4", "ref.mp4"});
}

TEST_CASE("out of memory within a given budget: the new plan keeps to that budget, with more of it free",
          "[oom][cli]") {
  ScratchDir dir;
  const auto in = tiling_clip(dir);
  const int64_t budget = tiling_budget();
  // The first model call fails with four times the budget free: the plan's own estimate fell short.
  const CliResult r =
      run_cli("encode " + quote(in) + " -o " + quote(dir / "z.safetensors") + " --weights " +
                  quote(tiny_weights()) + " --device cpu --json --vram " + std::to_string(budget) + "B",
              "VAECODEC_TEST_OOM=call=1,free=" + std::to_string(4 * budget));
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.err,
             Catch::Contains("planning again for the budget of") && Catch::Contains("32% of it kept free"));
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.at("replans").size() == 1);
  CHECK(j.at("replans")[0].at("budget_bytes") == budget);
  CHECK(j.at("plan").at("budget_bytes") == budget);
  CHECK(j.at("plan").at("estimate_bytes").get<int64_t>() <= static_cast<int64_t>(0.68 * budget));
}

TEST_CASE("out of memory again and again: one line with the free memory and the smallest budget",
          "[oom][cli]") {
  ScratchDir dir;
  const auto in = tiling_clip(dir);
  const std::string common = " --weights " + quote(tiny_weights()) + " --device cpu --quiet";
  SECTION("three failures: two re-plans, then the run gives up") {
    const CliResult r =
        run_cli("encode " + quote(in) + " -o " + quote(dir / "z.safetensors") + common,
                "VAECODEC_TEST_OOM=call=1,call=2,call=3,free=" + std::to_string(tiling_budget()));
    CHECK(r.status == 1);
    // Two warnings (each re-plan says why), then the error: its one last line.
    const auto lines = split_lines(r.err);
    REQUIRE(lines.size() == 3);
    CHECK_THAT(lines[0], Catch::Contains("model call 1") && Catch::Contains("planning again"));
    CHECK_THAT(lines[1], Catch::Contains("model call 2") && Catch::Contains("planning again"));
    CHECK_THAT(lines[2], Catch::StartsWith("vaecodec: error: ") &&
                             Catch::Contains("ran out of memory on cpu 3 times") &&
                             Catch::Contains("is free there now; the smallest plan needs a budget of"));
  }
  SECTION("too little free for any plan: the planner's line") {
    const CliResult r = run_cli("roundtrip " + quote(in) + " -o " + quote(dir / "out.mp4") + common,
                                "VAECODEC_TEST_OOM=call=1,free=100M");
    CHECK(r.status == 1);
    const auto lines = split_lines(r.err);
    REQUIRE(lines.size() == 2);  // the re-plan's warning, then the planner's one line
    CHECK_THAT(lines[1],
               Catch::StartsWith("vaecodec: error: ") &&
                   Catch::Contains("does not fit in 100 MiB (free on cpu after running out of memory)") &&
                   Catch::Contains("give --vram"));
  }
  SECTION("a malformed hook is an error, not ignored") {
    const CliResult r = run_cli("encode " + quote(in) + " -o " + quote(dir / "z.safetensors") + common,
                                "VAECODEC_TEST_OOM=sometimes");
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::Contains("VAECODEC_TEST_OOM='sometimes': expected call=N"));
  }
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"in.mp4"});
}

TEST_CASE("out of memory is told apart from other failures", "[oom]") {
  CHECK(core::is_out_of_memory(core::OutOfMemory("x")));
  CHECK_FALSE(core::is_out_of_memory(Error("out of memory")));  // only device errors say so by text
  CHECK_FALSE(core::is_out_of_memory(std::runtime_error("CUDA out of memory")));
}

// Another process holding GPU memory while it lives (tests/gpu_hog.cpp).
class GpuHog {
 public:
  GpuHog(const std::filesystem::path& dir, int64_t bytes) : log_(dir / "hog.log") {
    pipe_ =
        ::popen((quote(VAECODEC_GPU_HOG) + " 0 " + std::to_string(bytes) + " >" + quote(log_)).c_str(), "w");
    REQUIRE(pipe_ != nullptr);
    for (int i = 0; i < 600 && read_text(log_).find("held") == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    REQUIRE(read_text(log_).find("held") != std::string::npos);
  }
  ~GpuHog() { ::pclose(pipe_); }  // its standard input closes: it frees the memory and exits

 private:
  std::filesystem::path log_;
  FILE* pipe_ = nullptr;
};

TEST_CASE("a shared GPU: the default budget is what is free, a larger one is refused", "[gpu][oom]") {
  if (!cuda_here()) return;
  ScratchDir dir;
  // The released Wan2.1 architecture with random weights, and a 1080p clip: untiled, its decode wants about
  // 19 GiB, more than the 10 GiB left free below.
  const auto& family = core::default_model_family();
  const auto model = family.build(family.released_config);
  core::randomize_parameters(*model, /*seed=*/0);
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& item : model->named_parameters()) tensors[item.key()] = item.value().to(torch::kBFloat16);
  const auto weights = dir / "wan21-random.safetensors";
  core::write_safetensors(weights, tensors);
  const auto in =
      make_clip(dir / "in.mp4",
                "-f lavfi -i testsrc2=size=1920x1080:rate=24 -frames:v 17 -pix_fmt yuv420p -c:v libx264");

  const core::Device& gpu = core::Device::of(torch::Device(torch::kCUDA, 0));
  const int64_t keep_free = int64_t{10} << 30;
  const GpuHog hog(dir.path(), gpu.memory_info().free - keep_free);
  const int64_t free_now = gpu.memory_info().free;
  INFO("free with the other process holding the rest: " << free_now);

  const CliResult r = run_cli("roundtrip " + quote(in) + " -o " + quote(dir / "out.mp4") + " --weights " +
                              quote(weights) + " --json");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto plan = j.at("plan");
  CHECK(plan.at("budget_bytes").get<int64_t>() <= free_now + (int64_t{1} << 30));
  CHECK_THAT(plan.at("budget_note").get<std::string>(),
             Catch::Contains("free of") && Catch::Contains("cuda:0"));
  CHECK(plan.at("tiled") == true);  // untiled, the 1080p decode wants about 19 GiB
  CHECK(j.at("peak_device_bytes").get<int64_t>() <= plan.at("budget_bytes").get<int64_t>());
  CHECK(j.at("replans").empty());
  CHECK(probe(dir / "out.mp4").frames() == 17);

  const CliResult big = run_cli("roundtrip " + quote(in) + " -o " + quote(dir / "big.mp4") + " --weights " +
                                quote(weights) + " --vram 40G");
  CHECK(big.status == 1);
  CHECK_THAT(big.err, Catch::Contains("the memory budget of 40 GiB is more than the") &&
                          Catch::Contains("free on cuda:0 now") && Catch::Contains("--vram-force"));
  CHECK(std::count(big.err.begin(), big.err.end(), '\n') == 1);
  CHECK_FALSE(std::filesystem::exists(dir / "big.mp4"));
}

// Note [Offloaded caches]: a parked cache's host buffer is page-locked memory of exactly the cache's size
// (not LibTorch's pinned blocks, rounded up to a power of two), and carries a cache down and back up
// unchanged.
TEST_CASE("a parked cache's host buffer has the cache's layout, and off CUDA is plain host memory",
          "[memory]") {
  const auto t = torch::randn({1, 3, 5, 7, 9}).contiguous(torch::MemoryFormat::ChannelsLast3d);
  const torch::Tensor host = core::Device::of(torch::kCPU).pinned_exact_like(t);
  CHECK(host.device().is_cpu());
  CHECK(host.sizes() == t.sizes());
  CHECK(host.strides() == t.strides());
  CHECK(host.scalar_type() == t.scalar_type());
}

TEST_CASE("on CUDA, a parked cache's host buffer is pinned, exactly its size, and carries a round trip",
          "[gpu][memory]") {
  if (!cuda_here()) return;
  core::Device& gpu = core::Device::of(torch::Device(torch::kCUDA, 0));
  // 2 * 16 * 5 * 129 * 257 bf16 values: 5.06 MiB, which LibTorch's pinned allocator would round up to 8 MiB.
  const auto cache = torch::randn({2, 16, 5, 129, 257}, torch::TensorOptions().device(torch::kCUDA))
                         .to(torch::kBFloat16)
                         .contiguous(torch::MemoryFormat::ChannelsLast3d);
  torch::Tensor host = gpu.pinned_exact_like(cache);
  CHECK(host.is_pinned());
  CHECK(host.strides() == cache.strides());
  CHECK(host.storage().nbytes() == static_cast<size_t>(cache.numel() * cache.element_size()));
  host.copy_(cache, /*non_blocking=*/true);
  auto back = torch::empty_like(cache);
  back.copy_(host, /*non_blocking=*/true);
  gpu.synchronize();
  CHECK(torch::equal(back, cache));
}

}  // namespace vaecodec::test
