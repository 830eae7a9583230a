#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "io/colour.h"
#include "io/ffmpeg_common.h"
#include "io/video_reader.h"

namespace vaecodec::io {

struct WriterOptions {
  // Encoder name ("libx264", "ffv1", "libx265", "h264_nvenc", ...). Empty: libx264 when the container takes
  // H.264 (.mp4, .mkv, .mov), the container's own default otherwise. "auto": a GPU encoder that works here
  // for the container, else the same default (Note [GPU encoders] in io/video_writer.cpp).
  std::string codec;
  int crf = 17;        // x264, x265, VP9, AV1's "crf"; NVENC's "cq" (constant quality); others ignore it
  std::string preset;  // for encoders with a "preset" option; empty: the encoder's default
  // Pixel format of the output; AV_PIX_FMT_NONE: the input's where the encoder takes it (10-bit stays
  // 10-bit), else the closest one it takes.
  AVPixelFormat pixel_format = AV_PIX_FMT_NONE;
  int threads = 0;  // encoder threads; 0: FFmpeg's choice
  // The encoder's own options, as ffmpeg takes them after -c:v: "key=value:key=value" (e.g.
  // "rc-lookahead=10:x264-params=sliced-threads=1" for x264, "slices=4" for ffv1). Checked against the
  // encoder's option table when the writer is made; empty: none.
  std::string encoder_options;
};

// Encodes RGB tensors into a video file that copies a VideoFormat (size, time base and pts, frame rate,
// aspect ratio, colour tags) and, optionally, the input's audio streams packet by packet.
// The container and encoder are checked when constructed (a bad name fails before any work is done); the
// encoder is opened and the header written with the first frame.
class VideoWriter {
 public:
  // `path` is where the bytes go (an AtomicFile's temporary file); `name` is the file the user asked for,
  // which picks the container and appears in messages.
  VideoWriter(const std::filesystem::path& path, const std::filesystem::path& name, VideoFormat format,
              WriterOptions options, const std::vector<AudioStream>& audio = {});
  VideoWriter(const VideoWriter&) = delete;
  VideoWriter& operator=(const VideoWriter&) = delete;

  // rgb: [3, H, W] float on the CPU, [-1, 1] (Note [Colour] for values beyond); pts and duration in the
  // format's time base.
  void write(const torch::Tensor& rgb, int64_t pts, int64_t duration);
  // A frame already converted by converter().quantize() (CPU planes), e.g. on the GPU beside the model.
  void write_planes(const std::array<torch::Tensor, 3>& planes, int64_t pts, int64_t duration);
  // The colour conversion this writer applies; null when the format gave no frame size (the first frame
  // sets it then). Its quantize() may run on any thread.
  const TensorToFrame* converter() const { return converter_ ? &*converter_ : nullptr; }
  // A packet of one of the audio streams given at construction, timestamps in the input's time base.
  // Packets of streams the container cannot take are dropped.
  void write_audio(PacketPtr packet);
  // Drains the encoder and writes the trailer. The caller then commits the temporary file.
  void finish();

  int64_t frames_written() const { return frames_; }
  AVPixelFormat pixel_format() const { return pixel_format_; }
  const std::string& codec_name() const { return codec_name_; }
  int audio_streams_copied() const { return static_cast<int>(audio_map_.size()); }

 private:
  void open(int width, int height);
  void make_converter(int width, int height);
  void send(int64_t pts, int64_t duration);  // frame_ to the encoder
  void drain_encoder();
  void mux_audio(AVPacket* packet);

  std::filesystem::path path_;
  std::filesystem::path name_;
  VideoFormat format_;
  WriterOptions options_;
  const AVOutputFormat* container_ = nullptr;
  const AVCodec* codec_ = nullptr;
  std::string codec_name_;
  AVPixelFormat pixel_format_ = AV_PIX_FMT_NONE;

  OutputFormatPtr muxer_;
  CodecContextPtr encoder_;
  AVStream* video_stream_ = nullptr;
  struct AudioOut {
    AVRational in_time_base;
    AVStream* stream;
  };
  std::vector<AudioStream> audio_in_;
  std::map<int, AudioOut> audio_map_;     // input stream index -> output stream
  std::vector<PacketPtr> early_audio_;    // audio that arrived before the header was written
  std::map<int64_t, int64_t> durations_;  // pts -> duration of frames still inside the encoder
  std::optional<TensorToFrame> converter_;
  FramePtr frame_;
  PacketPtr packet_;
  bool header_written_ = false;
  bool finished_ = false;
  int64_t frames_ = 0;
  int64_t audio_dropped_ = 0;  // Note [Audio before time 0]
};

// The output format the writer would use for the container `name`, or throws naming the extension.
const AVOutputFormat* output_container(const std::filesystem::path& name);
// What a VideoWriter for `name` checks when constructed (container, encoder, preset, encoder options, pixel
// format, a GPU encoder's availability), before any input is read or any model loaded: the same
// UsageErrors. The input's pixel format is not known yet: a 4:2:0 one stands for it.
void check_writer_options(const std::filesystem::path& name, const WriterOptions& options);

// The GPU encoders this FFmpeg has that `--codec auto` may take (Note [GPU encoders] in io/video_writer.cpp),
// each with "" where it opens on this machine, else FFmpeg's reason. Opens each once per process.
std::vector<std::pair<std::string, std::string>> gpu_encoders();

}  // namespace vaecodec::io
