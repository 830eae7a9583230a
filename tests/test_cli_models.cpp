// The Wan2.2 and SeedVR2 models through the command line: inspect, roundtrip, encode and decode file to file
// on the CPU with the tiny golden models, latent files that record their model and refuse another one, and
// SeedVR2's latent scale. Outputs are probed with libavformat.

// LibTorch before Catch: c10 defines a CHECK macro of its own, and Catch's must be the one left.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "core/safetensors.h"
#include "io/latent_file.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

// A tiny golden model and what its latents look like.
struct TinyModel {
  std::string dir;     // under tests/data
  std::string family;  // ModelInfo::family
  int64_t latent_channels;
  int64_t spatial_factor;
  double latent_scale;
};

const TinyModel kWan22{"wan22-tiny", "wan2.2-vae", 48, 16, 1.0};
const TinyModel kSeedVR2{"seedvr2-tiny", "seedvr2-vae", 16, 8, 0.9152};

nlohmann::json tiny_config(const TinyModel& model) {
  return read_json(data_dir() / model.dir / "meta.json").at("config");
}

// The model's weights as the CLI can use them. SeedVR2's 8 norm groups leave no trace in the tensor shapes,
// so its copy states them in the file (Note [Config in the weights file] in core/models/registry.cpp).
std::filesystem::path weights_file(const TinyModel& model, const ScratchDir& dir) {
  const auto original = data_dir() / model.dir / "weights.safetensors";
  if (model.family != "seedvr2-vae") return original;
  const auto copy = dir / (model.dir + ".safetensors");
  if (!std::filesystem::exists(copy))
    core::write_safetensors(copy, read_tensors(original), {{"vaecodec_config", tiny_config(model).dump()}});
  return copy;
}

// Outputs of the same model compare exactly when written losslessly.
const std::string kLossless = " --codec ffv1";

std::string weights_arg(const TinyModel& model, const ScratchDir& weights) {
  return " --weights " + quote(weights_file(model, weights)) + " --device cpu --dtype fp32 --quiet";
}

// 6 frames of 70x42: neither a multiple of either model's spatial factor nor 1 + 4k frames, so every run
// pads and crops.
std::filesystem::path make_input(const ScratchDir& dir) {
  return make_clip(dir / "in.mp4",
                   "-f lavfi -i testsrc2=size=70x42:rate=24 -frames:v 6 -pix_fmt yuv420p -c:v libx264");
}

int64_t padded(int64_t size, int64_t factor) {
  return (size + factor - 1) / factor * factor;
}

// A clean failure: `status` (1: the run failed, 2: what was typed cannot work), one line on stderr that says
// `what`.
void check_refused(const CliResult& r, const std::string& what, int status = 1) {
  INFO("stderr: " << r.err);
  CHECK(r.status == status);
  CHECK_THAT(r.err, StartsWith("vaecodec: error: ") && Contains(what));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

// The luma plane of every frame as stored, through ffmpeg's extractplanes (no colour conversion).
std::string luma(const std::filesystem::path& video) {
  const std::string raw = video.string() + ".y";
  if (shell("ffmpeg -nostdin -loglevel error -y -i " + quote(video) + " -vf extractplanes=y -f rawvideo " +
            quote(raw)) != 0)
    throw std::runtime_error("ffmpeg could not extract the luma of " + video.string());
  std::ifstream in(raw, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ::unlink(raw.c_str());
  return bytes;
}

// PSNR in dB of two 8-bit planes of the same size; infinite when they are equal.
double luma_psnr(const std::filesystem::path& a, const std::filesystem::path& b) {
  const std::string x = luma(a), y = luma(b);
  if (x.size() != y.size() || x.empty()) return 0;
  double sum = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(static_cast<uint8_t>(x[i])) - static_cast<uint8_t>(y[i]);
    sum += d * d;
  }
  return sum == 0 ? INFINITY : 10.0 * std::log10(255.0 * 255.0 / (sum / static_cast<double>(x.size())));
}

nlohmann::json latent_record(const std::filesystem::path& path) {
  return nlohmann::json::parse(core::SafetensorsFile(path).metadata().at("vaecodec"));
}

}  // namespace

TEST_CASE("cli inspect names the Wan2.2 and SeedVR2 families and configs", "[cli][models]") {
  ScratchDir weights;
  for (const TinyModel& model : {kWan22, kSeedVR2}) {
    INFO(model.dir);
    const CliResult r = run_cli("inspect --json " + quote(weights_file(model, weights)));
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j.at("model") == model.family);
    CHECK(j.at("config") == tiny_config(model));
    CHECK(j.at("latent_channels") == model.latent_channels);
    CHECK(j.at("spatial_factor") == model.spatial_factor);
    CHECK(j.at("temporal_factor") == 4);
  }
}

TEST_CASE("cli roundtrip, encode and decode run the Wan2.2 and SeedVR2 models file to file",
          "[cli][models]") {
  ScratchDir weights;
  for (const TinyModel& model : {kWan22, kSeedVR2}) {
    SECTION(model.family) {
      ScratchDir dir;
      const auto in = make_input(dir);
      const std::string args = weights_arg(model, weights);
      const Probe source = probe(in);

      const CliResult trip =
          run_cli("roundtrip " + quote(in) + " -o " + quote(dir / "trip.mkv") + args + kLossless);
      INFO(trip.err);
      REQUIRE(trip.status == 0);
      const CliResult enc = run_cli("encode " + quote(in) + " -o " + quote(dir / "z.safetensors") + args);
      INFO(enc.err);
      REQUIRE(enc.status == 0);
      const CliResult dec = run_cli("decode " + quote(dir / "z.safetensors") + " -o " +
                                    quote(dir / "dec.mkv") + args + kLossless);
      INFO(dec.err);
      REQUIRE(dec.status == 0);
      CHECK(list_dir(dir.path()) ==
            std::vector<std::string>{"dec.mkv", "in.mp4", "trip.mkv", "z.safetensors"});

      // Latents of the padded clip: 9 frames (1 + 4k) -> 3 latent frames, sizes padded to the spatial factor.
      const auto z = core::SafetensorsFile(dir / "z.safetensors").load("latents");
      const int64_t f = model.spatial_factor;
      CHECK(z.sizes().vec() ==
            std::vector<int64_t>{1, model.latent_channels, 3, padded(42, f) / f, padded(70, f) / f});
      const auto record = latent_record(dir / "z.safetensors");
      CHECK(record.at("model").at("family") == model.family);
      CHECK(record.at("model").at("config") == tiny_config(model));
      CHECK(record.at("latent_channels") == model.latent_channels);
      CHECK(record.at("latent_scale").at("factor") == model.latent_scale);
      CHECK(record.at("latent_scale").at("applied") == false);

      for (const char* name : {"trip.mkv", "dec.mkv"}) {
        INFO(name);
        const Probe out = probe(dir / name);
        CHECK(out.codec == "ffv1");
        CHECK(out.frames() == 6);
        CHECK(out.width == 70);
        CHECK(out.height == 42);
        REQUIRE(out.pts_seconds.size() == source.pts_seconds.size());
        for (size_t i = 0; i < out.pts_seconds.size(); ++i)  // Matroska keeps milliseconds
          CHECK(out.pts_seconds[i] == Approx(source.pts_seconds[i]).margin(0.0005));
      }
      // decode(encode(x)) is the round trip: the same latents reach the same decoder.
      CHECK(luma_psnr(dir / "trip.mkv", dir / "dec.mkv") == INFINITY);
    }
  }
}

TEST_CASE("cli decode refuses latents of another model with one line", "[cli][models]") {
  ScratchDir weights, dir;
  const auto in = make_input(dir);
  REQUIRE(run_cli("encode " + quote(in) + " -o " + quote(dir / "seedvr2.safetensors") +
                  weights_arg(kSeedVR2, weights))
              .status == 0);
  REQUIRE(run_cli("encode " + quote(in) + " -o " + quote(dir / "wan22.safetensors") +
                  weights_arg(kWan22, weights))
              .status == 0);
  const auto decode = [&](const std::string& latents, const std::string& weights_args) {
    return run_cli("decode " + quote(dir / latents) + " -o " + quote(dir / "out.mp4") + weights_args);
  };

  SECTION("SeedVR2 latents, Wan2.1 weights: the same channel count, another family") {
    check_refused(decode("seedvr2.safetensors", " --weights " + quote(tiny_weights()) + " --quiet"),
                  "latents were made by seedvr2-vae, but the weights are wan2.1-vae");
  }
  SECTION("Wan2.2 latents, SeedVR2 weights") {
    check_refused(decode("wan22.safetensors", weights_arg(kSeedVR2, weights)),
                  "latents were made by wan2.2-vae, but the weights are seedvr2-vae");
  }
  SECTION("Wan2.2 latents without their record, SeedVR2 weights: the channel count tells") {
    const auto z = core::SafetensorsFile(dir / "wan22.safetensors").load("latents");
    core::write_safetensors(dir / "bare.safetensors", {{"samples", z}});
    check_refused(decode("bare.safetensors", weights_arg(kSeedVR2, weights) + " --fps 24"),
                  "latents have 48 channels, but the seedvr2-vae weights expect 16");
  }
  CHECK_FALSE(std::filesystem::exists(dir / "out.mp4"));
}

TEST_CASE("cli SeedVR2 latents are unscaled unless --latent-scale asks", "[cli][models]") {
  ScratchDir weights, dir;
  const auto in = make_input(dir);
  // Temporary files go to the scratch directory, to be seen there: --latent-scale makes none.
  const std::string env = "TMPDIR=" + quote(dir.path());
  const auto run = [&](const std::string& args) {
    return run_cli(args + weights_arg(kSeedVR2, weights), env);
  };
  REQUIRE(run("encode " + quote(in) + " -o " + quote(dir / "raw.safetensors")).status == 0);
  const CliResult scaled =
      run("encode " + quote(in) + " -o " + quote(dir / "scaled.safetensors") + " --latent-scale");
  INFO(scaled.err);
  REQUIRE(scaled.status == 0);

  const auto raw = core::SafetensorsFile(dir / "raw.safetensors").load("latents");
  const auto stored = core::SafetensorsFile(dir / "scaled.safetensors").load("latents");
  CHECK(latent_record(dir / "raw.safetensors").at("latent_scale") ==
        nlohmann::json{{"factor", 0.9152}, {"applied", false}});
  CHECK(latent_record(dir / "scaled.safetensors").at("latent_scale") ==
        nlohmann::json{{"factor", 0.9152}, {"applied", true}});
  CHECK(relative_error(stored, raw * 0.9152) < 1e-7);
  CHECK(relative_error(io::read_latents(dir / "scaled.safetensors").latents, raw) < 1e-7);  // read back raw

  // Decodes latents into a lossless video; whether it succeeded.
  const auto decode = [&](const std::string& latents, const std::string& video, const std::string& flags) {
    const CliResult r =
        run("decode " + quote(dir / latents) + " -o " + quote(dir / video) + " -y" + kLossless + flags);
    INFO(r.err);
    CHECK(r.status == 0);
    return r.status == 0;
  };

  REQUIRE(decode("raw.safetensors", "raw.mkv", ""));

  SECTION("a scaled file says so: decoded the same, with or without --latent-scale") {
    for (const std::string flag : {"", " --latent-scale"}) {
      INFO("flag '" << flag << "'");
      REQUIRE(decode("scaled.safetensors", "out.mkv", flag));
      CHECK(luma_psnr(dir / "raw.mkv", dir / "out.mkv") > 50);  // latents equal to a float32 rounding
    }
  }
  SECTION("--latent-scale on latents recorded unscaled is refused") {
    check_refused(
        run("decode " + quote(dir / "raw.safetensors") + " -o " + quote(dir / "out.mkv") + " --latent-scale"),
        "stored unscaled");
    CHECK_FALSE(std::filesystem::exists(dir / "out.mkv"));
  }
  SECTION("scaled latents without a record: --latent-scale divides") {
    core::write_safetensors(dir / "bare-raw.safetensors", {{"samples", raw}});
    core::write_safetensors(dir / "bare-scaled.safetensors", {{"samples", stored}});
    const std::string before = read_text(dir / "bare-scaled.safetensors");
    REQUIRE(decode("bare-raw.safetensors", "bare-raw.mkv", " --fps 24"));
    REQUIRE(decode("bare-scaled.safetensors", "out.mkv", " --fps 24 --latent-scale"));
    CHECK(luma_psnr(dir / "bare-raw.mkv", dir / "out.mkv") > 50);
    CHECK(read_text(dir / "bare-scaled.safetensors") == before);  // the input is read, never rewritten
    // Taken as raw, the same file decodes to another video.
    REQUIRE(decode("bare-scaled.safetensors", "out.mkv", " --fps 24"));
    CHECK(luma_psnr(dir / "bare-raw.mkv", dir / "out.mkv") < 45);  // ~38 dB
  }
  const auto files = list_dir(dir.path());
  CHECK(std::all_of(files.begin(), files.end(), [](const std::string& name) {
    return name.ends_with(".safetensors") || name.ends_with(".mkv") || name.ends_with(".mp4");
  }));
}

TEST_CASE("cli --model names the family, weights of another family are refused before any work",
          "[cli][models]") {
  ScratchDir weights, dir;
  const auto in = make_input(dir);
  const auto encode = [&](const std::string& args) {
    return run_cli("encode " + quote(in) + " -o " + quote(dir / "z.safetensors") + args);
  };
  SECTION("the detected family named again runs") {
    const CliResult r = encode(weights_arg(kWan22, weights) + " --model wan2.2-vae");
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(latent_record(dir / "z.safetensors").at("model").at("family") == "wan2.2-vae");
  }
  SECTION("Wan2.2 weights read as SeedVR2") {
    check_refused(encode(weights_arg(kWan22, weights) + " --model seedvr2-vae"),
                  "the tensors do not form a seedvr2-vae checkpoint");
    CHECK(list_dir(dir.path()) ==
          std::vector<std::string>{"in.mp4"});  // nothing written, not even a temporary
  }
  SECTION("an unknown family, named with the known ones") {
    check_refused(encode(weights_arg(kSeedVR2, weights) + " --model wan3-vae"),
                  "unknown model 'wan3-vae' (known: wan2.2-vae, wan2.1-vae, seedvr2-vae, ltx2-vae)", 2);
    CHECK(list_dir(dir.path()) == std::vector<std::string>{"in.mp4"});
  }
}

}  // namespace vaecodec::test
