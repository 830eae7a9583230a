// The roundtrip, encode and decode commands end to end: the real binary on clips made at test time, with the
// tiny Wan2.1 weights, outputs probed with libavformat.

// LibTorch before Catch: c10 defines a CHECK macro of its own, and Catch's must be the one left.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/safetensors.h"
#include "io/latent_file.h"
#include "tests/video_test_support.h"

extern char** environ;

namespace vaecodec::test {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

CliResult roundtrip(const std::filesystem::path& in, const std::filesystem::path& out,
                    const std::string& extra = "") {
  return run_cli("roundtrip " + quote(in) + " -o " + quote(out) + weights_arg() + " " + extra);
}

// A clean failure: `status` (1: the run failed, 2: what was typed cannot work), one line on stderr that says
// `what`, and the directory as it was.
void check_fails(const CliResult& r, const std::string& what, const std::filesystem::path& dir,
                 const std::vector<std::string>& files, int status = 1) {
  check_one_line(r, status, what);
  CHECK(list_dir(dir) == files);
}

}  // namespace

TEST_CASE("cli roundtrip: odd size and 1, 2 and 18 frames keep count, size and pts", "[cli]") {
  ScratchDir dir;
  for (int frames : {1, 2, 18}) {
    SECTION(std::to_string(frames) + " frames") {
      const auto in =
          make_clip(dir / "in.mp4", kTestsrc + "70x42:rate=24 -frames:v " + std::to_string(frames) +
                                        " -pix_fmt yuv420p -c:v libx264");
      const auto out = dir / "out.mp4";
      const CliResult r = roundtrip(in, out, "--encoder-preset veryfast");
      INFO(r.err);
      REQUIRE(r.status == 0);
      const Probe a = probe(in), b = probe(out);
      CHECK(b.frames() == frames);
      CHECK(b.width == 70);
      CHECK(b.height == 42);
      CHECK(b.codec == "h264");
      CHECK(b.pixel_format == AV_PIX_FMT_YUV420P);
      CHECK(b.pts_seconds == a.pts_seconds);
      CHECK(av_cmp_q(b.frame_rate, AVRational{24, 1}) == 0);
      CHECK(list_dir(dir.path()) == std::vector<std::string>{"in.mp4", "out.mp4"});
    }
  }
}

TEST_CASE("cli roundtrip: variable frame rate keeps every pts", "[cli]") {
  ScratchDir dir;
  const auto in = make_clip(dir / "vfr.mkv", kTestsrc +
                                                 "64x48:rate=10 -frames:v 10 -vf "
                                                 "\"settb=1/1000,setpts='(N*0.1+mod(N,2)*0.03)/TB'\" "
                                                 "-fps_mode passthrough -enc_time_base 1/1000 -c:v libx264");
  const auto out = dir / "out.mkv";
  REQUIRE(roundtrip(in, out).status == 0);
  const Probe a = probe(in), b = probe(out);
  REQUIRE(a.pts_seconds.size() == 10);
  CHECK(a.pts_seconds[1] == Approx(0.13));
  CHECK(b.pts_seconds == a.pts_seconds);
}

TEST_CASE("cli roundtrip: pixel format and colour tags follow the input", "[cli]") {
  ScratchDir dir;
  struct Case {
    std::string name, args;
    AVPixelFormat pix_fmt;
  };
  const std::vector<Case> cases = {
      {"10-bit", "-pix_fmt yuv420p10le -c:v libx264", AV_PIX_FMT_YUV420P10LE},
      {"full-range yuvj", "-pix_fmt yuvj420p -c:v libx264", AV_PIX_FMT_YUVJ420P},
      {"BT.709",
       "-pix_fmt yuv420p -c:v libx264 -colorspace bt709 -color_primaries bt709 -color_trc bt709 "
       "-color_range tv",
       AV_PIX_FMT_YUV420P},
      {"BT.2020 10-bit 4:2:2",
       "-pix_fmt yuv422p10le -c:v libx264 -colorspace bt2020nc -color_primaries bt2020 "
       "-color_trc smpte2084 -color_range tv",
       AV_PIX_FMT_YUV422P10LE},
      {"RGB", "-pix_fmt rgb24 -c:v png", AV_PIX_FMT_YUV444P},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      const auto in = make_clip(dir / "in.mkv", kTestsrc + "64x48:rate=24 -frames:v 5 " + c.args);
      const auto out = dir / "out.mkv";
      const CliResult r = roundtrip(in, out);
      INFO(r.err);
      REQUIRE(r.status == 0);
      const Probe a = probe(in), b = probe(out);
      CHECK(b.pixel_format == c.pix_fmt);
      CHECK(b.frames() == 5);
      if (c.name != "RGB") {
        CHECK(b.chroma_location == a.chroma_location);
        CHECK(b.colour == a.colour);
      } else {
        CHECK(b.colour.matrix == AVCOL_SPC_SMPTE170M);  // Note [Output colour tags]: SD, so BT.601
      }
    }
  }
}

TEST_CASE("cli roundtrip: audio is copied packet by packet", "[cli]") {
  ScratchDir dir;
  const auto in = make_clip(dir / "in.mp4", kTestsrc +
                                                "64x48:rate=24:duration=0.5 -f lavfi -i "
                                                "sine=frequency=440:sample_rate=48000:duration=0.5 "
                                                "-c:v libx264 -pix_fmt yuv420p -c:a aac");
  for (const std::string ext : {".mp4", ".mkv"}) {
    SECTION(ext) {
      const auto out = dir / ("out" + ext);
      REQUIRE(roundtrip(in, out).status == 0);
      const Probe a = probe(in), b = probe(out);
      REQUIRE(b.frames() == a.frames());
      for (size_t i = 0; i < a.pts_seconds.size(); ++i)  // Matroska keeps milliseconds
        CHECK(b.pts_seconds[i] == Approx(a.pts_seconds[i]).margin(ext == ".mkv" ? 0.0005 : 1e-9));
      CHECK(b.audio_streams == 1);
      CHECK(b.audio_codec == "aac");
      CHECK(a.audio_packets > 20);
      if (ext == ".mp4") {
        CHECK(b.audio_packets == a.audio_packets);
        CHECK(b.audio_seconds == Approx(a.audio_seconds).margin(1e-6));
      } else {  // Note [Audio before time 0]: the priming packet stays out; Matroska rounds to milliseconds
        CHECK(b.audio_packets == a.audio_packets - 1);
        CHECK(b.audio_seconds == Approx(a.audio_seconds).margin(0.015));
      }
      CHECK(b.frames() == 12);
    }
  }
}

TEST_CASE("cli roundtrip: --json summary, --metrics and weights from VAECODEC_WEIGHTS", "[cli]") {
  ScratchDir dir;
  const auto in =
      make_clip(dir / "in.mp4", kTestsrc + "70x42:rate=24 -frames:v 6 -c:v libx264 -pix_fmt yuv420p");
  const CliResult r =
      run_cli("roundtrip " + quote(in) + " -o " + quote(dir / "out.mkv") + " --codec ffv1 --json" +
                  " --chunk 2 --metrics " + quote(dir / "quality.json"),
              "VAECODEC_WEIGHTS=" + quote(tiny_weights()));
  INFO(r.err);
  REQUIRE(r.status == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["frames"] == 6);
  CHECK(j["output"] == (dir / "out.mkv").string());
  CHECK(j["codec"] == "ffv1");
  CHECK(j["seconds"].get<double>() > 0);
  CHECK(j["fps"].get<double>() > 0);
  CHECK(j["peak_host_rss_bytes"].get<int64_t>() > 0);
  CHECK(j.contains("peak_device_bytes"));
  // The time by stage: every part is there, none negative, none longer than the run.
  for (const char* stage : {"read", "write", "model", "model_waits_for_read", "model_waits_for_write",
                            "write_waits_for_gpu", "write_tail"}) {
    INFO(stage);
    REQUIRE(j["stage_seconds"].contains(stage));
    CHECK(j["stage_seconds"][stage].get<double>() >= 0);
    CHECK(j["stage_seconds"][stage].get<double>() <= j["seconds"].get<double>());
  }
  // The model's own time and its waits add up to the run.
  const nlohmann::json& t = j["stage_seconds"];
  CHECK(t["model"].get<double>() + t["model_waits_for_read"].get<double>() +
            t["model_waits_for_write"].get<double>() + t["write_tail"].get<double>() ==
        Approx(j["seconds"].get<double>()).margin(0.05));
  // Loading the model is timed apart from the run.
  CHECK(j["load_seconds"]["read_weights"].get<double>() > 0);
  CHECK(j["load_seconds"]["build_model"].get<double>() > 0);
  CHECK(j["latent_shape"] == std::vector<int64_t>{1, 16, 3, 6, 9});
  CHECK(j["quality"]["psnr"].is_number());
  const nlohmann::json quality = read_json(dir / "quality.json");
  CHECK(quality["frames"].size() == 6);

  const CliResult csv = roundtrip(in, dir / "out2.mkv", "--metrics " + quote(dir / "quality.csv"));
  REQUIRE(csv.status == 0);
  const std::string text = read_text(dir / "quality.csv");
  CHECK(std::count(text.begin(), text.end(), '\n') == 7);  // header and six frames
}

// Note [Colour conversion on the GPU] (io/pipeline.cpp): a CPU run converts its frames to the output's
// Y'CbCr in the model's thread, a chunk at a time; with --metrics the writer converts each frame's RGB. Both
// must write the same video.
TEST_CASE("cli roundtrip: frames converted beside the model and by the writer make the same video", "[cli]") {
  ScratchDir dir;
  const auto in =
      make_clip(dir / "in.mp4", kTestsrc + "70x42:rate=24 -frames:v 9 -c:v libx264 -pix_fmt yuv420p");
  const CliResult chunks = roundtrip(in, dir / "chunks.mkv", "--codec ffv1 --device cpu");
  REQUIRE(chunks.status == 0);
  const CliResult frames =
      roundtrip(in, dir / "frames.mkv", "--codec ffv1 --device cpu --metrics " + quote(dir / "q.json"));
  REQUIRE(frames.status == 0);
  // The coded values, plane by plane (the files differ in Matroska's random segment id).
  const std::array<torch::Tensor, 3> a = read_planes(dir / "chunks.mkv"), b = read_planes(dir / "frames.mkv");
  for (int p = 0; p < 3; ++p) {
    INFO("plane " << p);
    REQUIRE(a[p].size(0) == 9);
    CHECK(torch::equal(a[p], b[p]));
  }
  CHECK(a[0].to(torch::kFloat).std().item<double>() > 10);  // a picture, not a flat field
}

TEST_CASE("cli encode/decode: latent files reproduce the round trip", "[cli]") {
  ScratchDir dir;
  const auto in = make_clip(dir / "vfr.mkv", kTestsrc +
                                                 "70x42:rate=10 -frames:v 7 -vf "
                                                 "\"settb=1/1000,setpts='(N*0.1+mod(N,2)*0.03)/TB'\" "
                                                 "-fps_mode passthrough -enc_time_base 1/1000 -c:v libx264 "
                                                 "-colorspace bt709 -color_primaries bt709 -color_trc bt709");
  const auto reference = dir / "roundtrip.mkv";
  REQUIRE(roundtrip(in, reference, "--codec ffv1").status == 0);
  const torch::Tensor expected = read_rgb(reference);
  for (const std::string ext : {".safetensors", ".latent"}) {
    SECTION(ext) {
      const auto latents = dir / ("latents" + ext);
      const CliResult e = run_cli("encode " + quote(in) + " -o " + quote(latents) + weights_arg());
      INFO(e.err);
      REQUIRE(e.status == 0);
      const io::LatentFile file = io::read_latents(latents);
      CHECK(file.meta.width == 70);
      CHECK(file.meta.frames == 7);
      CHECK(file.meta.pts.size() == 7);
      CHECK(file.meta.colour_matrix == "bt709");
      CHECK(file.meta.chroma_location == "left");  // H.264's
      const auto out = dir / "decoded.mkv";
      const CliResult d =
          run_cli("decode " + quote(latents) + " -o " + quote(out) + weights_arg() + " --codec ffv1");
      INFO(d.err);
      REQUIRE(d.status == 0);
      const Probe a = probe(in), b = probe(out);
      CHECK(b.pts_seconds == a.pts_seconds);
      CHECK(b.width == 70);
      CHECK(b.height == 42);
      CHECK(b.colour == a.colour);
      CHECK(b.chroma_location == a.chroma_location);
      if (ext == ".safetensors") {
        CHECK(torch::equal(read_rgb(out), expected));
      } else {  // raw latents and back: float rounding may move a coded value by one level, no more
        const auto got = read_planes(out), want = read_planes(reference);
        for (int p = 0; p < 3; ++p) {
          INFO("plane " << p);
          REQUIRE(got[p].sizes() == want[p].sizes());
          CHECK((got[p] - want[p]).abs().max().item<int>() <= 1);
        }
      }
    }
  }
}

TEST_CASE("cli batch: a folder encodes into a folder, a bad file is reported and the rest written", "[cli]") {
  ScratchDir dir;
  std::filesystem::create_directories(dir / "in" / "sub");
  make_clip(dir / "in" / "a.mp4", kTestsrc + "64x48:rate=24 -frames:v 5 -c:v libx264 -pix_fmt yuv420p");
  make_clip(dir / "in" / "b.mkv", kTestsrc + "70x42:rate=10 -frames:v 3 -c:v libx264 -pix_fmt yuv420p");
  std::ofstream(dir / "in" / "notes.txt") << "not a video\n";
  std::ofstream(dir / "in" / ".hidden") << "skipped\n";
  make_clip(dir / "in" / "sub" / "c.mp4",
            kTestsrc + "64x48:rate=24 -frames:v 1 -c:v libx264");  // not descended into

  const CliResult r =
      run_cli("encode " + quote(dir / "in") + " -o " + quote(dir / "out") + weights_arg() + " --json");
  INFO("stderr: " << r.err);
  CHECK(r.status == 1);
  const std::vector<std::string> errors = lines_of(r.err);
  REQUIRE(errors.size() == 2);
  CHECK_THAT(errors[0], StartsWith("vaecodec: error: ") && Contains("notes.txt"));
  CHECK(errors[1] ==
        "vaecodec: error: 1 of 3 inputs failed; the others were written to " + (dir / "out").string());
  CHECK(list_dir(dir / "out") == std::vector<std::string>{"a.safetensors", "b.safetensors"});
  // One JSON line per input, in name order, the failure with its message.
  const std::vector<std::string> json = lines_of(r.out);
  REQUIRE(json.size() == 3);
  CHECK(nlohmann::json::parse(json[0])["frames"] == 5);
  CHECK(nlohmann::json::parse(json[1])["frames"] == 3);
  CHECK_THAT(nlohmann::json::parse(json[2])["error"].get<std::string>(), Contains("notes.txt"));

  // The same latents as the files run one by one.
  for (const std::string name : {"a.mp4", "b.mkv"}) {
    INFO(name);
    const auto single = dir / (name + ".safetensors");
    REQUIRE(run_cli("encode " + quote(dir / "in" / name) + " -o " + quote(single) + weights_arg()).status ==
            0);
    const auto batch = dir / "out" / (std::filesystem::path(name).stem().string() + ".safetensors");
    CHECK(torch::equal(io::read_latents(batch).latents, io::read_latents(single).latents));
  }

  SECTION("a folder of latents decodes into a folder, its other files left out") {
    std::ofstream(dir / "out" / "notes.txt") << "not latents\n";
    const CliResult d = run_cli("decode " + quote(dir / "out") + " -o " + quote(dir / "videos") +
                                weights_arg() + " --ext .mkv --codec ffv1");
    INFO("stderr: " << d.err);
    REQUIRE(d.status == 0);
    CHECK(list_dir(dir / "videos") == std::vector<std::string>{"a.mkv", "b.mkv"});
    CHECK(probe(dir / "videos" / "a.mkv").frames() == 5);
    CHECK(probe(dir / "videos" / "b.mkv").width == 70);
  }
}

TEST_CASE("cli batch: files into a folder, clashing names and a file as the folder are refused", "[cli]") {
  ScratchDir dir;
  const auto a =
      make_clip(dir / "a.mp4", kTestsrc + "64x48:rate=24 -frames:v 5 -c:v libx264 -pix_fmt yuv420p");
  const auto b =
      make_clip(dir / "b.mp4", kTestsrc + "64x48:rate=24 -frames:v 2 -c:v libx264 -pix_fmt yuv420p");

  SECTION("two files round trip into a new folder with --ext") {
    const CliResult r = run_cli("roundtrip " + quote(a) + " " + quote(b) + " -o " + quote(dir / "out") +
                                weights_arg() + " --ext mkv --codec ffv1");
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.err.empty());
    CHECK(list_dir(dir / "out") == std::vector<std::string>{"a.mkv", "b.mkv"});
    CHECK(probe(dir / "out" / "a.mkv").frames() == 5);
    CHECK(probe(dir / "out" / "b.mkv").frames() == 2);
  }
  SECTION("one file into an existing folder") {
    std::filesystem::create_directory(dir / "out");
    const CliResult r = run_cli("roundtrip " + quote(a) + " -o " + quote(dir / "out") + weights_arg());
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(list_dir(dir / "out") == std::vector<std::string>{"a.mp4"});
  }
  SECTION("two inputs that would write one output") {
    std::filesystem::create_directory(dir / "other");
    make_clip(dir / "other" / "a.mkv", kTestsrc + "64x48:rate=24 -frames:v 1 -c:v libx264");
    const CliResult r = roundtrip(a, dir / "out", quote(dir / "other" / "a.mkv"));
    check_fails(r, "would both write", dir.path(), {"a.mp4", "b.mp4", "other"}, 2);
  }
  SECTION("a file where the folder should be") {
    std::ofstream(dir / "out.mp4") << "x";
    const CliResult r = roundtrip(a, dir / "out.mp4", quote(b));
    check_fails(r, "is a file; a batch of inputs writes into a folder", dir.path(),
                {"a.mp4", "b.mp4", "out.mp4"}, 2);
  }
  SECTION("weights that do not load: no folder made") {
    std::ofstream(dir / "notes.pth") << "not weights";
    const CliResult r = run_cli("roundtrip " + quote(a) + " " + quote(b) + " -o " + quote(dir / "out") +
                                " --weights " + quote(dir / "notes.pth") + " --quiet");
    check_fails(r, "notes.pth", dir.path(), {"a.mp4", "b.mp4", "notes.pth"});
  }
  SECTION("--ext without a batch") {
    check_fails(roundtrip(a, dir / "out.mp4", "--ext mkv"), "--ext", dir.path(), {"a.mp4", "b.mp4"}, 2);
  }
}

TEST_CASE("cli decode: latents without timing need --fps", "[cli]") {
  ScratchDir dir;
  const auto bare = dir / "bare.safetensors";
  core::write_safetensors(bare, {{"samples", torch::randn({1, 16, 3, 4, 5})}});
  const auto out = dir / "out.mp4";
  check_fails(run_cli("decode " + quote(bare) + " -o " + quote(out) + weights_arg()), "--fps", dir.path(),
              {"bare.safetensors"});
  const CliResult r = run_cli("decode " + quote(bare) + " -o " + quote(out) + weights_arg() + " --fps 16");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const Probe p = probe(out);
  CHECK(p.frames() == 9);
  CHECK(p.width == 40);
  CHECK(p.height == 32);
  CHECK(av_cmp_q(p.frame_rate, AVRational{16, 1}) == 0);
}

TEST_CASE("cli: bad input fails with one clear line and leaves nothing behind", "[cli]") {
  ScratchDir dir;
  const auto good =
      make_clip(dir / "good.mp4", kTestsrc + "64x48:rate=24 -frames:v 3 -c:v libx264 -pix_fmt yuv420p");
  std::vector<std::string> files = {"good.mp4"};
  auto expect = [&](const CliResult& r, const std::string& what, int status = 1) {
    check_fails(r, what, dir.path(), files, status);
  };

  SECTION("missing input") {
    expect(roundtrip(dir / "missing.mp4", dir / "out.mp4"), "No such file");
  }
  SECTION("not a video") {
    std::ofstream(dir / "notes.mp4") << "these are not the frames you are looking for\n";
    files = {"good.mp4", "notes.mp4"};
    expect(roundtrip(dir / "notes.mp4", dir / "out.mp4"), "cannot open input");
  }
  SECTION("no video stream") {
    make_clip(dir / "sound.m4a", "-f lavfi -i sine -t 0.2 -c:a aac");
    files = {"good.mp4", "sound.m4a"};
    expect(roundtrip(dir / "sound.m4a", dir / "out.mp4"), "no video stream");
  }
  SECTION("zero frames") {
    std::ofstream(dir / "empty.y4m") << "YUV4MPEG2 W64 H48 F24:1 Ip A1:1 C420jpeg\n";
    files = {"empty.y4m", "good.mp4"};
    expect(roundtrip(dir / "empty.y4m", dir / "out.mp4"), "no frames");
  }
  SECTION("unknown codec") {
    expect(roundtrip(good, dir / "out.mp4", "--codec nope"), "'nope'", 2);
  }
  SECTION("unknown encoder preset") {
    expect(roundtrip(good, dir / "out.mp4", "--encoder-preset nonsense"),
           "unknown --encoder-preset 'nonsense'", 2);
  }
  SECTION("codec the container cannot hold") {
    expect(roundtrip(good, dir / "out.mp4", "--codec ffv1"), "cannot hold", 2);
  }
  SECTION("unknown output container") {
    expect(roundtrip(good, dir / "out.xyz"), "container", 2);
  }
  SECTION("an option's value out of its set: a usage error, exit 2") {
    const CliResult r = roundtrip(good, dir / "out.mp4", "--autotune auto");
    INFO("stderr: " << r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, StartsWith("vaecodec: error: --autotune: auto not in {on,off}"));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(list_dir(dir.path()) == files);
  }
  SECTION("output not writable") {
    expect(roundtrip(good, "/nonexistent-vaecodec-dir/out.mp4"), "cannot write output");
  }
  SECTION("output is the input") {
    expect(roundtrip(good, dir / "." / "good.mp4"), "is the input", 2);
  }
  SECTION("no weights") {
    const CliResult r =
        run_cli("roundtrip " + quote(good) + " -o " + quote(dir / "out.mp4"), "env -u VAECODEC_WEIGHTS");
    expect(r, "--weights", 2);
    CHECK_THAT(r.err, Contains("VAECODEC_WEIGHTS") && Contains("Wan2.1_VAE.pth") &&
                          Contains("wan_2.1_vae.safetensors"));
  }
  SECTION("latents with another channel count") {
    core::write_safetensors(dir / "z8.safetensors", {{"latents", torch::randn({1, 8, 2, 4, 4})}});
    files = {"good.mp4", "z8.safetensors"};
    expect(
        run_cli("decode " + quote(dir / "z8.safetensors") + " -o " + quote(dir / "out.mp4") + weights_arg()),
        "channel");
  }
  SECTION("latents of another model") {
    io::LatentMeta meta;
    meta.family = "seedvr2-vae";
    io::write_latents(dir / "other.safetensors", torch::randn({1, 16, 2, 4, 4}), meta);
    files = {"good.mp4", "other.safetensors"};
    expect(run_cli("decode " + quote(dir / "other.safetensors") + " -o " + quote(dir / "out.mp4") +
                   weights_arg()),
           "seedvr2");
  }
  SECTION("latent output with a video extension") {
    expect(run_cli("encode " + quote(good) + " -o " + quote(dir / "z.mp4") + weights_arg()), ".safetensors",
           2);
  }
}

TEST_CASE("cli: a truncated input is decoded as far as it goes, or refused with --strict", "[cli]") {
  ScratchDir dir;
  const auto whole = make_clip(dir / "whole.mp4", kTestsrc +
                                                      "64x48:rate=24 -frames:v 18 -pix_fmt yuv420p "
                                                      "-c:v libx264 -g 1 -movflags +faststart");
  {
    std::ifstream in(whole, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(dir / "cut.mp4", std::ios::binary) << bytes.substr(0, bytes.size() * 3 / 4);
  }
  std::filesystem::remove(whole);
  const CliResult lenient = roundtrip(dir / "cut.mp4", dir / "out.mp4");
  INFO(lenient.err);
  CHECK(lenient.status == 0);
  CHECK_THAT(lenient.err, Contains("warning") && Contains("damaged") && Contains("of the 18"));
  const int64_t frames = probe(dir / "out.mp4").frames();
  CHECK(frames > 0);
  CHECK(frames < 18);
  std::filesystem::remove(dir / "out.mp4");
  check_fails(roundtrip(dir / "cut.mp4", dir / "out.mp4", "--strict"), "--strict", dir.path(), {"cut.mp4"});
}

TEST_CASE("cli: SIGINT stops the run, removes the temporary file and exits 130", "[cli]") {
  ScratchDir dir;
  const auto in = make_clip(dir / "in.mkv", kTestsrc + "128x96:rate=24 -frames:v 400 -c:v ffv1");
  const std::vector<std::string> args = {
      VAECODEC_BINARY,         "roundtrip", in.string(), "-o", (dir / "out.mkv").string(), "--weights",
      tiny_weights().string(), "--quiet"};
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // The child's stderr goes to a file beside the scratch directory, which must end up holding only the input.
  const auto err = dir.path().string() + ".err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(spawned == 0);
  // Wait for the temporary output to appear: the run is then under way.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (list_dir(dir.path()).size() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(pid, SIGINT);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"in.mkv"});
  CHECK_THAT(read_text(err), Contains("interrupted") && Contains("was not written"));
  ::unlink(err.c_str());
}

}  // namespace vaecodec::test
