#pragma once

// Helpers of the video tests: clips made with the ffmpeg program, files probed with libavformat, the CLI run
// as a child process, and a pass-through model that carries pixels through the latent exactly.

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <catch2/catch.hpp>

#include "core/causal_cache.h"
#include "core/vae_model.h"
#include "io/ffmpeg_common.h"
#include "io/video_reader.h"
#include "tests/test_support.h"

namespace vaecodec::test {

// libav*'s own log lines (x264's statistics, a damaged file's complaints) would drown the test report.
inline const bool kQuietFfmpeg = (av_log_set_level(AV_LOG_QUIET), true);

// Runs a shell command line; returns its exit status.
inline int shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline std::string quote(const std::filesystem::path& path) {
  return "'" + path.string() + "'";
}

// Makes a clip with the ffmpeg program: `args` go between the global options and the output name.
inline std::filesystem::path make_clip(const std::filesystem::path& path, const std::string& args) {
  const std::string command = "ffmpeg -nostdin -hide_banner -loglevel error -y " + args + " " + quote(path);
  if (shell(command) != 0 || !std::filesystem::exists(path))
    throw std::runtime_error("ffmpeg failed to make the test clip: " + command);
  return path;
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// What a finished run of the CLI printed.
struct CliResult {
  int status = -1;
  std::string out;
  std::string err;
};

// Runs the vaecodec binary with `args` (already quoted where needed); `env` is prepended (e.g. "A=b").
inline CliResult run_cli(const std::string& args, const std::string& env = "") {
  static int counter = 0;
  const auto dir = std::filesystem::temp_directory_path();
  const std::string tag = std::to_string(::getpid()) + "-" + std::to_string(counter++);
  const auto out = dir / ("vaecodec-cli-" + tag + ".out"), err = dir / ("vaecodec-cli-" + tag + ".err");
  CliResult r;
  // stdin from /dev/null: an output that exists is refused, not asked about (Note [Existing outputs]), even
  // when the tests run in a terminal.
  r.status = shell(env + " " + quote(VAECODEC_BINARY) + " " + args + " </dev/null >" + quote(out) + " 2>" +
                   quote(err));
  r.out = read_text(out);
  r.err = read_text(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

// The CLI tests' scratch folder.
using ScratchDir = TempDir;

inline std::filesystem::path tiny_weights() {
  return data_dir() / "wan21-tiny" / "weights.safetensors";
}

// The tiny Wan2.1 weights, and --quiet: what most CLI tests pass.
inline std::string weights_arg() {
  return " --weights " + quote(tiny_weights()) + " --quiet";
}

// The start of an ffmpeg input of FFmpeg's test picture: kTestsrc + "64x48:rate=24 ...".
inline const std::string kTestsrc = "-f lavfi -i testsrc2=size=";

// Lines of a text, without the empty last one.
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A clean failure: exit status `status` and one line on stderr, "vaecodec: error: ..." saying `what`.
inline void check_one_line(const CliResult& r, int status, const std::string& what) {
  INFO("stderr: " << r.err);
  CHECK(r.status == status);
  CHECK_THAT(r.err, Catch::StartsWith("vaecodec: error: ") && Catch::Contains(what));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

// Files in a directory, by name.
inline std::vector<std::string> list_dir(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

// A file as libavformat and libavcodec see it: the video stream decoded in full, the audio streams counted.
struct Probe {
  int width = 0, height = 0;
  AVPixelFormat pixel_format = AV_PIX_FMT_NONE;
  std::string codec;
  AVRational time_base{0, 1};
  AVRational frame_rate{0, 1};
  std::vector<double> pts_seconds;  // of every decoded frame, in presentation order
  io::ColourTags colour;            // of the first decoded frame
  AVChromaLocation chroma_location = AVCHROMA_LOC_UNSPECIFIED;  // of the first decoded frame
  int audio_streams = 0;
  std::string audio_codec;
  int64_t audio_packets = 0;
  double audio_seconds = 0;  // end of the last audio packet
  int64_t frames() const { return static_cast<int64_t>(pts_seconds.size()); }
};

// A file's best video stream, opened for decoding.
struct OpenVideo {
  io::InputFormatPtr format;
  AVStream* stream = nullptr;
  io::CodecContextPtr decoder;
};

inline OpenVideo open_video(const std::filesystem::path& path) {
  using namespace io;
  OpenVideo v;
  AVFormatContext* raw = nullptr;
  check_av(avformat_open_input(&raw, path.c_str(), nullptr, nullptr), "test: cannot open", path);
  v.format.reset(raw);
  check_av(avformat_find_stream_info(raw, nullptr), "test: no stream info in", path);
  v.stream = raw->streams[check_av(av_find_best_stream(raw, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0),
                                   "test: no video in", path)];
  const AVCodec* codec = avcodec_find_decoder(v.stream->codecpar->codec_id);
  v.decoder.reset(avcodec_alloc_context3(codec));
  check_av(avcodec_parameters_to_context(v.decoder.get(), v.stream->codecpar), "test: parameters of", path);
  v.decoder->pkt_timebase = v.stream->time_base;
  check_av(avcodec_open2(v.decoder.get(), codec, nullptr), "test: cannot open the decoder of", path);
  return v;
}

// Decodes the whole video stream: on_frame(frame) for every decoded frame, on_packet(packet) for every packet
// of the other streams.
template <typename OnFrame, typename OnPacket>
void decode_all(OpenVideo& v, OnFrame&& on_frame, OnPacket&& on_packet) {
  using namespace io;
  PacketPtr packet = make_packet();
  FramePtr frame = make_frame();
  auto receive = [&] {
    while (avcodec_receive_frame(v.decoder.get(), frame.get()) == 0) {
      on_frame(*frame);
      av_frame_unref(frame.get());
    }
  };
  while (av_read_frame(v.format.get(), packet.get()) >= 0) {
    if (packet->stream_index == v.stream->index) {
      avcodec_send_packet(v.decoder.get(), packet.get());
      receive();
    } else {
      on_packet(*packet);
    }
    av_packet_unref(packet.get());
  }
  avcodec_send_packet(v.decoder.get(), nullptr);
  receive();
}

inline Probe probe(const std::filesystem::path& path) {
  using namespace io;
  OpenVideo v = open_video(path);
  AVFormatContext* raw = v.format.get();
  Probe p;
  p.codec = v.decoder->codec->name;
  p.time_base = v.stream->time_base;
  p.frame_rate = v.stream->avg_frame_rate;
  for (unsigned i = 0; i < raw->nb_streams; ++i)
    if (raw->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_AUDIO) {
      ++p.audio_streams;
      p.audio_codec = avcodec_get_name(raw->streams[i]->codecpar->codec_id);
    }
  decode_all(
      v,
      [&](const AVFrame& frame) {
        if (p.pts_seconds.empty()) {
          p.width = frame.width;
          p.height = frame.height;
          p.pixel_format = static_cast<AVPixelFormat>(frame.format);
          p.colour = colour_tags_of(&frame);
          p.chroma_location = frame.chroma_location;
        }
        p.pts_seconds.push_back(frame.best_effort_timestamp * av_q2d(v.stream->time_base));
      },
      [&](const AVPacket& packet) {
        const AVStream* st = raw->streams[packet.stream_index];
        if (st->codecpar->codec_type != AVMEDIA_TYPE_AUDIO) return;
        ++p.audio_packets;
        p.audio_seconds = std::max(p.audio_seconds, (packet.pts + packet.duration) * av_q2d(st->time_base));
      });
  std::sort(p.pts_seconds.begin(), p.pts_seconds.end());
  return p;
}

// The coded values of an 8-bit planar Y'CbCr video: Y', Cb and Cr, each [T, h, w] (int16), decoded by
// libavcodec.
inline std::array<torch::Tensor, 3> read_planes(const std::filesystem::path& path) {
  OpenVideo v = open_video(path);
  std::array<std::vector<torch::Tensor>, 3> frames;
  decode_all(
      v,
      [&](const AVFrame& frame) {
        const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(static_cast<AVPixelFormat>(frame.format));
        REQUIRE(desc->comp[0].depth == 8);
        REQUIRE((desc->flags & AV_PIX_FMT_FLAG_PLANAR) != 0);
        for (int p = 0; p < 3; ++p) {
          const int h = p ? AV_CEIL_RSHIFT(frame.height, desc->log2_chroma_h) : frame.height;
          const int w = p ? AV_CEIL_RSHIFT(frame.width, desc->log2_chroma_w) : frame.width;
          frames[p].push_back(torch::from_blob(frame.data[p], {h, w}, {frame.linesize[p], 1}, torch::kUInt8)
                                  .to(torch::kShort));
        }
      },
      [](const AVPacket&) {});
  return {torch::stack(frames[0]), torch::stack(frames[1]), torch::stack(frames[2])};
}

// Every frame of a video as RGB [T, 3, H, W] in [-1, 1], through vaecodec's own reader.
inline torch::Tensor read_rgb(const std::filesystem::path& path) {
  io::VideoReader reader(path);
  std::vector<torch::Tensor> frames;
  io::VideoFrame frame;
  while (reader.next(frame)) frames.push_back(frame.rgb);
  return torch::stack(frames);
}

// PSNR in dB of b against a, both in [-1, 1] (peak-to-peak 2).
inline double psnr(const torch::Tensor& a, const torch::Tensor& b) {
  const double mse = (a.to(torch::kDouble) - b.to(torch::kDouble)).pow(2).mean().item<double>();
  return mse == 0 ? INFINITY : 10.0 * std::log10(4.0 / mse);
}

// A "VAE" whose latent is the video itself, folded space-to-depth: every 8x8 block of 4 frames becomes 768
// channels of one latent pixel (frame 0 alone in the first latent frame, as the causal models do). Decoding
// unfolds it, so the model is exact and whatever a round trip loses is lost by the I/O around it.
class PassThroughVae : public core::VaeModel {
 public:
  PassThroughVae() {
    info_.family = "pass-through";
    info_.latent_channels = 3 * kT * kS * kS;
    info_.spatial_factor = kS;
    info_.temporal_factor = kT;
    anchor_ = register_buffer("anchor", torch::zeros({1}));  // gives the model a device and dtype
  }
  const core::ModelInfo& info() const override { return info_; }

  // x: [B, 3, t, H, W] -> [B, 768, t', H/8, W/8]
  torch::Tensor encode_chunk(const torch::Tensor& x, core::CausalCache& cache) override {
    cache.rewind();
    core::CausalCache::Slot& slot = cache.next();
    std::vector<torch::Tensor> parts;
    torch::Tensor rest = x;
    if (!slot.started) {
      slot.started = true;
      const torch::Tensor first = x.narrow(2, 0, 1);
      parts.push_back(
          fold(torch::cat({first, torch::zeros_like(first).expand({-1, -1, kT - 1, -1, -1})}, 2)));
      rest = x.narrow(2, 1, x.size(2) - 1);
    }
    for (int64_t t = 0; t + kT <= rest.size(2); t += kT) parts.push_back(fold(rest.narrow(2, t, kT)));
    return torch::stack(parts, 2);
  }

  // z: [B, 768, n, h, w] -> [B, 3, t, 8h, 8w]
  torch::Tensor decode_chunk(const torch::Tensor& z, core::CausalCache& cache) override {
    cache.rewind();
    core::CausalCache::Slot& slot = cache.next();
    std::vector<torch::Tensor> parts;
    for (int64_t i = 0; i < z.size(2); ++i) {
      const torch::Tensor frames = unfold(z.select(2, i));
      parts.push_back(slot.started ? frames : frames.narrow(2, 0, 1));
      slot.started = true;
    }
    return torch::cat(parts, 2);
  }

 private:
  static constexpr int64_t kS = 8, kT = 4;
  // [B, 3, 4, H, W] -> [B, 768, H/8, W/8]
  static torch::Tensor fold(const torch::Tensor& x) {
    const int64_t b = x.size(0), h = x.size(3) / kS, w = x.size(4) / kS;
    return x.reshape({b, 3, kT, h, kS, w, kS})
        .permute({0, 1, 2, 4, 6, 3, 5})
        .reshape({b, 3 * kT * kS * kS, h, w});
  }
  static torch::Tensor unfold(const torch::Tensor& z) {
    const int64_t b = z.size(0), h = z.size(2), w = z.size(3);
    return z.reshape({b, 3, kT, kS, kS, h, w})
        .permute({0, 1, 2, 5, 3, 6, 4})
        .reshape({b, 3, kT, h * kS, w * kS});
  }
  core::ModelInfo info_;
  torch::Tensor anchor_;
};

}  // namespace vaecodec::test
