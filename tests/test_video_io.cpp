// The FFmpeg layer and the pipeline in-process: reader, writer, colour conversion both ways, and round trips
// through a pass-through model, so that what is measured is the I/O path alone.

// LibTorch before Catch: c10 defines a CHECK macro of its own, and Catch's must be the one left.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>

#include "core/error.h"
#include "io/colour.h"
#include "io/interrupt.h"
#include "io/latent_file.h"
#include "io/pipeline.h"
#include "io/video_reader.h"
#include "io/video_writer.h"
#include "tests/gpu_support.h"
#include "tests/tiny_models.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

using Catch::Matchers::Contains;

io::PipelineOptions quiet_options(const std::string& codec = "ffv1") {
  io::PipelineOptions options;
  options.quiet = true;
  options.writer.codec = codec;
  return options;
}

// Kr, Kb of a matrix.
std::pair<double, double> luma_weights(AVColorSpace matrix) {
  switch (matrix) {
    case AVCOL_SPC_BT709:
      return {0.2126, 0.0722};
    case AVCOL_SPC_BT2020_NCL:
      return {0.2627, 0.0593};
    default:
      return {0.299, 0.114};
  }
}

// RGB in [0, 1] of one n-bit Y'CbCr triple, from the definitions (not from swscale).
std::array<double, 3> rgb_of(double y, double cb, double cr, AVColorSpace matrix, bool full, int bits = 8) {
  const auto [kr, kb] = luma_weights(matrix);
  const double max = std::ldexp(1.0, bits) - 1.0, unit = std::ldexp(1.0, bits - 8);
  const double half = std::ldexp(1.0, bits - 1);
  const double yn = full ? y / max : (y - 16.0 * unit) / (219.0 * unit);
  const double pb = full ? (cb - half) / max : (cb - half) / (224.0 * unit);
  const double pr = full ? (cr - half) / max : (cr - half) / (224.0 * unit);
  const double r = yn + 2.0 * (1.0 - kr) * pr;
  const double b = yn + 2.0 * (1.0 - kb) * pb;
  const double g = (yn - kr * r - kb * b) / (1.0 - kr - kb);
  return {r, g, b};
}

// A 16x16 clip of one colour (n-bit code values, 8 or 10 bits), made from raw planes so that nothing but the
// tags says how to read it.
std::filesystem::path solid_yuv_clip(const ScratchDir& dir, int y, int cb, int cr, const std::string& matrix,
                                     const std::string& range, const std::string& pix_fmt = "yuv444p") {
  const bool wide = pix_fmt.find("10le") != std::string::npos;
  const int chroma = pix_fmt.rfind("yuv420p", 0) == 0 ? 8 * 8 : 16 * 16;
  const auto raw = dir / "solid.yuv";
  {
    std::ofstream out(raw, std::ios::binary);
    auto write = [&](int value, int count) {
      for (int i = 0; i < count; ++i) {
        out.put(static_cast<char>(value & 0xff));
        if (wide) out.put(static_cast<char>(value >> 8));
      }
    };
    write(y, 16 * 16);
    write(cb, chroma);
    write(cr, chroma);
  }
  return make_clip(dir / ("solid-" + matrix + "-" + range + "-" + pix_fmt + ".mkv"),
                   "-f rawvideo -pix_fmt " + pix_fmt + " -s 16x16 -r 24 -i " + quote(raw) +
                       " -c:v ffv1 -colorspace " + matrix + " -color_range " + range);
}

// A frame of `format` filled with random code values (within the range's legal codes).
io::FramePtr random_frame(AVPixelFormat format, int width, int height, bool full, AVChromaLocation location) {
  io::FramePtr frame = io::make_frame();
  frame->format = format;
  frame->width = width;
  frame->height = height;
  frame->color_range = full ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG;
  frame->colorspace = AVCOL_SPC_BT709;
  frame->chroma_location = location;
  REQUIRE(av_frame_get_buffer(frame.get(), 0) == 0);
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(format);
  const int bits = desc->comp[0].depth;
  const int unit = 1 << (bits - 8);
  for (int plane = 0; plane < 3; ++plane) {
    const int h = plane ? AV_CEIL_RSHIFT(height, desc->log2_chroma_h) : height;
    const int w = plane ? AV_CEIL_RSHIFT(width, desc->log2_chroma_w) : width;
    const int low = full ? 0 : 16 * unit, high = full ? (1 << bits) - 1 : (plane ? 240 : 235) * unit;
    const torch::Tensor values = torch::randint(low, high + 1, {h, w}, torch::kInt);
    const bool wide = bits > 8;
    torch::from_blob(frame->data[plane], {h, w}, {frame->linesize[plane] / (wide ? 2 : 1), 1},
                     wide ? torch::kUInt16 : torch::kUInt8)
        .copy_(values);
  }
  return frame;
}

// Plane `plane` of a planar frame as int32 [h, w].
torch::Tensor plane_of(const AVFrame* frame, int plane) {
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(static_cast<AVPixelFormat>(frame->format));
  const int h = plane ? AV_CEIL_RSHIFT(frame->height, desc->log2_chroma_h) : frame->height;
  const int w = plane ? AV_CEIL_RSHIFT(frame->width, desc->log2_chroma_w) : frame->width;
  const bool wide = desc->comp[0].depth > 8;
  return torch::from_blob(frame->data[plane], {h, w}, {frame->linesize[plane] / (wide ? 2 : 1), 1},
                          wide ? torch::kUInt16 : torch::kUInt8)
      .to(torch::kInt);
}

}  // namespace

TEST_CASE("reader: odd size, frame count, pts and format of a clip", "[video]") {
  ScratchDir dir;
  const auto clip =
      make_clip(dir / "odd.mp4", kTestsrc + "70x42:rate=24 -frames:v 18 -pix_fmt yuv420p -c:v libx264");
  io::VideoReader reader(clip);
  CHECK(reader.format().width == 70);
  CHECK(reader.format().height == 42);
  CHECK(reader.format().pixel_format == AV_PIX_FMT_YUV420P);
  CHECK(av_cmp_q(reader.format().frame_rate, AVRational{24, 1}) == 0);
  const Probe p = probe(clip);
  io::VideoFrame frame;
  std::vector<double> pts;
  while (reader.next(frame)) {
    CHECK(frame.rgb.sizes() == torch::IntArrayRef({3, 42, 70}));
    // [-1, 1], but for colours outside the RGB cube (Note [Colour]; testsrc2's saturated edges have many).
    CHECK(frame.rgb.abs().max().item<float>() < 2.0f);
    pts.push_back(frame.pts * av_q2d(reader.format().time_base));
  }
  CHECK(pts == p.pts_seconds);
  CHECK(pts.size() == 18);
  CHECK_FALSE(reader.damage().any());
}

TEST_CASE("colour: the reader converts with the frame's matrix and range", "[video]") {
  ScratchDir dir;
  struct Case {
    std::string matrix;
    AVColorSpace av_matrix;
    std::string pix_fmt;
    int bits;
  };
  const std::vector<Case> cases = {{"bt470bg", AVCOL_SPC_BT470BG, "yuv444p", 8},
                                   {"bt709", AVCOL_SPC_BT709, "yuv444p", 8},
                                   {"bt709", AVCOL_SPC_BT709, "yuv420p", 8},
                                   {"bt2020nc", AVCOL_SPC_BT2020_NCL, "yuv420p10le", 10},
                                   {"bt709", AVCOL_SPC_BT709, "yuv444p10le", 10}};
  for (const Case& c : cases) {
    for (const std::string range : {"tv", "pc"}) {
      SECTION(c.matrix + " " + c.pix_fmt + " " + range) {
        const int unit = 1 << (c.bits - 8);
        const int y = 120 * unit + (unit - 1), cb = 100 * unit, cr = 170 * unit + unit / 2;
        const auto clip = solid_yuv_clip(dir, y, cb, cr, c.matrix, range, c.pix_fmt);
        io::VideoReader reader(clip);
        CHECK(reader.format().colour.matrix == c.av_matrix);
        CHECK(io::pixel_format_name(reader.format().pixel_format) == c.pix_fmt);
        io::VideoFrame frame;
        REQUIRE(reader.next(frame));
        const auto expected = rgb_of(y, cb, cr, c.av_matrix, range == "pc", c.bits);
        for (int ch = 0; ch < 3; ++ch) {
          const torch::Tensor got = frame.rgb[ch].to(torch::kDouble).add(1.0).div(2.0);
          INFO("channel " << ch << ": got " << got.mean().item<double>() << ", expected " << expected[ch]);
          CHECK((got - expected[ch]).abs().max().item<double>() < 1e-5);
        }
      }
    }
  }
}

TEST_CASE("colour: Y'CbCr -> RGB -> Y'CbCr gives back every code value", "[video]") {
  torch::manual_seed(3);
  struct Case {
    AVPixelFormat format;
    bool full;
    AVChromaLocation location;
  };
  const std::vector<Case> cases = {
      {AV_PIX_FMT_YUV420P, false, AVCHROMA_LOC_UNSPECIFIED},
      {AV_PIX_FMT_YUV420P, false, AVCHROMA_LOC_LEFT},
      {AV_PIX_FMT_YUV420P, false, AVCHROMA_LOC_TOPLEFT},
      {AV_PIX_FMT_YUVJ420P, true, AVCHROMA_LOC_CENTER},
      {AV_PIX_FMT_YUV422P, false, AVCHROMA_LOC_LEFT},
      {AV_PIX_FMT_YUV444P, true, AVCHROMA_LOC_UNSPECIFIED},
      {AV_PIX_FMT_YUV420P10LE, false, AVCHROMA_LOC_LEFT},
      {AV_PIX_FMT_YUV422P10LE, true, AVCHROMA_LOC_TOP},
      {AV_PIX_FMT_NV12, false, AVCHROMA_LOC_LEFT},
  };
  for (const Case& c : cases) {
    for (const auto& [width, height] : {std::make_pair(70, 42), std::make_pair(33, 17)}) {
      SECTION(io::pixel_format_name(c.format) + " " + av_chroma_location_name(c.location) + " " +
              std::to_string(width) + "x" + std::to_string(height)) {
        const AVPixelFormat planar = c.format == AV_PIX_FMT_NV12 ? AV_PIX_FMT_YUV420P : c.format;
        io::FramePtr in = random_frame(planar, width, height, c.full, c.location);
        if (c.format == AV_PIX_FMT_NV12) {  // the same samples, interleaved by swscale (exactly)
          io::FramePtr nv12 = io::make_frame();
          nv12->format = AV_PIX_FMT_NV12;
          nv12->width = width;
          nv12->height = height;
          REQUIRE(av_frame_get_buffer(nv12.get(), 0) == 0);
          REQUIRE(av_frame_copy_props(nv12.get(), in.get()) == 0);
          SwsContext* sws = sws_getContext(width, height, planar, width, height, AV_PIX_FMT_NV12, SWS_POINT,
                                           nullptr, nullptr, nullptr);
          sws_scale(sws, in->data, in->linesize, 0, height, nv12->data, nv12->linesize);
          sws_freeContext(sws);
          in = std::move(nv12);
        }
        torch::Tensor rgb = torch::empty({3, height, width});
        io::FrameToTensor(width, height).convert(in.get(), rgb);
        io::FramePtr out = io::make_frame();
        out->format = c.format;
        out->width = width;
        out->height = height;
        REQUIRE(av_frame_get_buffer(out.get(), 0) == 0);
        const io::ColourDetails details{AVCOL_SPC_BT709, c.full ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG};
        io::TensorToFrame(c.format, width, height, details, c.location).convert(rgb, out.get());
        if (c.format == AV_PIX_FMT_NV12) {
          for (int row = 0; row < height; ++row)
            CHECK(std::memcmp(out->data[0] + row * out->linesize[0], in->data[0] + row * in->linesize[0],
                              width) == 0);
          for (int row = 0; row < (height + 1) / 2; ++row)
            CHECK(std::memcmp(out->data[1] + row * out->linesize[1], in->data[1] + row * in->linesize[1],
                              2 * ((width + 1) / 2)) == 0);
        } else {
          for (int plane = 0; plane < 3; ++plane) {
            const int64_t differ =
                (plane_of(out.get(), plane) != plane_of(in.get(), plane)).sum().item<int64_t>();
            INFO("plane " << plane);
            CHECK(differ == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("colour: the writer encodes with the input's matrix and range and tags them", "[video]") {
  ScratchDir dir;
  struct Case {
    AVColorSpace matrix;
    bool full;
    AVPixelFormat format;
  };
  const std::vector<Case> cases = {{AVCOL_SPC_SMPTE170M, false, AV_PIX_FMT_YUV444P},
                                   {AVCOL_SPC_BT709, false, AV_PIX_FMT_YUV444P},
                                   {AVCOL_SPC_BT709, true, AV_PIX_FMT_YUV444P},
                                   {AVCOL_SPC_BT2020_NCL, false, AV_PIX_FMT_YUV420P10LE},
                                   {AVCOL_SPC_BT709, true, AV_PIX_FMT_YUV422P10LE}};
  for (const Case& c : cases) {
    SECTION(std::string(av_color_space_name(c.matrix)) + (c.full ? " pc " : " tv ") +
            io::pixel_format_name(c.format)) {
      const int bits = av_pix_fmt_desc_get(c.format)->comp[0].depth, unit = 1 << (bits - 8);
      const int y = 120 * unit + unit / 2, cb = 100 * unit, cr = 170 * unit + unit - 1;
      io::VideoFormat format;
      format.width = 16;
      format.height = 16;
      format.pixel_format = c.format;
      format.time_base = {1, 24};
      format.frame_rate = {24, 1};
      format.colour = {AVCOL_PRI_BT709, AVCOL_TRC_BT709, c.matrix,
                       c.full ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG};
      const auto rgb = rgb_of(y, cb, cr, c.matrix, c.full, bits);
      torch::Tensor frame = torch::empty({3, 16, 16});
      for (int ch = 0; ch < 3; ++ch) frame[ch].fill_(rgb[ch] * 2.0 - 1.0);
      io::WriterOptions options;
      options.codec = "ffv1";
      const auto path = dir / "solid.mkv";
      io::VideoWriter writer(path, path, format, options);
      writer.write(frame, 0, 1);
      writer.finish();

      const Probe p = probe(path);
      CHECK(p.pixel_format == c.format);
      CHECK(p.colour == format.colour);
      // The planes as stored, without any conversion.
      AVFormatContext* raw = nullptr;
      io::check_av(avformat_open_input(&raw, path.c_str(), nullptr, nullptr), "open", path);
      io::InputFormatPtr input(raw);
      avformat_find_stream_info(raw, nullptr);
      const AVCodec* codec = avcodec_find_decoder(raw->streams[0]->codecpar->codec_id);
      io::CodecContextPtr decoder(avcodec_alloc_context3(codec));
      avcodec_parameters_to_context(decoder.get(), raw->streams[0]->codecpar);
      REQUIRE(avcodec_open2(decoder.get(), codec, nullptr) == 0);
      io::PacketPtr packet = io::make_packet();
      io::FramePtr decoded = io::make_frame();
      REQUIRE(av_read_frame(raw, packet.get()) == 0);
      REQUIRE(avcodec_send_packet(decoder.get(), packet.get()) == 0);
      avcodec_send_packet(decoder.get(), nullptr);
      REQUIRE(avcodec_receive_frame(decoder.get(), decoded.get()) == 0);
      const int expected[3] = {y, cb, cr};
      for (int plane = 0; plane < 3; ++plane) {
        const torch::Tensor got = plane_of(decoded.get(), plane);
        INFO("plane " << plane << ": " << got.min().item<int>() << " to " << got.max().item<int>()
                      << ", expected " << expected[plane]);
        CHECK((got - expected[plane]).abs().max().item<int>() == 0);
      }
    }
  }
}

TEST_CASE("colour: unspecified matrix is BT.601 below HD and BT.709 from HD on", "[video]") {
  const io::ColourTags none;
  CHECK(io::resolve_colour(AV_PIX_FMT_YUV420P, none, 720, 576).matrix == AVCOL_SPC_SMPTE170M);
  CHECK(io::resolve_colour(AV_PIX_FMT_YUV420P, none, 1280, 720).matrix == AVCOL_SPC_BT709);
  CHECK(io::resolve_colour(AV_PIX_FMT_YUV420P, none, 640, 480).range == AVCOL_RANGE_MPEG);
  CHECK(io::resolve_colour(AV_PIX_FMT_YUVJ420P, none, 640, 480).range == AVCOL_RANGE_JPEG);
  CHECK(io::resolve_colour(AV_PIX_FMT_RGB24, none, 640, 480).range == AVCOL_RANGE_JPEG);
}

// Note: the PSNR values below are what the I/O path costs on its own; the test prints them. Lossless codecs
// give the input back exactly (Note [Chroma resampling]: inf dB); with x264 at crf 17 all that is lost is
// what x264 loses. (Before the chroma fix, 4:2:0 through x264 measured 30 dB: bicubic up, area down,
// clamping.)
TEST_CASE("pass-through model: the I/O path alone loses almost nothing", "[video]") {
  ScratchDir dir;
  PassThroughVae model;
  struct Case {
    std::string name, pix_fmt, codec;
    double min_psnr;
  };
  const std::vector<Case> cases = {
      {"gbrp ffv1", "gbrp", "ffv1", 80.0},
      {"yuv444p ffv1", "yuv444p", "ffv1", 80.0},
      {"yuv444p10le ffv1", "yuv444p10le", "ffv1", 80.0},
      {"yuv420p ffv1", "yuv420p", "ffv1", 80.0},
      {"yuv422p10le ffv1", "yuv422p10le", "ffv1", 80.0},
      {"yuv420p libx264 crf 17", "yuv420p", "libx264", 38.0},  // x264's own loss: 40.8 dB here
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      const auto clip =
          make_clip(dir / ("in-" + c.pix_fmt + ".mkv"),
                    kTestsrc + "70x42:rate=24 -frames:v 10 -pix_fmt " + c.pix_fmt + " -c:v ffv1");
      const auto out = dir / "out.mkv";
      io::roundtrip(model, clip, out, quiet_options(c.codec));
      const Probe in_probe = probe(clip), out_probe = probe(out);
      CHECK(out_probe.frames() == 10);
      CHECK(out_probe.pts_seconds == in_probe.pts_seconds);
      CHECK(out_probe.pixel_format == in_probe.pixel_format);
      const double db = psnr(read_rgb(clip), read_rgb(out));
      std::cout << "pass-through PSNR, " << c.name << ": " << db << " dB" << std::endl;
      CHECK(db > c.min_psnr);
    }
  }
}

TEST_CASE("pass-through model: the chunk length does not change the output", "[video]") {
  ScratchDir dir;
  PassThroughVae model;
  const auto clip =
      make_clip(dir / "in.mkv", kTestsrc + "36x20:rate=24 -frames:v 11 -pix_fmt gbrp -c:v ffv1");
  auto options = quiet_options();
  options.chunk = 1;
  io::roundtrip(model, clip, dir / "one.mkv", options);
  options.chunk = 3;
  io::roundtrip(model, clip, dir / "three.mkv", options);
  CHECK(torch::equal(read_rgb(dir / "one.mkv"), read_rgb(dir / "three.mkv")));
}

TEST_CASE("pass-through model: variable frame rate keeps every pts", "[video]") {
  ScratchDir dir;
  PassThroughVae model;
  const auto clip = make_clip(dir / "vfr.mkv", kTestsrc +
                                                   "64x48:rate=10 -frames:v 10 -vf "
                                                   "\"settb=1/1000,setpts='(N*0.1+mod(N,2)*0.03)/TB'\" "
                                                   "-fps_mode passthrough -enc_time_base 1/1000 -c:v ffv1");
  const auto out = dir / "out.mp4";
  io::roundtrip(model, clip, out, quiet_options("libx264"));
  const Probe in = probe(clip), got = probe(out);
  REQUIRE(in.pts_seconds.size() == 10);
  CHECK(in.pts_seconds[1] == Approx(0.13));
  REQUIRE(got.pts_seconds.size() == in.pts_seconds.size());
  for (size_t i = 0; i < in.pts_seconds.size(); ++i) CHECK(got.pts_seconds[i] == Approx(in.pts_seconds[i]));
}

TEST_CASE("reader: a truncated file decodes what it can and says how much was lost", "[video]") {
  ScratchDir dir;
  const auto whole = make_clip(dir / "whole.mp4", kTestsrc +
                                                      "64x48:rate=24 -frames:v 18 -pix_fmt yuv420p "
                                                      "-c:v libx264 -g 1 -movflags +faststart");
  const auto cut = dir / "cut.mp4";
  {
    std::ifstream in(whole, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() * 3 / 4);
  }
  SECTION("lenient") {
    io::VideoReader reader(cut);
    io::VideoFrame frame;
    int64_t frames = 0;
    while (reader.next(frame)) ++frames;
    CHECK(frames > 0);
    CHECK(frames < 18);
    CHECK(reader.damage().any());
    CHECK(reader.damage().expected_frames == 18);
  }
  SECTION("strict") {
    io::ReaderOptions options;
    options.strict = true;
    auto read_all = [&] {
      io::VideoReader reader(cut, options);
      io::VideoFrame frame;
      while (reader.next(frame)) {
      }
    };
    CHECK_THROWS_WITH(read_all(), Contains("is damaged") && Contains("--strict"));
  }
}

namespace {
// Raises the interrupt flag, as SIGINT would, when the encoder sees its second chunk.
class InterruptingVae : public PassThroughVae {
 public:
  torch::Tensor encode_chunk(const torch::Tensor& x, core::CausalCache& cache) override {
    if (++calls_ == 2) io::set_interrupted(true);
    return PassThroughVae::encode_chunk(x, cache);
  }

 private:
  int calls_ = 0;
};
}  // namespace

TEST_CASE("pipeline: an interrupt stops the run and leaves no output", "[video]") {
  ScratchDir dir;
  const auto clip = make_clip(dir / "in.mkv", kTestsrc + "64x48:rate=24 -frames:v 30 -c:v ffv1");
  InterruptingVae model;
  SECTION("roundtrip") {
    CHECK_THROWS_AS(io::roundtrip(model, clip, dir / "out.mkv", quiet_options()), io::Interrupted);
  }
  SECTION("encode") {
    CHECK_THROWS_AS(io::encode(model, clip, dir / "out.safetensors", quiet_options()), io::Interrupted);
  }
  io::set_interrupted(false);
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"in.mkv"});
}

TEST_CASE("pipeline: a failure before the first frame leaves no output", "[video]") {
  ScratchDir dir;
  const auto clip = make_clip(dir / "in.mkv", kTestsrc + "64x48:rate=24 -frames:v 5 -c:v ffv1");
  PassThroughVae model;
  CHECK_THROWS_WITH(io::roundtrip(model, clip, dir / "out.mkv", quiet_options("no-such-codec")),
                    Contains("no-such-codec"));
  CHECK_THROWS_WITH(io::roundtrip(model, clip, dir / "out.mp4", quiet_options("ffv1")),
                    Contains("cannot hold"));
  CHECK_THROWS_WITH(io::roundtrip(model, clip, dir / "out.unknown-extension", quiet_options()),
                    Contains("container"));
  CHECK_THROWS_WITH(io::roundtrip(model, clip, clip, quiet_options()), Contains("is the input"));
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"in.mkv"});
}

TEST_CASE("pass-through model: encode then decode gives the round trip's frames", "[video]") {
  ScratchDir dir;
  PassThroughVae model;
  const auto clip = make_clip(dir / "in.mkv", kTestsrc + "44x30:rate=25 -frames:v 7 -pix_fmt gbrp -c:v ffv1");
  io::roundtrip(model, clip, dir / "roundtrip.mkv", quiet_options());
  const io::RunSummary encoded = io::encode(model, clip, dir / "latents.safetensors", quiet_options());
  CHECK(encoded.latent_shape == std::vector<int64_t>{1, 768, 3, 4, 6});
  io::decode(model, dir / "latents.safetensors", dir / "decoded.mkv", quiet_options());
  CHECK(torch::equal(read_rgb(dir / "roundtrip.mkv"), read_rgb(dir / "decoded.mkv")));
  CHECK(probe(dir / "decoded.mkv").pts_seconds == probe(clip).pts_seconds);
}

TEST_CASE("on CUDA the colour conversion gives the CPU's code values", "[video][gpu]") {
  // Note [Colour conversion on the GPU]: the same float32 arithmetic on another device; a rounding tie may
  // land one code value apart, nothing more.
  if (!cuda_here()) return;
  torch::manual_seed(0);
  const int width = 70, height = 42;
  // Four frames with values beyond [-1, 1] too, as a decoder gives them.
  const torch::Tensor rgb = torch::rand({4, 3, height, width}) * 2.4 - 1.2;
  for (const AVPixelFormat format : {AV_PIX_FMT_YUV420P, AV_PIX_FMT_YUV422P10LE, AV_PIX_FMT_GBRP}) {
    INFO(io::pixel_format_name(format));
    const io::TensorToFrame converter(format, width, height, {AVCOL_SPC_BT709, AVCOL_RANGE_MPEG},
                                      AVCHROMA_LOC_LEFT);
    const auto on_cpu = converter.quantize(rgb);
    const auto on_gpu = converter.quantize(rgb.to(torch::kCUDA));
    for (int p = 0; p < 3; ++p) {
      INFO("plane " << p);
      REQUIRE(on_gpu[p].sizes() == on_cpu[p].sizes());
      const torch::Tensor diff = (on_gpu[p].cpu().to(torch::kInt) - on_cpu[p].to(torch::kInt)).abs();
      CHECK(diff.max().item<int>() <= 1);
      CHECK(diff.gt(0).sum().item<int64_t>() <= on_cpu[p].numel() / 1000);
      // One frame of the batch is the frame converted alone.
      CHECK(torch::equal(converter.quantize(rgb[2])[p], on_cpu[p][2]));
    }
  }
}

TEST_CASE("8-bit Y'CbCr frames leave the reader as planes that convert as the reader would", "[video]") {
  // Note [Colour conversion of the input on the GPU]: planes() copies, yuv_to_rgb is convert()'s arithmetic.
  const int width = 70, height = 42;
  io::FrameToTensor reader(width, height);
  for (const AVPixelFormat format : {AV_PIX_FMT_YUV420P, AV_PIX_FMT_YUVJ422P, AV_PIX_FMT_YUV444P}) {
    INFO(io::pixel_format_name(format));
    io::FramePtr frame = random_frame(format, width, height, false, AVCHROMA_LOC_TOPLEFT);
    torch::Tensor expected = torch::empty({3, height, width});
    reader.convert(frame.get(), expected);
    const std::optional<io::YuvFrame> yuv = reader.planes(frame.get(), /*pinned=*/false);
    REQUIRE(yuv);
    CHECK(yuv->planes[0].scalar_type() == torch::kUInt8);
    CHECK(yuv->planes[0].sizes() == torch::IntArrayRef{height, width});
    torch::Tensor rgb = torch::empty({3, height, width});
    io::yuv_to_rgb(*yuv, rgb);
    CHECK(torch::equal(rgb, expected));
  }
  // Deeper samples, RGB and another size stay with the reader's own conversion.
  for (const AVPixelFormat format : {AV_PIX_FMT_YUV422P10LE, AV_PIX_FMT_GBRP}) {
    INFO(io::pixel_format_name(format));
    io::FramePtr frame = random_frame(format, width, height, false, AVCHROMA_LOC_LEFT);
    CHECK_FALSE(reader.planes(frame.get(), false));
  }
  io::FramePtr other = random_frame(AV_PIX_FMT_YUV420P, 64, 42, false, AVCHROMA_LOC_LEFT);
  CHECK_FALSE(reader.planes(other.get(), false));
}

TEST_CASE("on CUDA an input frame's planes convert to the reader's RGB", "[video][gpu]") {
  // Note [Colour conversion of the input on the GPU]: the same float32 operations; fused multiply-adds may
  // round the last bit apart.
  if (!cuda_here()) return;
  const int width = 70, height = 42;
  io::FrameToTensor reader(width, height);
  core::Device& gpu = core::Device::of(torch::Device(torch::kCUDA, 0));
  for (const AVPixelFormat format : {AV_PIX_FMT_YUV420P, AV_PIX_FMT_YUVJ420P, AV_PIX_FMT_YUV422P})
    for (const AVChromaLocation siting : {AVCHROMA_LOC_LEFT, AVCHROMA_LOC_TOPLEFT, AVCHROMA_LOC_CENTER}) {
      INFO(io::pixel_format_name(format) << ", chroma location " << static_cast<int>(siting));
      io::FramePtr frame = random_frame(format, width, height, false, siting);
      torch::Tensor expected = torch::empty({3, height, width});
      reader.convert(frame.get(), expected);
      io::VideoFrame decoded;
      decoded.yuv = reader.planes(frame.get(), /*pinned=*/true);
      REQUIRE(decoded.yuv);
      const torch::Tensor rgb = io::frame_rgb(decoded, gpu);
      REQUIRE(rgb.device().is_cuda());
      CHECK((rgb.cpu() - expected).abs().max().item<double>() <= 1e-6);
    }
}

TEST_CASE("on CUDA a file's encode reads its frames as planes and gives the CPU's latents", "[video][gpu]") {
  // The pipeline's side of Note [Colour conversion of the input on the GPU]: a yuv420p clip through the
  // tiny Wan2.1 model in float32, on the GPU (planes converted there) and on the CPU (the reader's RGB).
  if (!cuda_here()) return;
  ScratchDir dir;
  const auto clip =
      make_clip(dir / "in.mkv", kTestsrc + "64x48:rate=24 -frames:v 9 -pix_fmt yuv420p -c:v ffv1");
  auto on_cpu = load_tiny(tiny_model("wan2.1-vae"), torch::kCPU, torch::kFloat);
  auto on_gpu = load_tiny(tiny_model("wan2.1-vae"), torch::Device(torch::kCUDA, 0), torch::kFloat);
  io::encode(*on_cpu, clip, dir / "cpu.safetensors", quiet_options());
  io::encode(*on_gpu, clip, dir / "gpu.safetensors", quiet_options());
  const torch::Tensor cpu = io::read_latents(dir / "cpu.safetensors").latents;
  const torch::Tensor gpu = io::read_latents(dir / "gpu.safetensors").latents;
  REQUIRE(gpu.sizes() == cpu.sizes());
  CHECK(((gpu - cpu).norm() / cpu.norm()).item<double>() <= 1e-5);
}

TEST_CASE("timing: colour conversion of one 1280x720 yuv420p frame each way", "[.][timing]") {
  // Not a test: run by hand (`vaecodec_tests "[timing]"`) to see what the I/O threads cost per frame.
  const int width = 1280, height = 720;
  io::FramePtr in = random_frame(AV_PIX_FMT_YUV420P, width, height, false, AVCHROMA_LOC_LEFT);
  torch::Tensor rgb = torch::empty({3, height, width});
  io::FrameToTensor reader(width, height);
  io::FramePtr out = io::make_frame();
  out->format = AV_PIX_FMT_YUV420P;
  out->width = width;
  out->height = height;
  REQUIRE(av_frame_get_buffer(out.get(), 0) == 0);
  io::TensorToFrame writer(AV_PIX_FMT_YUV420P, width, height, {AVCOL_SPC_BT709, AVCOL_RANGE_MPEG},
                           AVCHROMA_LOC_LEFT);
  const auto time_ms = [](const std::function<void()>& f) {
    f();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 5; ++i) f();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / 5;
  };
  std::cout << "frame to tensor: " << time_ms([&] { reader.convert(in.get(), rgb); })
            << " ms, tensor to frame: " << time_ms([&] { writer.convert(rgb, out.get()); }) << " ms ("
            << at::get_num_threads() << " threads)\n";
  CHECK(rgb.isfinite().all().item<bool>());
}

}  // namespace vaecodec::test
