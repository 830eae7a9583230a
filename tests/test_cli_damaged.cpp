// Damaged videos (Note [Damaged input]): byte-flipped and truncated mp4, mkv and avi files, made at test time
// from generated clips, never crash or hang the binary; it decodes what can be decoded, or fails in one line
// with --strict. scripts/fuzz_video.sh runs the same checks over many random mutations.

#include <catch2/catch.hpp>

#include <fstream>
#include <random>

#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// `count` bytes of `bytes` past its first 16 (so that the container is still recognised more often than not)
// XORed with random non-zero values; the same seed gives the same damage.
std::string flipped(std::string bytes, int count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> where(16, bytes.size() - 1);
  std::uniform_int_distribution<int> value(1, 255);
  for (int i = 0; i < count; ++i) bytes[where(rng)] ^= static_cast<char>(value(rng));
  return bytes;
}

struct Outcome {
  CliResult result;
  bool damaged_warning = false;
};

// Runs a round trip of `input` under a time limit and checks the contract: exit 0 with a readable output and
// warnings only, or exit 1 with one error line and no output; never a crash, a hang or a
// temporary file left behind.
Outcome check_roundtrip(const ScratchDir& dir, const std::filesystem::path& input, const std::string& extra) {
  const auto out = dir / "out.mkv";
  Outcome o;
  // 124/137: the time limit ran out (a hang); above 128 otherwise: killed by a signal (a crash).
  o.result = run_cli("roundtrip " + quote(input) + " -o " + quote(out) + " --weights " +
                         quote(tiny_weights()) + " --quiet --device cpu --codec ffv1 " + extra,
                     "timeout -s KILL 120");
  const CliResult& r = o.result;
  INFO("input " << input.filename() << " " << extra << ": status " << r.status << ", stderr: " << r.err);
  REQUIRE((r.status == 0 || r.status == 1));
  const auto lines = std::count(r.err.begin(), r.err.end(), '\n');
  if (r.status == 0) {
    // At most the two warnings of Note [Damaged input]: what was lost, and timestamps that were fixed.
    CHECK(lines <= 2);
    std::istringstream text(r.err);
    for (std::string line; std::getline(text, line);) CHECK_THAT(line, StartsWith("vaecodec: warning: "));
    o.damaged_warning = r.err.find(" is damaged: ") != std::string::npos;
    CHECK(probe(out).frames() > 0);
    std::filesystem::remove(out);
  } else {
    CHECK(lines == 1);
    CHECK_THAT(r.err, StartsWith("vaecodec: error: "));
  }
  for (const std::string& name : list_dir(dir.path())) CHECK(name.find(".tmp-") == std::string::npos);
  CHECK_FALSE(std::filesystem::exists(out));
  return o;
}

}  // namespace

TEST_CASE("cli: damaged mp4, mkv and avi files never crash or hang the run", "[cli][damaged]") {
  struct Container {
    const char* name;
    const char* args;
  };
  const Container containers[] = {
      {"clip.mp4", "-c:v libx264 -g 4 -pix_fmt yuv420p"},
      {"clip.mkv", "-c:v libx264 -g 4 -pix_fmt yuv420p"},
      {"clip.avi", "-c:v mpeg4 -g 4 -pix_fmt yuv420p"},
  };
  for (const Container& c : containers) {
    SECTION(c.name) {
      ScratchDir dir;
      const auto clip = make_clip(
          dir / c.name, "-f lavfi -i testsrc2=size=64x48:rate=24 -frames:v 13 " + std::string(c.args));
      const std::string whole = read_text(clip);
      const std::string ext = clip.extension().string();
      SECTION("truncated") {
        for (const double keep : {0.3, 0.6, 0.9}) {
          const auto cut = dir / ("cut" + ext);
          write_bytes(cut, whole.substr(0, static_cast<size_t>(whole.size() * keep)));
          const Outcome lenient = check_roundtrip(dir, cut, "");
          const Outcome strict = check_roundtrip(dir, cut, "--strict");
          // What the lenient run reports as damage, --strict refuses.
          if (lenient.damaged_warning) CHECK(strict.result.status == 1);
          if (strict.result.status == 1 && lenient.result.status == 0)
            CHECK_THAT(strict.result.err, Contains("--strict"));
        }
      }
      SECTION("bytes flipped") {
        for (uint32_t seed = 1; seed <= 4; ++seed) {
          const auto bad = dir / ("flipped" + ext);
          write_bytes(bad, flipped(whole, 8 * static_cast<int>(seed), seed));
          const Outcome lenient = check_roundtrip(dir, bad, "");
          if (lenient.damaged_warning) CHECK(check_roundtrip(dir, bad, "--strict").result.status == 1);
        }
      }
    }
  }
}

TEST_CASE("cli: an audio stream whose header is damaged is left out, so the output stays readable",
          "[cli][damaged]") {
  // Found by scripts/fuzz_video.sh: the stream was copied as it was, into a file ffprobe then refused.
  ScratchDir dir;
  const auto clip = make_clip(dir / "clip.mkv",
                              "-f lavfi -i testsrc2=size=64x48:rate=24 -f lavfi -i sine=sample_rate=16000 "
                              "-frames:v 5 -shortest -c:v libx264 -c:a aac -ac 1");
  std::string bytes = read_text(clip);
  // The audio track's CodecPrivate element (ID 0x63A2, one size byte), which FFmpeg's muxer writes after the
  // track's CodecID "A_AAC", is the AAC AudioSpecificConfig; its channel configuration (4 bits across the
  // first two bytes) becomes 9, which does not exist. (Searched from the CodecID on: the random UIDs before
  // it may hold the bytes 63 A2 too.)
  const size_t codec_id = bytes.find("A_AAC");
  REQUIRE(codec_id != std::string::npos);
  const size_t audio = bytes.find("\x63\xa2", codec_id);
  REQUIRE(audio != std::string::npos);
  bytes[audio + 4] = static_cast<char>((bytes[audio + 4] & 0x87) | (9 << 3));
  write_bytes(dir / "bad.mkv", bytes);
  INFO("CodecID at " << codec_id << ", CodecPrivate at " << audio << " of " << bytes.size() << " bytes");
  REQUIRE(shell("ffprobe -v quiet " + quote(dir / "bad.mkv")) != 0);  // FFmpeg refuses the stream

  const auto out = dir / "out.mkv";
  const std::string args = "roundtrip " + quote(dir / "bad.mkv") + " -o " + quote(out) + " --weights " +
                           quote(tiny_weights()) + " --quiet --device cpu";
  const CliResult r = run_cli(args, "timeout -s KILL 120");
  INFO("stderr: " << r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.err, Contains("audio stream 1 left out"));
  CHECK(shell("ffprobe -v quiet " + quote(out)) == 0);
  const Probe p = probe(out);
  CHECK(p.frames() == 5);
  CHECK(p.audio_streams == 0);
  std::filesystem::remove(out);
  const CliResult strict = run_cli(args + " --strict", "timeout -s KILL 120");
  CHECK(strict.status == 1);
  CHECK_THAT(strict.err, StartsWith("vaecodec: error: ") && Contains("audio stream with damaged parameters"));
  CHECK_FALSE(std::filesystem::exists(out));
}

}  // namespace vaecodec::test
