// --encoder-options: the encoder's own options, as ffmpeg takes them after -c:v (io::WriterOptions).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

using Catch::Matchers::Contains;

// The display-order indices of the key frames of `path`'s video.
std::vector<int> key_frames(const std::filesystem::path& path) {
  OpenVideo v = open_video(path);
  std::vector<int> keys;
  int index = 0;
  decode_all(
      v,
      [&](const AVFrame& frame) {
        if (frame.key_frame) keys.push_back(index);
        ++index;
      },
      [](const AVPacket&) {});
  return keys;
}

// A 64x48 H.264 clip of `frames` frames at 24 fps: dir/in.mp4.
std::filesystem::path small_clip(const ScratchDir& dir, int frames) {
  return make_clip(dir / "in.mp4", "-f lavfi -i testsrc2=size=64x48:rate=24 -frames:v " +
                                       std::to_string(frames) + " -c:v libx264");
}

// The tiny Wan2.1 weights on the CPU.
std::string tiny_on_cpu() {
  return " --device cpu --weights " + quote(tiny_weights());
}

// Whether the FFmpeg vaecodec links has h264_nvenc at all (a minimal build may not).
bool has_nvenc() {
  return avcodec_find_encoder_by_name("h264_nvenc") != nullptr;
}

// Whether FFmpeg's h264_nvenc encodes on this machine (a GPU with a video encoder and NVIDIA's driver), asked
// of the ffmpeg program, not of vaecodec: the tests below check each machine's answer.
bool nvenc_works() {
  static const bool works = shell(
                                "ffmpeg -v quiet -f lavfi -i testsrc2=size=256x256:rate=25 -frames:v 2 -c:v "
                                "h264_nvenc -f null -") == 0;
  return works;
}

}  // namespace

TEST_CASE("x264 looks ahead 10 frames unless --encoder-options says otherwise (Note [x264's tail])",
          "[cli][video]") {
  ScratchDir dir;
  const auto clip = small_clip(dir, 9);
  const std::string common = tiny_on_cpu() + " --quiet";
  // x264 writes its settings into the stream (an SEI message: "... rc_lookahead=N ...").
  auto lookahead_of = [&](const std::string& name, const std::string& options) {
    REQUIRE(run_cli("roundtrip " + quote(clip) + " -o " + quote(dir / name) + common + options).status == 0);
    return read_text(dir / name);
  };
  CHECK_THAT(lookahead_of("default.mp4", ""), Contains(" rc_lookahead=10 "));
  CHECK_THAT(lookahead_of("own.mp4", " --encoder-options rc-lookahead=25"), Contains(" rc_lookahead=25 "));
  CHECK_THAT(lookahead_of("params.mp4", " --encoder-options x264-params=rc-lookahead=30"),
             Contains(" rc_lookahead=30 "));
}

TEST_CASE("cli --encoder-options: reach the encoder, and a wrong one fails in one line before any work",
          "[cli][video]") {
  ScratchDir dir;
  const auto clip = small_clip(dir, 30);
  const std::string common = tiny_on_cpu() + " --quiet";

  // A key frame every 12 frames and no others: what x264 does only when both options reach it (its
  // default GOP is 250 frames and testsrc2 has no scene cuts to place more).
  const CliResult r = run_cli("roundtrip " + quote(clip) + " -o " + quote(dir / "gop.mp4") + common +
                              " --encoder-options g=12:x264-params=scenecut=0:rc-lookahead=5");
  INFO("stderr: " << r.err);
  REQUIRE(r.status == 0);
  CHECK(key_frames(dir / "gop.mp4") == std::vector<int>{0, 12, 24});
  const CliResult plain = run_cli("roundtrip " + quote(clip) + " -o " + quote(dir / "plain.mp4") + common);
  REQUIRE(plain.status == 0);
  CHECK(key_frames(dir / "plain.mp4") == std::vector<int>{0});

  struct Case {
    std::string options, says;
  };
  for (const Case& c : {Case{"nosuch=1", "the libx264 encoder has no option 'nosuch'"},
                        Case{"rc-lookahead", "expected key=value pairs separated by ':'"},
                        Case{"rc-lookahead=abc", "with --encoder-options 'rc-lookahead=abc'"}}) {
    const auto before = list_dir(dir.path());
    const CliResult bad = run_cli("roundtrip " + quote(clip) + " -o " + quote(dir / "bad.mp4") + common +
                                  " --encoder-options " + quote(c.options));
    INFO(c.options << " -> " << bad.err);
    CHECK(bad.status == 2);
    CHECK_THAT(bad.err, Catch::StartsWith("vaecodec: error: --encoder-options") || Contains(c.says));
    CHECK_THAT(bad.err, Contains(c.says));
    CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 1);
    CHECK(list_dir(dir.path()) == before);  // nothing written, no temporary file left
  }
}

TEST_CASE("cli --codec auto takes a GPU encoder where one works, else libx264, and --verbose says why",
          "[cli][video]") {
  ScratchDir dir;
  const auto clip = small_clip(dir, 9);
  const std::string common = tiny_on_cpu();
  for (const char* name : {"auto.mp4", "auto.mkv"}) {
    const CliResult r = run_cli("roundtrip " + quote(clip) + " -o " + quote(dir / name) + common +
                                " --codec auto --json --verbose");
    INFO(name << ": " << r.err);
    REQUIRE(r.status == 0);
    const auto summary = nlohmann::json::parse(r.out);
    const Probe p = probe(dir / name);
    CHECK(p.codec == std::string("h264"));
    CHECK(p.pts_seconds.size() == 9);
    if (has_nvenc() && nvenc_works()) {
      CHECK(summary.at("codec") == "h264_nvenc");
    } else {
      CHECK(summary.at("codec") == "libx264");
      CHECK_THAT(r.err, Contains("encoder: --codec auto: no GPU encoder works here (") &&
                            Contains(has_nvenc() ? "(h264_nvenc: " : "this FFmpeg has no GPU encoder"));
    }
    CHECK_THAT(r.err, Contains("encoder: --codec auto: " + summary.at("codec").get<std::string>()));
  }
  // Without --verbose nothing is said about it: the summary names the encoder.
  const CliResult quiet = run_cli("roundtrip " + quote(clip) + " -o " + quote(dir / "quiet.mp4") + common +
                                  " --codec auto --quiet");
  REQUIRE(quiet.status == 0);
  CHECK(quiet.err.empty());
}

TEST_CASE(
    "cli --codec h264_nvenc: refused in one line before any work where it cannot encode, its presets checked",
    "[cli][video]") {
  ScratchDir dir;
  const auto clip = small_clip(dir, 9);
  const std::string common = tiny_on_cpu() + " --quiet";
  const auto before = list_dir(dir.path());
  if (!has_nvenc()) {  // a minimal FFmpeg: the name is unknown, in one line
    const CliResult r = run_cli("roundtrip " + quote(clip) + " -o " + quote(dir / "nvenc.mp4") + common +
                                " --codec h264_nvenc");
    check_one_line(r, 2, "'h264_nvenc'");
    CHECK(list_dir(dir.path()) == before);
    return;
  }
  // A preset NVENC does not name: refused from its own list, GPU or not.
  const CliResult preset = run_cli("roundtrip " + quote(clip) + " -o " + quote(dir / "p.mp4") + common +
                                   " --codec h264_nvenc --encoder-preset nonsense");
  INFO(preset.err);
  CHECK(preset.status != 0);
  CHECK_THAT(preset.err, Contains("unknown --encoder-preset 'nonsense' for h264_nvenc (one of "));
  CHECK_THAT(preset.err, Contains("p7"));
  CHECK(std::count(preset.err.begin(), preset.err.end(), '\n') == 1);
  CHECK(list_dir(dir.path()) == before);

  const CliResult r = run_cli("roundtrip " + quote(clip) + " -o " + quote(dir / "nvenc.mp4") + common +
                              " --codec h264_nvenc");
  INFO(r.err);
  if (nvenc_works()) {
    REQUIRE(r.status == 0);
    CHECK(probe(dir / "nvenc.mp4").pts_seconds.size() == 9);
  } else {
    CHECK(r.status != 0);
    CHECK_THAT(r.err, Contains("the h264_nvenc encoder cannot encode on this machine: "));
    CHECK_THAT(r.err, Contains("--codec auto"));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(list_dir(dir.path()) == before);
  }
}

}  // namespace vaecodec::test
