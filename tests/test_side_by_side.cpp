// `roundtrip --side-by-side F`: input | reconstruction | difference x4 as a second video, probed; exact on a
// pass-through model (registered here, the CLI run in this process), and the tiny Wan2.1 model's through the
// binary.

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "app/commands.h"
#include "core/models/registry.h"
#include "core/safetensors.h"
#include "tests/video_test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace vaecodec;
using namespace vaecodec::test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

// The pass-through VAE with one weight that it does not use, so that its checkpoint has a tensor to load.
class IdentityVae : public PassThroughVae {
 public:
  IdentityVae() {
    info_ = PassThroughVae::info();
    info_.family = "identity-pass-through";
    register_parameter("identity", torch::ones({1}), /*requires_grad=*/false);
  }
  const core::ModelInfo& info() const override { return info_; }

 private:
  core::ModelInfo info_;
};

// Its family, detected from a weights file holding the one tensor "identity".
core::ModelFamily identity_family() {
  core::ModelFamily f;
  f.name = "identity-pass-through";
  f.description = "a test family: the pass-through VAE";
  f.released_config = nlohmann::json::object();
  f.detect = [](const core::StateDict& tensors) -> std::optional<nlohmann::json> {
    if (tensors.size() != 1 || !tensors.count("identity")) return std::nullopt;
    return nlohmann::json::object();
  };
  f.describe = [](const nlohmann::json&) { return IdentityVae().info(); };
  f.build = [](const nlohmann::json&) -> std::shared_ptr<core::VaeModel> {
    return std::make_shared<IdentityVae>();
  };
  f.calibration = {
      {core::Op::kDecode, torch::kFloat, 0, 1, 64, 64, 9, 1, 0.25, 0, 1e-3, "a test row: decode"},
      {core::Op::kEncode, torch::kFloat, 0, 1, 64, 64, 9, 1, 0.125, 0, 1e-3, "a test row: encode"}};
  return f;
}

int run_in_process(std::vector<std::string> args) {
  static const bool registered = (core::register_model_family(identity_family()), true);
  (void)registered;
  args.insert(args.begin(), "vaecodec");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return app::run_cli(static_cast<int>(argv.size()), argv.data());
}

// The three thirds of side-by-side frames [T, 3, H, 3W].
std::array<torch::Tensor, 3> thirds(const torch::Tensor& frames) {
  const int64_t w = frames.size(3) / 3;
  return {frames.narrow(3, 0, w), frames.narrow(3, w, w), frames.narrow(3, 2 * w, w)};
}

fs::path make_rgb_clip(const fs::path& path) {
  return make_clip(path, "-f lavfi -i testsrc2=size=64x48:rate=24 -frames:v 9 -pix_fmt gbrp -c:v ffv1");
}

}  // namespace

TEST_CASE("side by side of a pass-through model: the input twice and a black difference",
          "[cli][side-by-side]") {
  ScratchDir dir;
  const fs::path weights = dir / "identity.safetensors";
  core::write_safetensors(weights, {{"identity", torch::ones({1})}});
  const fs::path clip = make_rgb_clip(dir / "in.mkv");
  const fs::path out = dir / "out.mkv", sbs = dir / "sbs.mkv";
  REQUIRE(run_in_process({"roundtrip", clip.string(), "-o", out.string(), "--side-by-side", sbs.string(),
                          "--weights", weights.string(), "--device", "cpu", "--codec", "ffv1", "--quiet"}) ==
          0);
  const Probe input = probe(clip), wide = probe(sbs);
  CHECK(wide.width == 3 * input.width);
  CHECK(wide.height == input.height);
  CHECK(wide.frames() == input.frames());
  CHECK(wide.pts_seconds == probe(out).pts_seconds);
  CHECK(wide.audio_streams == 0);

  const torch::Tensor original = read_rgb(clip);
  const auto [left, middle, right] = thirds(read_rgb(sbs));
  CHECK(psnr(original, left) > 80.0);  // lossless: the input as it was read
  CHECK(psnr(original, middle) > 80.0);
  CHECK(right.max().item<float>() < -0.99f);  // black: nothing lost
}

TEST_CASE("side by side of the tiny Wan2.1 model: its output and the amplified difference",
          "[cli][side-by-side]") {
  ScratchDir dir;
  const fs::path clip = make_rgb_clip(dir / "in.mkv");
  const fs::path out = dir / "out.mkv", sbs = dir / "sbs.mkv";
  const CliResult r =
      run_cli("roundtrip " + quote(clip) + " -o " + quote(out) + " --side-by-side " + quote(sbs) +
              " --weights " + quote(tiny_weights()) + " --device cpu --dtype fp32 --codec ffv1 --quiet");
  INFO("stderr: " << r.err);
  REQUIRE(r.status == 0);
  const torch::Tensor original = read_rgb(clip), reconstruction = read_rgb(out);
  const auto [left, middle, right] = thirds(read_rgb(sbs));
  CHECK(psnr(original, left) > 80.0);
  CHECK(psnr(reconstruction, middle) > 80.0);  // the output's frames, stored the same way
  // The difference, computed here from the stored thirds: |b - a| x4 in [0, 1] units, clipped.
  const torch::Tensor expected = ((middle - left).abs() * 2.0).clamp_max(1.0) * 2.0 - 1.0;
  CHECK((right - expected).abs().max().item<float>() < 0.05f);
  CHECK(right.mean().item<float>() > -0.9f);  // random weights lose a lot: the difference is not black
}

TEST_CASE("side by side refused for batches and over the input, nothing written", "[cli][side-by-side]") {
  ScratchDir dir;
  const fs::path clip = make_rgb_clip(dir / "in.mkv");
  const std::string weights = " --weights " + quote(tiny_weights()) + " --device cpu --quiet";
  const fs::path sbs = dir / "sbs.mkv";

  const fs::path other = make_rgb_clip(dir / "other.mkv");
  const CliResult batch = run_cli("roundtrip " + quote(clip) + " " + quote(other) + " -o " +
                                  quote(dir / "outs") + " --side-by-side " + quote(sbs) + weights);
  CHECK(batch.status == 2);
  CHECK_THAT(batch.err, StartsWith("vaecodec: error: --side-by-side writes one video for one input"));
  CHECK_FALSE(fs::exists(sbs));

  const CliResult over = run_cli("roundtrip " + quote(clip) + " -o " + quote(dir / "out.mkv") +
                                 " --side-by-side " + quote(clip) + weights);
  CHECK(over.status == 2);  // the output is the input: what was typed cannot work
  CHECK(std::count(over.err.begin(), over.err.end(), '\n') == 1);

  // A run that stops before its first frame leaves neither video nor a temporary file behind.
  ScratchDir outputs;
  const CliResult bad_graph =
      run_cli("roundtrip " + quote(clip) + " -o " + quote(outputs / "out.mkv") + " --side-by-side " +
              quote(outputs / "sbs.mkv") + " --vf 'nosuchfilter'" + weights);
  CHECK(bad_graph.status == 2);
  CHECK(list_dir(outputs.path()).empty());
}
