// bench --clip-on-host (Note [A clip in host memory] in app/bench_support.cpp): the clip streamed a chunk at
// a time from host memory gives what the clip held whole gives, and nothing of it is resident on the device.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "app/bench.h"
#include "tests/gpu_support.h"
#include "tests/test_support.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

app::BenchOptions tiny_options(const std::string& op, const std::string& device) {
  app::BenchOptions o;
  o.weights = (data_dir() / "wan21-tiny" / "weights.safetensors").string();
  o.op = op;
  o.device = device;
  o.dtype = "fp32";
  o.size = "64x48";
  o.frames = 9;
  o.autotune = false;  // the same algorithms both ways, on CUDA too
  return o;
}

// The op's output for the clip held whole and for the clip streamed from host memory.
std::pair<torch::Tensor, torch::Tensor> both_ways(const std::string& op, torch::Device device) {
  app::BenchOptions o = tiny_options(op, device.str());
  auto model = app::make_model(o, device, torch::kFloat);
  const app::BenchClip whole = app::make_bench_clip(o, *model, device, torch::kFloat);
  o.clip_on_host = true;
  const app::BenchClip host = app::make_bench_clip(o, *model, device, torch::kFloat);
  REQUIRE(host.on_host);
  CHECK(host.resident == 0);
  CHECK((op == "decode" ? host.latents : host.video).device().is_cpu());
  CHECK(torch::equal(op == "decode" ? host.latents : host.video,
                     (op == "decode" ? whole.latents : whole.video).cpu()));
  const auto a = app::run_op(*model, op, whole.video, whole.latents, whole.plan, whole.on_host).cpu();
  const auto b = app::run_op(*model, op, host.video, host.latents, host.plan, host.on_host);
  CHECK(b.device().is_cpu());
  return {a, b};
}

TEST_CASE("bench's clip streamed from host memory gives what the whole clip gives", "[cli][basic]") {
  for (const std::string op : {"encode", "decode", "roundtrip"}) {
    INFO(op);
    const auto [whole, streamed] = both_ways(op, torch::kCPU);
    REQUIRE(whole.sizes() == streamed.sizes());
    CHECK(torch::equal(whole, streamed));  // the same chunks, in the same order
  }
}

TEST_CASE("bench --clip-on-host says so in its JSON, and refuses --split", "[cli][basic]") {
  const auto r =
      run_cli("bench --weights " + quote(tiny_weights()) +
              " --device cpu --dtype fp32 --size 64x48 --frames 9 --runs 1 --warmup 0 --op roundtrip"
              " --clip-on-host --json");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("clip_on_host") == true);
  CHECK(j.at("resident_bytes") == 0);
  CHECK(j.at("median_s").get<double>() > 0);
  check_one_line(run_cli("bench --weights " + quote(tiny_weights()) +
                         " --devices 0,1 --split --clip-on-host --size 64x48 --frames 9"),
                 2, "--clip-on-host times one device");
}

TEST_CASE("a budget bench's resident clip does not fit in says that the plan counts the clip",
          "[cli][basic]") {
  const std::string args =
      "bench --weights " + quote(tiny_weights()) +
      " --device cpu --op encode --size 256x128 --frames 5 --runs 1 --warmup 0 --vram 1M";
  check_one_line(run_cli(args), 1,
                 "held on the device besides the run: bench's clip; --clip-on-host holds it");
  const auto r = run_cli(args + " --clip-on-host");
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Catch::Contains("does not fit in") && !Catch::Contains("bench's clip"));
}

TEST_CASE("on CUDA bench's clip in pinned host memory gives what the clip on the device gives", "[gpu]") {
  if (!cuda_here()) return;
  for (const std::string op : {"encode", "decode", "roundtrip"}) {
    INFO(op);
    const auto [whole, streamed] = both_ways(op, torch::kCUDA);
    REQUIRE(whole.sizes() == streamed.sizes());
    CHECK(torch::equal(whole, streamed));
  }
}

}  // namespace
}  // namespace vaecodec::test
