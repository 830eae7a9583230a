// encode --format musubi (Note [musubi-tuner's latent cache]): the CLI on a folder of generated clips with
// the tiny Wan2.1 weights; the cache read back by tests/musubi_cache_check.py with the safetensors package,
// the way musubi-tuner's loader reads it, and compared with vaecodec's own latents of the same frames.

#include <sstream>

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/models/registry.h"
#include "core/safetensors.h"
#include "io/latent_file.h"
#include "io/musubi_cache.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

std::string weights() {
  return " --weights " + quote(tiny_weights()) + " --quiet";
}

// The checker's output, one JSON object per cache file; status 0 or the reason.
struct CacheCheck {
  int status = -1;
  std::vector<nlohmann::json> files;
  std::string err;
};
CacheCheck check_cache(const std::filesystem::path& folder, const std::vector<std::string>& expected) {
  const std::string script = (data_dir().parent_path() / "musubi_cache_check.py").string();  // tests/
  std::string names;
  for (const std::string& name : expected) names += " " + quote(name);
  const ScratchDir logs;
  const int status = shell(quote(VAECODEC_PYTHON) + " " + quote(script) + " " + quote(folder) + names + " >" +
                           quote(logs / "out") + " 2>" + quote(logs / "err"));
  CacheCheck c;
  c.status = status;
  c.err = read_text(logs / "err");
  std::istringstream lines(read_text(logs / "out"));
  for (std::string line; std::getline(lines, line);) c.files.push_back(nlohmann::json::parse(line));
  return c;
}

core::ModelInfo info_of(const std::string& family) {
  core::ModelInfo info;
  info.family = family;
  return info;
}

}  // namespace

TEST_CASE("musubi: the family record's musubi-tuner architecture decides which models write its cache",
          "[musubi]") {
  const std::string refused =
      "--format musubi writes musubi-tuner's Wan cache, which holds latents of the Wan2.1 VAE (Wan2.1 and "
      "Wan2.2-14B); these weights are ";
  // The registered families: Wan2.1's record names the architecture, the others none; a family the registry
  // does not know is refused too.
  CHECK(core::find_model_family("wan2.1-vae").musubi_architecture == "wan");
  CHECK_NOTHROW(io::check_musubi_model(info_of("wan2.1-vae")));
  for (const std::string family : {"wan2.2-vae", "seedvr2-vae", "ltx2-vae", "no-such-family"}) {
    INFO(family);
    CHECK_THROWS_AS(io::check_musubi_model(info_of(family)), UsageError);
    CHECK_THROWS_WITH(io::check_musubi_model(info_of(family)), refused + family);
  }
  // The field decides, not the name: Wan2.1's record without it is refused, Wan2.2's with it is taken
  // (records changed here only, never registered).
  core::ModelFamily wan21 = core::find_model_family("wan2.1-vae");
  wan21.musubi_architecture.clear();
  CHECK_THROWS_WITH(io::check_musubi_family(wan21), refused + "wan2.1-vae");
  core::ModelFamily wan22 = core::find_model_family("wan2.2-vae");
  wan22.musubi_architecture = "wan";
  CHECK_NOTHROW(io::check_musubi_family(wan22));
}

TEST_CASE("musubi: cache file names, window frames and bucket sizes", "[musubi]") {
  CHECK(io::musubi_file_name({"clip_one", 12, 81, 832, 480}) ==
        "clip_one_00012-081_0832x0480_wan.safetensors");
  CHECK(io::musubi_file_name({"a", 0, 1, 16, 16}) == "a_00000-001_0016x0016_wan.safetensors");
  CHECK(io::musubi_frame_count(1) == 1);
  CHECK(io::musubi_frame_count(4) == 1);
  CHECK(io::musubi_frame_count(5) == 5);
  CHECK(io::musubi_frame_count(18) == 17);
  CHECK(io::musubi_frame_count(81) == 81);
}

TEST_CASE("cli encode --format musubi: a folder of clips becomes a cache musubi-tuner's loader reads",
          "[cli][musubi]") {
  ScratchDir clips, cache, scratch;
  // 18 frames (cut to 17) and 9 frames (kept), at sizes that are multiples of 16.
  make_clip(clips / "walk_cycle.mp4",
            "-f lavfi -i testsrc2=size=64x48:rate=24 -frames:v 18 -pix_fmt yuv420p -c:v libx264");
  make_clip(clips / "b.mkv",
            "-f lavfi -i testsrc2=size=32x32:rate=16 -frames:v 9 -pix_fmt yuv420p -c:v ffv1");
  const CliResult r = run_cli("encode " + quote(clips.path()) + " -o " + quote(cache.path()) +
                              " --format musubi" + weights());
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.err, Contains("took the first 17 of its 18 frames"));
  const std::string a = "walk_cycle_00000-017_0064x0048_wan.safetensors";
  const std::string b = "b_00000-009_0032x0032_wan.safetensors";
  REQUIRE(list_dir(cache.path()) == std::vector<std::string>{b, a});

  const CacheCheck check = check_cache(cache.path(), {a, b});
  INFO(check.err);
  REQUIRE(check.status == 0);
  REQUIRE(check.files.size() == 2);
  const nlohmann::json& walk = check.files[1];
  CHECK(walk["key"] == "walk_cycle");
  CHECK(walk["tensor"] == "latents_5x6x8_bfloat16");
  CHECK(walk["shape"] == std::vector<int>{16, 5, 6, 8});
  CHECK(walk["text_encoder_cache"] == "walk_cycle_wan_te.safetensors");
  CHECK(check.files[0]["tensor"] == "latents_3x4x4_bfloat16");

  // The same numbers as vaecodec's own latents of the 17 frames kept, normalized the same way, in bf16.
  const auto own = scratch / "own.safetensors";
  REQUIRE(
      run_cli("encode " + quote(clips / "walk_cycle.mp4") + " -o " + quote(own) + " --frames 17" + weights())
          .status == 0);
  const core::SafetensorsFile file(cache / a);
  CHECK(file.metadata().at("architecture") == "wan");
  CHECK(file.metadata().at("frame_count") == "17");
  const torch::Tensor cached = file.load("latents_5x6x8_bfloat16");
  CHECK(cached.scalar_type() == torch::kBFloat16);
  const torch::Tensor expected = io::read_latents(own).latents[0].to(torch::kBFloat16);
  CHECK(torch::equal(cached, expected));

  // vaecodec reads its musubi files back: they decode to the clip's 17 frames.
  const auto video = scratch / "decoded.mkv";
  const CliResult d = run_cli("decode " + quote(cache / a) + " -o " + quote(video) + weights());
  INFO(d.err);
  REQUIRE(d.status == 0);
  const Probe p = probe(video);
  CHECK(p.frames() == 17);
  CHECK(p.width == 64);
  CHECK(p.height == 48);
}

TEST_CASE(
    "cli encode --format musubi --skip-existing: a clip whose cache file exists is skipped, by its pattern",
    "[cli][musubi]") {
  ScratchDir clips, cache;
  make_clip(clips / "a.mp4",
            "-f lavfi -i testsrc2=size=32x32:rate=24 -frames:v 5 -pix_fmt yuv420p -c:v libx264");
  make_clip(clips / "a_b.mp4",
            "-f lavfi -i testsrc2=size=32x32:rate=24 -frames:v 5 -pix_fmt yuv420p -c:v libx264");
  const std::string command = "encode " + quote(clips.path()) + " -o " + quote(cache.path()) +
                              " --format musubi --skip-existing --json" + weights();
  const std::string a = "a_00000-005_0032x0032_wan.safetensors";
  const std::string ab = "a_b_00000-005_0032x0032_wan.safetensors";
  REQUIRE(run_cli(command).status == 0);
  REQUIRE(list_dir(cache.path()) == std::vector<std::string>{a, ab});

  // Only a_b's file remains: "a" must not take it for its own (the stem is a prefix of the other's).
  std::filesystem::remove(cache / a);
  const CliResult again = run_cli(command);
  INFO(again.err);
  REQUIRE(again.status == 0);
  CHECK_THAT(again.err, Contains("skipped " + (clips / "a_b.mp4").string() + ": " + (cache / ab).string()));
  CHECK(again.err.find("skipped " + (clips / "a.mp4").string()) == std::string::npos);
  CHECK(list_dir(cache.path()) == std::vector<std::string>{a, ab});
  int skipped = 0, ok = 0;
  std::istringstream lines(again.out);
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    skipped += j.value("status", "") == "skipped";
    ok += j.value("status", "") == "ok";
  }
  CHECK(skipped == 1);
  CHECK(ok == 1);
}

TEST_CASE("cli encode --format musubi: --vf, -ss and --frames name the window, fp32 on request",
          "[cli][musubi]") {
  ScratchDir clips, cache;
  make_clip(clips / "clip.mp4",
            "-f lavfi -i testsrc2=size=70x42:rate=24 -frames:v 30 -pix_fmt yuv420p -c:v libx264");
  const CliResult r =
      run_cli("encode " + quote(clips / "clip.mp4") + " -o " + quote(cache.path()) +
              " --format musubi --latent-dtype fp32 --vf scale=32:16 -ss 0.5 --frames 9" + weights());
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::string name = "clip_00012-009_0032x0016_wan.safetensors";
  REQUIRE(list_dir(cache.path()) == std::vector<std::string>{name});
  const CacheCheck check = check_cache(cache.path(), {name});
  INFO(check.err);
  REQUIRE(check.status == 0);
  CHECK(check.files.at(0)["tensor"] == "latents_3x2x4_float32");
  const io::LatentFile back = io::read_latents(cache / name);
  CHECK(back.format == "musubi");
  CHECK(back.meta.filter_graph == "scale=32:16");
  CHECK(back.meta.start_seconds == 0.5);
}

TEST_CASE("cli encode --format musubi: sizes off the buckets and other models are refused", "[cli][musubi]") {
  ScratchDir clips, cache;
  const auto clip =
      make_clip(clips / "clip.mp4",
                "-f lavfi -i testsrc2=size=70x42:rate=24 -frames:v 5 -pix_fmt yuv420p -c:v libx264");
  const auto refused = [&](const std::string& extra, const std::string& what) {
    const CliResult r =
        run_cli("encode " + quote(clip) + " -o " + quote(cache.path()) + " --format musubi" + extra);
    INFO("stderr: " << r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, StartsWith("vaecodec: error: ") && Contains(what));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(list_dir(cache.path()).empty());
  };
  refused(weights(),
          "are 70x42, but musubi-tuner's buckets are multiples of 16 pixels; resize or crop them, "
          "e.g. --vf scale=64:32");
  refused(
      " --weights " + quote(data_dir() / "wan22-tiny" / "weights.safetensors") + " --quiet --vf scale=64:32",
      "holds latents of the Wan2.1 VAE (Wan2.1 and Wan2.2-14B); these weights are wan2.2-vae");
  refused(weights() + " --ext .st", "--ext: --format musubi names its files as musubi-tuner does");
}

}  // namespace vaecodec::test
