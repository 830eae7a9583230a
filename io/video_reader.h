#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/device/device.h"
#include "io/colour.h"
#include "io/ffmpeg_common.h"
#include "io/video_filter.h"

namespace vaecodec::io {

// What the output must reproduce of the input's video stream. The size, pixel format and colour tags are
// those of the first decoded frame (containers often leave them out).
struct VideoFormat {
  int width = 0;
  int height = 0;
  AVPixelFormat pixel_format = AV_PIX_FMT_NONE;
  AVRational time_base{1, 1};   // every pts is in it
  AVRational frame_rate{0, 1};  // average frame rate; 0/1 when the file does not say
  AVRational sample_aspect_ratio{0, 1};
  ColourTags colour;
  AVChromaLocation chroma_location = AVCHROMA_LOC_UNSPECIFIED;  // Note [Chroma resampling]
};

// One decoded frame, ready for the model.
struct VideoFrame {
  torch::Tensor rgb;  // [3, H, W] float32 in [-1, 1] on the CPU (pinned when asked for); or undefined:
  std::optional<YuvFrame> yuv;  // its planes, for the model's device to convert (ReaderOptions::yuv_planes)
  int64_t pts = 0;              // in VideoFormat::time_base (Note [Timestamps] in video_reader.cpp)
  int64_t duration = 0;         // in VideoFormat::time_base; 0 when unknown
};

// An audio stream of the input that the output copies packet by packet.
struct AudioStream {
  int index = 0;  // in the input
  const AVCodecParameters* parameters = nullptr;
  AVRational time_base{1, 1};
};

// Note [Cutting the input]
// --start (-ss), --duration (-t) and --frames cut the input as ffmpeg's input options -ss and -t and its
// output option -frames:v do: seek to the last keyframe at or before the start, decode from there and drop
// the frames before the start; take the frames that start before start + duration; run them through the
// filter graph (Note [Filter graph]); keep the first N frames that come out. With a start, timestamps are
// shifted as ffmpeg shifts them: by the file's start time plus the start, so the output begins at 0 (without
// one they are kept as the file has them). Audio packets get the same shift and are kept from the start to
// the end of the video taken: the end of the duration, or of the last frame taken when --frames or the
// input's end stopped it first; a packet is kept when it begins inside that span. The reader goes on
// demuxing audio after the video stopped, until every audio stream has passed the end, so that audio stored
// after the last video frame in the file is not lost.
struct SourceOptions {
  std::string filter_graph;            // --vf; empty: none
  std::optional<int64_t> start_us;     // --start, in microseconds (AV_TIME_BASE)
  std::optional<int64_t> duration_us;  // --duration, in microseconds
  std::optional<int64_t> max_frames;   // --frames, counted after the filter graph
  bool cuts() const { return start_us || duration_us || max_frames; }
  bool any() const { return cuts() || !filter_graph.empty(); }
};

struct ReaderOptions {
  bool pinned = false;      // host tensors in pinned memory (for asynchronous copies to a CUDA device)
  bool strict = false;      // the first undecodable packet or damaged frame is an error instead of a warning
  bool keep_audio = false;  // keep the audio packets for set_audio_sink; otherwise they are dropped
  SourceOptions source;     // filter graph and cut (Note [Cutting the input])
  // 8-bit Y'CbCr frames of a layout read in place come as their planes (VideoFrame::yuv), not as RGB (Note
  // [Colour conversion of the input on the GPU] in io/colour.h); frame_rgb makes their RGB where it is
  // needed.
  bool yuv_planes = false;
  // Decoder threads; 0: reader_threads' choice by the frame size (Note [The reader's decoder threads] in
  // io/video_reader.cpp; Note [Host threads of a batch over devices] in io/pipeline.h; the reading thread's
  // LibTorch operators are ReaderStage's).
  int threads = 0;
};

// The decoder threads a reader told `threads` (0: not told) takes on this host for frames of width x height
// (Note [The reader's decoder threads] in io/video_reader.cpp).
int reader_threads(int threads, int64_t width, int64_t height);

// What the reader could not decode (Note [Damaged input]).
struct DecodeDamage {
  int64_t bad_packets = 0;       // packets the decoder refused
  int64_t damaged_frames = 0;    // frames decoded with concealed errors
  int64_t fixed_timestamps = 0;  // frames whose pts was missing or out of order (Note [Timestamps])
  bool read_error = false;       // the file ended in an error rather than a clean end
  std::string first_error;       // FFmpeg's message for the first problem
  int64_t expected_frames = 0;   // the container's frame count, 0 when it does not say
  bool any() const { return bad_packets || damaged_frames || read_error; }
};

// Note [Damaged input]
// A damaged file is decoded as far as it goes: packets the decoder refuses are counted and skipped, frames it
// had to conceal are kept and counted, and a read error is taken as the end of the file. damage() says how
// much was lost (with the container's frame count for comparison); the pipeline prints it as one warning.
// With ReaderOptions::strict the first such event throws instead.

// Demuxes and decodes the best video stream of a file into RGB tensors, through the filter graph and cut of
// ReaderOptions::source when given. Opening decodes the first frame, so a file that opens is known to hold at
// least one frame (a start past its end is a UsageError). With ReaderOptions::keep_audio, audio packets go to
// the sink set by set_audio_sink (timestamps in the input stream's time base); those read before it was set
// (while opening, say) are held and handed over when it is.
class VideoReader {
 public:
  explicit VideoReader(const std::filesystem::path& path, ReaderOptions options = {});
  VideoReader(const VideoReader&) = delete;
  VideoReader& operator=(const VideoReader&) = delete;

  const VideoFormat& format() const { return format_; }
  const std::vector<AudioStream>& audio_streams() const { return audio_; }
  const DecodeDamage& damage() const { return damage_; }
  const std::filesystem::path& path() const { return path_; }
  // The container's frame count (or duration * frame rate) as a hint for progress, 0 when unknown.
  int64_t frame_count_hint() const;

  using AudioSink = std::function<void(PacketPtr packet)>;
  void set_audio_sink(AudioSink sink);

  // The next frame; false at the end of the stream (or of the cut).
  bool next(VideoFrame& out);

 private:
  // A pts that increases (Note [Timestamps]); `fixed` counts the repairs.
  struct PtsGuard {
    bool has_last = false;
    int64_t last = 0;
    int64_t last_duration = 0;
    int64_t next(int64_t pts, int64_t duration, int64_t* fixed);
  };

  void seek_to_start();
  bool produce(AVFrame* out);
  bool decode_next(AVFrame* frame);
  bool feed_decoder();
  void finish(bool limited);
  bool shift_audio(AVPacket* packet) const;
  void route_audio(PacketPtr packet);
  void deliver_audio(PacketPtr packet);
  void release_audio(double until_seconds);
  void note_damage(int code, const char* what);
  void fill(const AVFrame* frame, VideoFrame& out);

  // Note [One input file] in video_reader.cpp: what the demuxer may open. Declared before format_ctx_,
  // which refers to it until closed.
  struct OpenGuard {
    std::string url;      // the input as a file: URL, the one thing that may be opened
    std::string refused;  // the first other URL a demuxer asked for
    std::string demuxer;  // the demuxer that asked
    int (*open_default)(AVFormatContext*, AVIOContext**, const char*, int, AVDictionary**) = nullptr;
  };
  static int open_only_the_input(AVFormatContext* s, AVIOContext** pb, const char* url, int flags,
                                 AVDictionary** options);

  std::filesystem::path path_;
  ReaderOptions options_;
  OpenGuard open_guard_;
  InputFormatPtr format_ctx_;
  CodecContextPtr decoder_;
  const AVStream* stream_ = nullptr;
  VideoFormat format_;
  std::vector<AudioStream> audio_;
  AudioSink audio_sink_;
  std::vector<PacketPtr> held_audio_;  // read before there was a sink
  PacketPtr packet_;
  FramePtr frame_;
  FramePtr decoded_;            // the decoder's frame, before the filter graph
  bool first_pending_ = false;  // frame_ holds the first frame, decoded while opening
  bool draining_ = false;
  bool input_done_ = false;       // the decoder is drained, or the cut's end was reached
  bool finished_ = false;         // next() has returned false
  bool kept_input_ = false;       // a decoded frame was inside the cut
  AVRational stream_rate_{0, 1};  // the stream's own frame rate (format_ has the filter graph's)
  PtsGuard decoded_pts_;          // on the decoder's frames (counted as fixed timestamps)
  PtsGuard output_pts_;           // on what the filter graph gives
  std::optional<VideoFilter> filter_;
  bool filter_flushed_ = false;
  int64_t offset_ = 0;            // subtracted from every pts (stream time base; Note [Cutting the input])
  std::optional<int64_t> end_;    // the cut's end, after the shift (stream time base)
  int64_t frames_taken_ = 0;      // frames next() has given
  double video_end_seconds_ = 0;  // end of the last frame given, after the shift
  std::vector<PacketPtr> gated_audio_;      // audio waiting for the video to reach it (cuts only)
  std::optional<FrameToTensor> converter_;  // made once the size is known
  DecodeDamage damage_;
};

// `frame`'s RGB [3, H, W] float32 on `device`: its rgb uploaded, or its planes uploaded and converted there.
torch::Tensor frame_rgb(const VideoFrame& frame, core::Device& device);

}  // namespace vaecodec::io
