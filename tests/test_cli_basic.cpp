// The first commands, run as a user runs them: --version, info, inspect, bench.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <sys/wait.h>

#include "core/kernels/conv3d.h"
#include "tests/test_support.h"

extern "C" {
#include <libavcodec/avcodec.h>
}

namespace vaecodec::test {
namespace {

struct Result {
  int status = -1;
  std::string out;  // stdout and stderr together
};

// `command` in a shell, its stdout and stderr together.
Result run_shell(const std::string& command) {
  Result r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer{};
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) r.out.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

Result run_cli(const std::string& args) {
  return run_shell(std::string(VAECODEC_BINARY) + " " + args);
}

}  // namespace

TEST_CASE("vaecodec --version names the version", "[cli][basic]") {
  const auto r = run_cli("--version");
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains(std::string("vaecodec ") + VAECODEC_VERSION));
}

TEST_CASE("vaecodec info lists the library versions and the GPUs", "[cli][basic]") {
  const auto r = run_cli("info");
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("LibTorch    2.11.0") && Catch::Contains("CUDA") &&
                        Catch::Contains("cuDNN") && Catch::Contains("FFmpeg      5.1"));
  CHECK_THAT(r.out, Catch::Contains("GPU "));
  const auto j = nlohmann::json::parse(run_cli("info --json").out);
  CHECK(j.at("libtorch") == "2.11.0");
  CHECK(j.at("gpus").is_array());
  // Whether the Hopper convolutions were built, as the library says; a GPU takes them only at compute 9.0.
  CHECK(j.at("hopper_conv_kernels") == core::kernels::conv3d_sm90_built());
  CHECK_THAT(r.out, Catch::Contains(core::kernels::conv3d_sm90_built()
                                        ? "Own convs   Hopper implicit GEMM (sm_90a, --conv): built"
                                        : "Own convs   Hopper implicit GEMM (sm_90a, --conv): not built"));
  for (const auto& g : j.at("gpus"))
    CHECK(g.at("own_conv_kernels") ==
          (core::kernels::conv3d_sm90_built() && g.at("compute_capability") == "9.0"));
  if (j.at("gpus").empty()) CHECK_THAT(r.out, Catch::Contains("no CUDA device"));
  // The GPU encoders, each as the ffmpeg program finds it on this machine.
  CHECK_THAT(r.out, Catch::Contains("GPU encode  "));
  REQUIRE(j.at("gpu_encoders").is_array());
  std::vector<std::string> listed, linked;  // what info lists, what the linked FFmpeg has
  for (const auto& e : j.at("gpu_encoders")) listed.push_back(e.at("encoder"));
  for (const char* name : {"h264_nvenc", "hevc_nvenc"})
    if (avcodec_find_encoder_by_name(name)) linked.push_back(name);
  CHECK(listed == linked);
  for (const auto& e : j.at("gpu_encoders")) {
    const std::string name = e.at("encoder");
    INFO(name);
    const int status = std::system(
        ("ffmpeg -v quiet -f lavfi -i testsrc2=size=256x256:rate=25 -frames:v 2 -c:v " + name + " -f null -")
            .c_str());
    const bool works = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    CHECK(e.at("works") == works);
    CHECK(e.at("why").is_null() == works);
  }
}

TEST_CASE("vaecodec inspect describes a weights file", "[cli][basic]") {
  const auto path = (data_dir() / "wan21-tiny" / "weights.pth").string();
  const auto r = run_cli("inspect " + path);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("pth (original layout)") && Catch::Contains("wan2.1-vae") &&
                        Catch::Contains("\"dim\":8") && Catch::Contains("16 channels, 8x space, 4x time"));
  const auto j = nlohmann::json::parse(run_cli("inspect --json " + path).out);
  CHECK(j.at("model") == "wan2.1-vae");
  CHECK(j.at("tensors") == 194);  // the tiny model has the released model's tensor names
  int64_t params = 0;
  for (const auto& [name, t] : read_tensors(data_dir() / "wan21-tiny" / "weights.safetensors"))
    params += t.numel();
  CHECK(j.at("parameters") == params);
  CHECK(j.at("dtypes").at("fp32") == 194);

  const auto bad = run_cli("inspect " + (data_dir() / "wan21-tiny" / "meta.json").string());
  CHECK(bad.status == 1);
  CHECK_THAT(bad.out,
             Catch::StartsWith("vaecodec: error: ") && Catch::Contains("meta.json: not a checkpoint"));
}

TEST_CASE("bench times the model, prints JSON and writes a kernel trace", "[cli][basic]") {
  // The CPU run of the tiny model: what bench reports, and --trace's Chrome trace of one extra run (on a GPU
  // it also holds the kernels; scripts/dev/trace_summary.py reads it).
  TempDir dir;
  const auto trace = dir / "trace.json";
  const auto weights = data_dir() / "wan21-tiny" / "weights.safetensors";
  const auto r =
      run_cli("bench --weights " + weights.string() +
              " --device cpu --dtype fp32 --size 64x48 --frames 5 --runs 2 --warmup 0 --json --trace " +
              trace.string());
  INFO(r.out);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  CHECK(j.at("op") == "decode");
  CHECK(j.at("runs").size() == 2);
  CHECK(j.at("median_s").get<double>() > 0);
  CHECK(j.at("model_tflop").get<double>() > 0);
  // The timed runs' own host peak (Linux resets VmHWM after the clip is made): what the process held as they
  // began (the kernel updates the peak page by page: within a few MiB), and the runs of a 64x48 clip add far
  // less than a GiB to it.
  const auto before = j.at("host_rss_before_runs_bytes").get<int64_t>();
  const auto peak = j.at("peak_host_rss_runs_bytes").get<int64_t>();
  CHECK(before > 0);
  CHECK(peak >= before - (int64_t{4} << 20));
  CHECK(peak - before < (int64_t{1} << 30));
  REQUIRE(std::filesystem::exists(trace));
  const auto events = read_json(trace).at("traceEvents");
  int convolutions = 0;
  for (const auto& e : events)
    if (e.value("cat", "") == "cpu_op" && e.value("name", "").find("conv") != std::string::npos)
      ++convolutions;
  CHECK(convolutions > 0);
  // It holds the allocator's allocations too, which scripts/dev/trace_memory.py reads back: what is alive at
  // the peak, by the operator that made it (here the host's allocator).
  int allocations = 0;
  for (const auto& e : events)
    if (e.value("name", "") == "[memory]" && e.at("args").value("Bytes", int64_t{0}) > 0) ++allocations;
  CHECK(allocations > 0);
  const auto script = data_dir().parent_path().parent_path() / "scripts" / "dev" / "trace_memory.py";
  const auto peak_of =
      run_shell(std::string(VAECODEC_PYTHON) + " " + script.string() + " " + trace.string() + " --device -1");
  INFO(peak_of.out);
  CHECK(peak_of.status == 0);
  CHECK_THAT(peak_of.out, Catch::StartsWith("peak allocated ") && Catch::Contains("conv"));
}

TEST_CASE("bench compares a tiled plan with the untiled run", "[cli][basic]") {
  // Exact tiles (Note [Exact tiles] in core/trunk.h): in float32 the 2x2 tiles give the untiled frames to
  // float32's rounding (oneDNN picks its algorithm by shape, Note [Convolutions on the CPU]: 2.4e-6 measured;
  // float64 is exact to 1e-12 in test_exact_tiles.cpp).
  const auto weights = data_dir() / "wan21-tiny" / "weights.safetensors";
  const auto r = run_cli("bench --weights " + weights.string() +
                         " --device cpu --dtype fp32 --size 128x96 --frames 9 --runs 1 --warmup 0 --tile 8"
                         " --compare-untiled --json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  CHECK(j.at("plan").at("exact_tiles") == true);
  CHECK(j.at("plan").at("tiles").at("rows") == 2);
  CHECK(j.at("plan").at("tiles").at("cols") == 2);
  CHECK(j.at("tiled_vs_untiled_relative_l2").get<double>() <= 5e-6);
  CHECK(j.at("tiled_vs_untiled_psnr_db").get<double>() > 100);
}

}  // namespace vaecodec::test
