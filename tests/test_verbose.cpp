// --verbose: Note [What the engine applied] (core/kernel_log.h) and the full text of errors
// (app/errors.h).
#include <regex>
#include <sstream>

#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "app/errors.h"
#include "core/engine.h"
#include "core/engine_report.h"
#include "core/error.h"
#include "core/kernel_log.h"
#include "core/models/registry.h"
#include "io/log.h"
#include "tests/gpu_support.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

using Catch::Matchers::Contains;

// What `f` printed on std::cerr.
template <typename F>
std::string cerr_of(F&& f) {
  std::ostringstream captured;
  std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
  try {
    f();
  } catch (...) {
    std::cerr.rdbuf(old);
    throw;
  }
  std::cerr.rdbuf(old);
  return captured.str();
}

std::string full_error_of(const std::exception_ptr& error, bool verbose) {
  io::set_verbose(verbose);
  const std::string text = cerr_of([&] { app::print_full_error(error); });
  io::set_verbose(false);
  return text;
}

template <typename F>
std::exception_ptr thrown_by(F&& f) {
  try {
    f();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

// The calls counted on the "vaecodec: kernels: <kernel>: ..." line for `path`; 0 when not there.
int64_t calls(const std::string& err, const std::string& kernel, const std::string& path) {
  const std::regex line("vaecodec: kernels: " + kernel + ": ([^\n]*)");
  std::smatch m;
  if (!std::regex_search(err, m, line)) return 0;
  const std::regex entry(path + " ([0-9]+) calls?");
  std::smatch e;
  const std::string rest = m[1].str();
  if (!std::regex_search(rest, e, entry)) return 0;
  return std::stoll(e[1].str());
}

}  // namespace

TEST_CASE("errors: --verbose adds the full text of an error whose one line cut it short", "[reliability]") {
  const auto paragraph = thrown_by([] { TORCH_CHECK(false, "what went wrong\n\nwhat the library thinks"); });
  const std::string full = full_error_of(paragraph, true);
  CHECK_THAT(full, Catch::StartsWith("vaecodec: full error: what went wrong"));
  CHECK_THAT(full, Contains("what the library thinks"));
  // Without --verbose, nothing but the one line (printed by the caller).
  CHECK(full_error_of(paragraph, false).empty());
  // An error that is its one line already is not repeated.
  CHECK(full_error_of(thrown_by([] { throw Error("x.mp4: cannot open input"); }), true).empty());
}

TEST_CASE("kernel log: counts only when on, per kernel and path, in first-seen order", "[verbose]") {
  core::KernelLog::reset();
  core::KernelLog::enable(false);
  core::KernelLog::count("rms_norm_silu", "own kernel");
  CHECK(core::KernelLog::entries().empty());
  core::KernelLog::enable(true);
  core::KernelLog::count("rms_norm_silu", "own kernel");
  core::KernelLog::count("attention", "flash");
  core::KernelLog::count("rms_norm_silu", "composite");
  core::KernelLog::count("rms_norm_silu", "own kernel");
  const std::vector<std::string> lines = core::kernel_lines();
  core::KernelLog::enable(false);
  core::KernelLog::reset();
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "rms_norm_silu: own kernel 2 calls, composite 1 call");
  CHECK(lines[1] == "attention: flash 1 call");
}

TEST_CASE("cli --verbose: the engine's set-up, the plan and the kernels that ran, on the CPU",
          "[cli][verbose]") {
  ScratchDir dir;
  const auto clip =
      make_clip(dir / "in.mp4", "-f lavfi -i testsrc2=size=64x48:rate=24 -frames:v 5 -c:v libx264");
  const std::string weights = " --weights " + quote(tiny_weights());

  const CliResult r = run_cli("roundtrip " + quote(clip) + " -o " + quote(dir / "out.mp4") +
                              " --device cpu --verbose" + weights);
  INFO("stderr: " << r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.err, Contains("vaecodec: engine: device: cpu ("));
  CHECK_THAT(r.err, Contains("vaecodec: engine: model: wan2.1-vae, fp32, "));
  CHECK_THAT(
      r.err,
      Contains("layout channels-last (NDHWC)"));  // float32 on the CPU (Note [Channels-last on the CPU])
  CHECK_THAT(r.err, Contains("vaecodec: engine: convolutions: LibTorch's CPU kernels"));
  CHECK_THAT(r.err, Contains("vaecodec: engine: attention: scaled_dot_product_attention, backends allowed:"));
  CHECK_THAT(r.err, Contains("vaecodec: plan: roundtrip"));
  // Counted, not assumed: the encoder's and the decoder's middle attention ran on some CPU backend, and none
  // of the CUDA kernels did (their entry points saw CPU tensors and left the work to the composite path).
  const std::regex attention("vaecodec: kernels: attention: ([a-z-]+)[^\n]* ([0-9]+) calls?");
  std::smatch m;
  REQUIRE(std::regex_search(r.err, m, attention));
  CHECK(std::stoll(m[2].str()) >= 2);
  CHECK(r.err.find("own kernel") == std::string::npos);
  CHECK(calls(r.err, "rms_norm_silu", "own kernel") == 0);

  // --json keeps stdout for JSON; the plan and the engine's lines still go to stderr.
  const CliResult j = run_cli("roundtrip " + quote(clip) + " -o " + quote(dir / "out2.mp4") +
                              " --device cpu --verbose --json" + weights);
  REQUIRE(j.status == 0);
  CHECK_THAT(j.err, Contains("vaecodec: plan: roundtrip"));
  CHECK_THAT(j.err, Contains("vaecodec: engine: model:"));
  CHECK(j.out.find("vaecodec:") == std::string::npos);

  // Without --verbose none of it.
  const CliResult plain =
      run_cli("roundtrip " + quote(clip) + " -o " + quote(dir / "out3.mp4") + " --device cpu" + weights);
  REQUIRE(plain.status == 0);
  CHECK(plain.err.find("vaecodec: engine:") == std::string::npos);
  CHECK(plain.err.find("vaecodec: kernels:") == std::string::npos);
}

TEST_CASE("cli --verbose on the GPU: own kernels and a fused attention backend ran", "[gpu][verbose]") {
  if (!cuda_here()) return;
  ScratchDir dir;
  // 17 frames in chunks of one latent frame: 5 chunks each way, the chunks after the first counted too.
  const auto clip =
      make_clip(dir / "in.mp4", "-f lavfi -i testsrc2=size=256x128:rate=24 -frames:v 17 -c:v libx264");
  const CliResult r =
      run_cli("roundtrip " + quote(clip) + " -o " + quote(dir / "out.mp4") +
              " --device cuda --dtype bf16 --chunk 1 --verbose --weights " + quote(tiny_weights()));
  INFO("stderr: " << r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.err, Contains("compute capability"));
  CHECK_THAT(r.err, Contains("layout channels-last (NDHWC)"));
  CHECK_THAT(r.err, Contains("vaecodec: engine: convolutions: cuDNN "));
  CHECK_THAT(r.err, Contains("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"));
  CHECK(calls(r.err, "attention", "(?:flash|memory-efficient|cuDNN)") > 0);
  // Every call of our kernels took them, in the encoder and the decoder (Note [Doubled frames' layout] in
  // core/models/wan/wan_blocks.cpp: once each chunk after the first handed them a layout they refuse).
  for (const char* kernel : {"rms_norm_silu", "rms_norm", "add_residual", "interleave_phases"}) {
    INFO(kernel);
    CHECK(calls(r.err, kernel, "own kernel") > 0);
    CHECK(calls(r.err, kernel, "composite") == 0);
  }
}

TEST_CASE("on the GPU a channels-last bf16 decode runs our kernels on every call of every chunk",
          "[gpu][verbose]") {
  // Note [Doubled frames' layout] (core/models/wan/wan_blocks.cpp): each chunk after the first once handed
  // the interleave, the norm and the residual add a tensor they refuse, and a first chunk of several latent
  // frames did too. Counted as --verbose counts them (Note [What the engine applied]).
  if (!cuda_here()) return;
  auto model = core::build_model(core::load_checkpoint(tiny_weights()), {"", torch::kCUDA, torch::kBFloat16});
  REQUIRE(model->channels_last());
  const auto latent = read_tensors(data_dir() / "wan21-tiny" / "cases.safetensors").at("latent");
  REQUIRE(latent.size(2) == 5);
  for (const int64_t chunk : {1, 2}) {  // 5 chunks; 3 chunks, the first of two latent frames
    INFO("chunks of " << chunk << " latent frame(s)");
    core::KernelLog::reset();
    core::KernelLog::enable(true);
    const auto decoded = core::decode_latents(*model, latent, {chunk});
    core::KernelLog::enable(false);
    const auto entries = core::KernelLog::entries();
    core::KernelLog::reset();
    CHECK(decoded.size(2) == 17);
    const auto count = [&](const std::string& kernel, const std::string& path) {
      int64_t n = 0;
      for (const auto& e : entries)
        if (e.kernel == kernel && e.path == path) n += e.calls;
      return n;
    };
    for (const char* kernel : {"rms_norm_silu", "rms_norm", "add_residual", "interleave_phases"}) {
      INFO(kernel);
      CHECK(count(kernel, "own kernel") > 0);
      CHECK(count(kernel, "composite") == 0);
    }
    // Note [History written by the norm]: the chunks of four frames keep their history without a copy (a
    // first chunk of one frame cannot: its history reaches into the padding).
    CHECK(count("causal_history", "written by the norm") > 0);
  }
}

}  // namespace vaecodec::test
