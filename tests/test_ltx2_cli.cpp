// The LTX-2 models through the command line on the CPU with the tiny golden weights: inspect, roundtrip,
// encode and decode file to file (a clip that is neither 1 + 8k frames nor a multiple of 32 in size, padded
// and cropped back), the latent record, and latents of another model refused in one line.
// LibTorch before Catch: c10 defines a CHECK macro of its own, and Catch's must be the one left.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/engine.h"
#include "core/safetensors.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

std::filesystem::path ltx2_weights(const std::string& tag) {
  return data_dir() / "ltx2-tiny" / ("weights-" + tag + ".safetensors");
}

std::string ltx2_args(const std::string& tag) {
  return " --weights " + quote(ltx2_weights(tag)) + " --device cpu --dtype fp32 --quiet";
}

// 6 frames of 70x42: padded to 9 frames (2 latent frames) and 96x64 (3x2 latent pixels).
std::filesystem::path make_input(const ScratchDir& dir) {
  return make_clip(dir / "in.mp4",
                   "-f lavfi -i testsrc2=size=70x42:rate=24 -frames:v 6 -pix_fmt yuv420p -c:v libx264");
}

void check_refused(const CliResult& r, const std::string& what, int status) {
  INFO("stderr: " << r.err);
  CHECK(r.status == status);
  CHECK_THAT(r.err, StartsWith("vaecodec: error: ") && Contains(what));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

}  // namespace

TEST_CASE("cli runs the LTX-2 models file to file on the CPU", "[cli][ltx2]") {
  ScratchDir dir;
  const auto in = make_input(dir);
  const Probe source = probe(in);
  for (const std::string tag : {"20", "23"}) {
    INFO("ltx2 " << tag);
    const auto inspect = run_cli("inspect " + quote(ltx2_weights(tag)));
    REQUIRE(inspect.status == 0);
    CHECK_THAT(inspect.out, Contains("ltx2-vae") && Contains("32x space, 8x time"));

    const auto z = dir / ("z" + tag + ".safetensors");
    const auto trip = dir / ("trip" + tag + ".mkv"), dec = dir / ("dec" + tag + ".mkv");
    REQUIRE(
        run_cli("roundtrip " + quote(in) + " -o " + quote(trip) + " --codec ffv1" + ltx2_args(tag)).status ==
        0);
    REQUIRE(run_cli("encode " + quote(in) + " -o " + quote(z) + ltx2_args(tag)).status == 0);
    REQUIRE(run_cli("decode " + quote(z) + " -o " + quote(dec) + " --codec ffv1" + ltx2_args(tag)).status ==
            0);

    core::SafetensorsFile latents(z);
    CHECK(latents.load("latents").sizes().vec() == std::vector<int64_t>{1, 4, 2, 2, 3});
    const auto record = nlohmann::json::parse(latents.metadata().at("vaecodec"));
    CHECK(record.at("model").at("family") == "ltx2-vae");
    CHECK(record.at("latent_channels") == 4);
    for (const auto& out : {trip, dec}) {
      INFO(out.filename());
      const Probe p = probe(out);
      CHECK(p.frames() == 6);
      CHECK(p.width == 70);
      CHECK(p.height == 42);
      CHECK(p.pts_seconds.size() == source.pts_seconds.size());
    }
  }
}

TEST_CASE("cli refuses latents of another model for LTX-2 weights with one line", "[cli][ltx2]") {
  ScratchDir dir;
  const auto in = make_input(dir);
  const auto wan = dir / "wan.safetensors";
  REQUIRE(run_cli("encode " + quote(in) + " -o " + quote(wan) + " --weights " +
                  quote(data_dir() / "wan21-tiny" / "weights.safetensors") + " --device cpu --quiet")
              .status == 0);
  const auto decode = [&](const std::filesystem::path& latents, const std::string& extra) {
    return run_cli("decode " + quote(latents) + " -o " + quote(dir / "out.mp4") + ltx2_args("23") + extra);
  };
  // Exit status 1, as for every family (tests/test_cli_models.cpp): the latents do not fit these weights.
  SECTION("a Wan2.1 latent file") {
    check_refused(decode(wan, ""), "latents were made by wan2.1-vae, but the weights are ltx2-vae", 1);
  }
  SECTION("bare latents with Wan2.1's 16 channels") {
    core::write_safetensors(dir / "bare.safetensors",
                            {{"samples", core::SafetensorsFile(wan).load("latents")}});
    check_refused(decode(dir / "bare.safetensors", " --fps 24"),
                  "latents have 16 channels, but the ltx2-vae weights expect 4", 1);
  }
  CHECK_FALSE(std::filesystem::exists(dir / "out.mp4"));
}

TEST_CASE("an LTX-2 encode of a clip that is not 1 + 8k frames is refused by the engine", "[ltx2]") {
  core::ModelOptions options;
  auto model = core::build_model(core::load_checkpoint(ltx2_weights("23")), options);
  const auto video = torch::zeros({1, 3, 12, 32, 64});
  CHECK_THROWS_WITH(core::encode_video(*model, video), Contains("encode needs 1 + 8k frames, got 12"));
}

}  // namespace vaecodec::test
