// --vf, --start/-ss, --duration/-t and --frames (Note [Filter graph], Note [Cutting the input]): the reader
// on generated clips, and the CLI end to end with the tiny Wan2.1 weights, outputs probed with libavformat.

#include <catch2/catch.hpp>

#include <cmath>

#include "io/latent_file.h"
#include "io/video_reader.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

// 48 frames at 24 fps (2 s), a keyframe every 10 frames (so that a start seeks to one and decodes from
// there), with 2 s of AAC audio at 48 kHz.
std::filesystem::path make_source(const ScratchDir& dir, const std::string& name = "in.mp4") {
  return make_clip(dir / name,
                   "-f lavfi -i testsrc2=size=64x48:rate=24:duration=2 -f lavfi -i "
                   "sine=frequency=440:sample_rate=48000:duration=2 -c:v libx264 -g 10 -pix_fmt yuv420p "
                   "-colorspace bt709 -color_primaries bt709 -color_trc bt709 -c:a aac");
}

// Every frame the reader gives with `source`: RGB [T, 3, H, W] and pts in seconds.
struct Read {
  torch::Tensor rgb;
  std::vector<double> pts;
  io::VideoFormat format;
};
Read read_with(const std::filesystem::path& path, const io::SourceOptions& source) {
  io::ReaderOptions options;
  options.source = source;
  io::VideoReader reader(path, options);
  Read r;
  r.format = reader.format();
  std::vector<torch::Tensor> frames;
  io::VideoFrame frame;
  while (reader.next(frame)) {
    frames.push_back(frame.rgb);
    r.pts.push_back(frame.pts * av_q2d(reader.format().time_base));
  }
  r.rgb = torch::stack(frames);
  return r;
}

std::string args(const std::filesystem::path& in, const std::filesystem::path& out) {
  return quote(in) + " -o " + quote(out) + " --weights " + quote(tiny_weights()) + " --quiet";
}

// A usage error: status 2, one line on stderr that says `what`, the directory as it was.
void check_usage_error(const CliResult& r, const std::string& what, const ScratchDir& dir,
                       const std::vector<std::string>& files) {
  INFO("stderr: " << r.err);
  CHECK(r.status == 2);
  CHECK_THAT(r.err, StartsWith("vaecodec: error: ") && Contains(what));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(list_dir(dir.path()) == files);
}

}  // namespace

TEST_CASE("reader: a start seeks, then drops the frames before it, duration and frames end the cut",
          "[source]") {
  ScratchDir dir;
  const auto in = make_source(dir);
  const Read all = read_with(in, {});
  REQUIRE(all.rgb.size(0) == 48);

  SECTION("start 0.5 s, duration 1 s: frames 12 to 35, pts from 0") {
    io::SourceOptions cut;
    cut.start_us = 500000;
    cut.duration_us = 1000000;
    const Read r = read_with(in, cut);
    REQUIRE(r.rgb.size(0) == 24);
    CHECK(torch::equal(r.rgb, all.rgb.narrow(0, 12, 24)));  // decoded from the keyframe at 10, exactly
    for (size_t i = 0; i < r.pts.size(); ++i) CHECK(r.pts[i] == Approx(all.pts[12 + i] - 0.5).margin(1e-9));
    CHECK(r.pts.front() == Approx(0).margin(1e-9));
  }
  SECTION("start 0.52 s (between frames): the first frame at or after it") {
    io::SourceOptions cut;
    cut.start_us = 520000;
    cut.max_frames = 3;
    const Read r = read_with(in, cut);
    REQUIRE(r.rgb.size(0) == 3);
    CHECK(torch::equal(r.rgb, all.rgb.narrow(0, 13, 3)));
    // The start counts in the stream's ticks: 0.52 s rounds to the nearest one.
    CHECK(r.pts.front() == Approx(13.0 / 24 - 0.52).margin(av_q2d(r.format.time_base) / 2 + 1e-9));
  }
  SECTION("frames are counted after the filter graph") {
    io::SourceOptions every_other;
    every_other.filter_graph = "select='not(mod(n\\,2))'";
    every_other.max_frames = 5;
    const Read r = read_with(in, every_other);
    REQUIRE(r.rgb.size(0) == 5);
    for (int64_t i = 0; i < 5; ++i) {
      CHECK(torch::equal(r.rgb[i], all.rgb[2 * i]));
      CHECK(r.pts[i] == Approx(all.pts[2 * i]).margin(1e-9));
    }
  }
  SECTION("the graph decides size, frame rate and time base") {
    io::SourceOptions graph;
    graph.filter_graph = "scale=40:30,fps=12";
    const Read r = read_with(in, graph);
    CHECK(r.rgb.size(0) == 24);
    CHECK(r.rgb.size(2) == 30);
    CHECK(r.rgb.size(3) == 40);
    CHECK(av_cmp_q(r.format.frame_rate, AVRational{12, 1}) == 0);
    for (size_t i = 0; i < r.pts.size(); ++i) CHECK(r.pts[i] == Approx(i / 12.0).margin(1e-9));
    CHECK(r.format.colour.matrix == AVCOL_SPC_BT709);  // the frames' tags go through the graph
  }
}

TEST_CASE("cli --vf: the graph's size and rate reach the output, odd sizes are padded and cut back",
          "[cli][source]") {
  ScratchDir dir;
  const auto in = make_source(dir);
  const auto out = dir / "out.mkv";
  SECTION("scale and fps, with audio") {
    const CliResult r = run_cli("roundtrip " + args(in, out) + " --vf scale=40:32,fps=12 --codec ffv1");
    INFO(r.err);
    REQUIRE(r.status == 0);
    const Probe a = probe(in), b = probe(out);
    CHECK(b.width == 40);
    CHECK(b.height == 32);
    REQUIRE(b.frames() == 24);
    for (int i = 0; i < 24; ++i) CHECK(b.pts_seconds[i] == Approx(i / 12.0).margin(0.0005));
    CHECK(b.colour == a.colour);
    CHECK(b.audio_streams == 1);
    CHECK(b.audio_seconds == Approx(a.audio_seconds).margin(0.03));
  }
  SECTION("a size the model cannot take is padded as any other") {
    const CliResult r = run_cli("roundtrip " + args(in, out) + " --vf scale=50:30 --frames 5");
    INFO(r.err);
    REQUIRE(r.status == 0);
    const Probe b = probe(out);
    CHECK(b.width == 50);
    CHECK(b.height == 30);
    CHECK(b.frames() == 5);
  }
}

TEST_CASE("cli -ss/-t/--frames: the span taken, timestamps from 0, audio trimmed to it", "[cli][source]") {
  ScratchDir dir;
  const auto in = make_source(dir);
  const auto out = dir / "out.mp4";
  const double audio_packet = 1024.0 / 48000;  // one AAC frame
  SECTION("-ss 0.5 -t 1") {
    const CliResult r = run_cli("roundtrip " + args(in, out) + " -ss 0.5 -t 1");
    INFO(r.err);
    REQUIRE(r.status == 0);
    const Probe b = probe(out);
    REQUIRE(b.frames() == 24);
    for (int i = 0; i < 24; ++i) CHECK(b.pts_seconds[i] == Approx(i / 24.0).margin(1e-6));
    CHECK(b.audio_streams == 1);
    CHECK(b.audio_seconds == Approx(1.0).margin(2 * audio_packet));
  }
  SECTION("--start 00:00.5 --frames 6: the audio ends with the sixth frame") {
    const CliResult r = run_cli("roundtrip " + args(in, out) + " --start 00:00.5 --frames 6");
    INFO(r.err);
    REQUIRE(r.status == 0);
    const Probe b = probe(out);
    CHECK(b.frames() == 6);
    CHECK(b.audio_seconds == Approx(6.0 / 24).margin(2 * audio_packet));
  }
  SECTION("the latents' record says what was applied") {
    const auto latents = dir / "z.safetensors";
    const CliResult r =
        run_cli("encode " + args(in, latents) + " --vf scale=40:32 --start 0.25 --duration 1.5 --frames 9");
    INFO(r.err);
    REQUIRE(r.status == 0);
    const io::LatentFile file = io::read_latents(latents);
    CHECK(file.meta.filter_graph == "scale=40:32");
    CHECK(file.meta.start_seconds == 0.25);
    CHECK(file.meta.duration_seconds == 1.5);
    CHECK(file.meta.max_frames == 9);
    CHECK(file.meta.width == 40);
    CHECK(file.meta.height == 32);
    CHECK(file.meta.frames == 9);
    CHECK(file.latents.size(2) == 3);  // 1 + 4k frames: 9 -> 3 latent frames
    REQUIRE(file.meta.pts.size() == 9);
    CHECK(file.meta.pts.front() == 0);
  }
}

TEST_CASE("cli --vf and the cut: bad values fail with one line, exit 2 and nothing written",
          "[cli][source]") {
  ScratchDir dir;
  const auto in = make_source(dir);
  const std::vector<std::string> before = {"in.mp4"};
  const auto run = [&](const std::string& command, const std::string& extra) {
    return run_cli(command + " " + args(in, dir / (command == "encode" ? "z.safetensors" : "out.mp4")) + " " +
                   extra);
  };
  for (const std::string command : {"roundtrip", "encode"}) {
    SECTION(command) {
      check_usage_error(run(command, "--vf nosuchfilter=1"),
                        "--vf 'nosuchfilter=1': No such filter: 'nosuchfilter'", dir, before);
      check_usage_error(run(command, "--vf 'scale=40:32,,'"), "--vf 'scale=40:32,,'", dir, before);
      check_usage_error(run(command, "--vf format=rgb4"), "gives rgb4 frames, which the model cannot take",
                        dir, before);
      check_usage_error(run(command, "--frames 0"), "--frames 0: the number of frames must be 1 or more", dir,
                        before);
      check_usage_error(run(command, "--start 10"),
                        "--start 10.000 is past the end of " + (dir / "in.mp4").string(), dir, before);
      check_usage_error(run(command, "-ss 1:xx"), "--start 1:xx is not a time", dir, before);
    }
  }
}

}  // namespace vaecodec::test

namespace vaecodec::test {

TEST_CASE("cli decode: torch.save'd latents (.pt, .pth) decode as the same latents in a safetensors file",
          "[cli][torch]") {
  ScratchDir dir;
  const auto in = make_clip(
      dir / "in.mp4", "-f lavfi -i testsrc2=size=64x48:rate=24 -frames:v 9 -pix_fmt yuv420p -c:v libx264");
  REQUIRE(run_cli("encode " + args(in, dir / "z.safetensors")).status == 0);
  const torch::Tensor z = io::read_latents(dir / "z.safetensors").latents;
  core::write_safetensors(dir / "bare.safetensors", {{"samples", z}});
  // Saved by PyTorch itself: a bare 5-D tensor, one clip's 4-D tensor, a dict with one tensor and other
  // values.
  const std::string python =
      "import sys, torch; from safetensors.torch import load_file; d = sys.argv[1]; "
      "z = load_file(d + '/bare.safetensors')['samples']; "
      "torch.save(z, d + '/five.pt'); torch.save(z[0].clone(), d + '/four.pt'); "
      "torch.save({'samples': z, 'step': 3, 'name': 'x'}, d + '/dict.pth'); "
      "torch.save({'a': z, 'b': z.clone()}, d + '/two.pt')";
  REQUIRE(shell(quote(VAECODEC_PYTHON) + " -c \"" + python + "\" " + quote(dir.path())) == 0);
  const auto decode = [&](const std::string& name, const std::string& video) {
    return run_cli("decode " + args(dir / name, dir / video) +
                   " -y --fps 24 --codec ffv1");  // out.mkv, again
  };
  REQUIRE(decode("bare.safetensors", "reference.mkv").status == 0);
  const torch::Tensor reference = read_rgb(dir / "reference.mkv");
  CHECK(reference.size(0) == 9);
  for (const std::string name : {"five.pt", "four.pt", "dict.pth"}) {
    INFO(name);
    const CliResult r = decode(name, "out.mkv");
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(torch::equal(read_rgb(dir / "out.mkv"), reference));
  }
  const CliResult two = decode("two.pt", "two.mkv");
  CHECK(two.status == 1);
  CHECK_THAT(two.err, Contains("two.pt: expected one floating-point latent tensor of 4 or 5 dimensions"));
  CHECK_FALSE(std::filesystem::exists(dir / "two.mkv"));
}

}  // namespace vaecodec::test
