#include "io/video_writer.h"

#include <algorithm>
#include <map>
#include <mutex>

extern "C" {
#include <libavutil/opt.h>
}

#include "core/error.h"
#include "io/ffmpeg_compat.h"
#include "io/interrupt.h"
#include "io/log.h"

namespace vaecodec::io {
namespace {

bool valid(AVRational q) {
  return q.num > 0 && q.den > 0;
}

// The encoder's own option `name` (its private class), or nullptr.
const AVOption* private_option(const AVCodec* codec, const char* name) {
  if (!codec->priv_class) return nullptr;
  return av_opt_find2(const_cast<AVClass**>(&codec->priv_class), name, nullptr, 0, AV_OPT_SEARCH_FAKE_OBJ,
                      nullptr);
}

bool has_option(const AVCodec* codec, const char* name) {
  return private_option(codec, name) != nullptr;
}

// The input's format where the encoder takes it; else the closest one it takes that swscale can write.
AVPixelFormat choose_pixel_format(const AVCodec* codec, AVPixelFormat wanted, const std::string& name) {
  const AVPixelFormat* list = compat::encoder_pixel_formats(codec);
  if (!list) return wanted;
  std::vector<AVPixelFormat> usable;
  for (const AVPixelFormat* p = list; *p != AV_PIX_FMT_NONE; ++p)
    if (sws_isSupportedOutput(*p)) usable.push_back(*p);
  if (usable.empty())
    throw UsageError("the " + std::string(codec->name) +
                     " encoder takes no pixel format vaecodec can make (" + name + ")");
  for (AVPixelFormat candidate : {wanted, without_jpeg_range(wanted)})
    for (AVPixelFormat p : usable)
      if (p == candidate) return p;
  usable.push_back(AV_PIX_FMT_NONE);
  return avcodec_find_best_pix_fmt_of_list(usable.data(), without_jpeg_range(wanted), /*has_alpha=*/0,
                                           nullptr);
}

// Note [Output colour tags]
// The output carries the input's tags (Note [Colour]). Where the output's pixel format cannot hold them as
// they are, the tags say what was written: an RGB input encoded as YUV gets the matrix it was converted with
// (and limited range), a yuvj* input written as yuv* gets an explicit full range, a YUV input written as RGB
// is tagged RGB, full range.
ColourTags output_tags(const VideoFormat& format, AVPixelFormat out_format) {
  ColourTags tags = format.colour;
  const bool in_rgb = is_rgb_format(format.pixel_format);
  if (is_rgb_format(out_format)) {
    if (!in_rgb) {
      tags.matrix = AVCOL_SPC_RGB;
      tags.range = AVCOL_RANGE_JPEG;
    }
    return tags;
  }
  const ColourDetails in = resolve_colour(format.pixel_format, format.colour, format.width, format.height);
  if (in_rgb || tags.matrix == AVCOL_SPC_RGB) {
    tags.matrix = in.matrix;
    tags.range = AVCOL_RANGE_MPEG;
  } else if (tags.range == AVCOL_RANGE_UNSPECIFIED && in.range == AVCOL_RANGE_JPEG) {
    tags.range = AVCOL_RANGE_JPEG;
  }
  return tags;
}

// The chroma location the output is subsampled for, and tagged with: the input's; where the input did not
// say, centred, as the reader assumed (Note [Chroma resampling]), and said explicitly, since H.264 and HEVC
// decoders take an untagged stream to be LEFT. Formats without subsampled chroma get no tag.
AVChromaLocation chroma_location_for(AVChromaLocation input, AVPixelFormat out_format) {
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(out_format);
  if (!desc || is_rgb_format(out_format) || (!desc->log2_chroma_w && !desc->log2_chroma_h))
    return AVCHROMA_LOC_UNSPECIFIED;
  return input == AVCHROMA_LOC_UNSPECIFIED ? AVCHROMA_LOC_CENTER : input;
}

// x264 and x265 name their presets alike and print their own complaint about an unknown one (past FFmpeg's
// log level), so the name is checked here, before any work, to fail with one line of ours.
// Note [x264's tail]
// x264 holds frames back: its rate control looks ahead rc-lookahead frames (40 in its default preset) and
// each of its frame threads (1.5 per core) keeps one in flight. The frames held when the model hands over the
// last one are encoded after it, while the user waits: 1.37-1.40 s of a 4 s file decode of 720p x81 on a
// 16-core H100 host. With rc-lookahead 10 that tail was 0.64-0.79 s and the fresh-process wall clock 4.7-5.2
// s instead of 5.6-5.9 s; at the same CRF the files were 2.2% smaller with PSNR 0.004 dB and SSIM 0.0001
// lower (a mandelbrot zoom, 81 frames of 720p; docs/benchmarks.md, "x264's tail"). Sliced threads, which hold
// no frames per thread, did not pay: the encoder then fell behind the GPU. Its threaded lookahead keeps a
// buffer of its own (sync-lookahead, threads + B-frames deep by default); without it x264 writes the same
// bytes and the tail was 0.59-0.68 s instead of 0.81-0.90 s (2026-11-24, same file sizes; fewer frame
// threads shortened it no further and fell behind the GPU: 8 threads held the model up 1.7 s). So libx264
// gets rc-lookahead 10 and sync-lookahead 0 unless --encoder-options sets them (an x264-params value wins,
// as in ffmpeg; ours go first in the x264-params given).
constexpr int kX264Lookahead = 10;
constexpr char kX264Params[] = "sync-lookahead=0";

// --encoder-options, parsed: "key=value:key=value" into a dictionary for avcodec_open2. Each key must be an
// option of the encoder (its private class, e.g. x264's rc-lookahead or x264-params) or of every encoder
// (AVCodecContext's: g, bf, threads, ...), checked here, before any work; FFmpeg itself would only leave an
// unknown one unused, silently. A value the encoder refuses fails when it is opened, with the first frame.
AVDictionary* encoder_settings(const AVCodec* codec, const std::string& text) {
  AVDictionary* settings = nullptr;
  if (text.empty()) return settings;
  if (av_dict_parse_string(&settings, text.c_str(), "=", ":", 0) < 0) {
    av_dict_free(&settings);
    throw UsageError("--encoder-options '" + text + "': expected key=value pairs separated by ':'");
  }
  const AVClass* context_class = avcodec_get_class();
  const AVClass* private_class = codec->priv_class;
  const AVDictionaryEntry* entry = nullptr;
  while ((entry = av_dict_get(settings, "", entry, AV_DICT_IGNORE_SUFFIX))) {
    const bool own = private_class &&
                     av_opt_find(&private_class, entry->key, nullptr, 0, AV_OPT_SEARCH_FAKE_OBJ) != nullptr;
    const bool common = av_opt_find(&context_class, entry->key, nullptr, AV_OPT_FLAG_ENCODING_PARAM,
                                    AV_OPT_SEARCH_FAKE_OBJ) != nullptr;
    if (!own && !common) {
      const std::string key = entry->key;
      av_dict_free(&settings);
      throw UsageError("--encoder-options: the " + std::string(codec->name) + " encoder has no option '" +
                       key + "' (ffmpeg -h encoder=" + codec->name + " lists them)");
    }
  }
  return settings;
}

// An --encoder-preset the encoder does not know fails before any work: x264's and x265's from their
// documented list (their option is free text), an encoder whose option has named values (NVENC's p1 ... p7,
// slow, ...) from those.
void check_preset(const AVCodec* codec, const std::string& preset) {
  const AVOption* option = private_option(codec, "preset");
  if (preset.empty() || !option) return;
  const std::string name = codec->name;
  std::vector<std::string> names;
  if (name == "libx264" || name == "libx265") {
    names = {"ultrafast", "superfast", "veryfast", "faster",   "fast",
             "medium",    "slow",      "slower",   "veryslow", "placebo"};
  } else {
    if (!option->unit) return;
    for (const AVOption* o = codec->priv_class->option; o && o->name; ++o)
      if (o->type == AV_OPT_TYPE_CONST && o->unit && std::string(o->unit) == option->unit)
        names.push_back(o->name);
    if (names.empty()) return;
  }
  if (std::find(names.begin(), names.end(), preset) != names.end()) return;
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  throw UsageError("unknown --encoder-preset '" + preset + "' for " + name + " (one of " + list + ")");
}

// Note [GPU encoders]
// NVIDIA's NVENC encoders (h264_nvenc and hevc_nvenc in FFmpeg 5.1) run on the GPU's video engine, beside the
// cores the VAE uses, and take the CPU's encoding work off the run's critical path. Only some GPUs have that
// engine (consumer and L40-class cards; the A100, H100 and H200 have none), and it needs NVIDIA's driver
// library, which FFmpeg loads when the encoder opens. So a hardware encoder is opened once per process on a
// small frame before any work (hardware_refusal): an explicit `--codec h264_nvenc` that cannot open is
// refused in one line, and `--codec auto` takes the GPU encoder that suits the container where it opens and
// the default (libx264) where none does, which --verbose names with the reason. NVENC has no CRF: --crf
// becomes its constant-quality mode (rc=vbr, cq=CRF, no bitrate target), the same number on another scale;
// --encoder-options still overrides each of these.
bool is_hardware(const AVCodec* codec) {
  return (codec->capabilities & AV_CODEC_CAP_HARDWARE) != 0;
}

// Why `codec` cannot encode on this machine (FFmpeg's first error line), or "" when it opened on a small
// frame of `format`; asked once per encoder and process.
std::string hardware_refusal(const AVCodec* codec, AVPixelFormat format) {
  static std::mutex mutex;
  static std::map<std::string, std::string> known;
  std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = known.find(codec->name); it != known.end()) return it->second;
  std::string why;
  {
    LogCapture log;
    CodecContextPtr context(avcodec_alloc_context3(codec));
    if (!context) throw Error(std::string("cannot allocate the ") + codec->name + " encoder: out of memory");
    context->width = 256;
    context->height = 256;
    context->pix_fmt = format;
    context->time_base = {1, 25};
    context->framerate = {25, 1};
    const int opened = avcodec_open2(context.get(), codec, nullptr);
    if (opened < 0) why = log.lines().empty() ? av_error_string(opened) : log.lines().front();
  }
  known[codec->name] = why;
  return why;
}

constexpr const char* kGpuEncoders[] = {"h264_nvenc", "hevc_nvenc"};  // --codec auto's, in its order

// `--codec auto`'s GPU encoder for the container, or nullptr (with the reasons in `why`) where none opens.
const AVCodec* working_gpu_encoder(const AVOutputFormat* container, AVPixelFormat wanted,
                                   const std::string& name, std::string& why) {
  for (const char* candidate : kGpuEncoders) {
    const AVCodec* codec = avcodec_find_encoder_by_name(candidate);
    if (!codec || avformat_query_codec(container, codec->id, FF_COMPLIANCE_NORMAL) != 1) continue;
    const std::string refusal = hardware_refusal(codec, choose_pixel_format(codec, wanted, name));
    if (refusal.empty()) return codec;
    why += (why.empty() ? "" : "; ") + std::string(candidate) + ": " + refusal;
  }
  if (why.empty()) why = "this FFmpeg has no GPU encoder for the container";
  return nullptr;
}

}  // namespace

const AVOutputFormat* output_container(const std::filesystem::path& name) {
  const AVOutputFormat* container = av_guess_format(nullptr, name.c_str(), nullptr);
  if (!container || container->video_codec == AV_CODEC_ID_NONE)
    throw UsageError("cannot tell a video container from the name " + name.string() +
                     " (use an extension such as .mp4, .mkv or .mov)");
  return container;
}

void check_writer_options(const std::filesystem::path& name, const WriterOptions& options) {
  VideoFormat format;
  format.pixel_format = AV_PIX_FMT_YUV420P;
  VideoWriter check(name, name, format, options);
}

VideoWriter::VideoWriter(const std::filesystem::path& path, const std::filesystem::path& name,
                         VideoFormat format, WriterOptions options, const std::vector<AudioStream>& audio)
    : path_(path),
      name_(name),
      format_(format),
      options_(std::move(options)),
      audio_in_(audio),
      packet_(make_packet()) {
  container_ = output_container(name);
  const AVPixelFormat wanted =
      options_.pixel_format != AV_PIX_FMT_NONE ? options_.pixel_format : format_.pixel_format;
  const bool automatic = options_.codec == "auto";
  if (automatic) {  // Note [GPU encoders]
    std::string why;
    codec_ = working_gpu_encoder(container_, wanted, name.string(), why);
    if (!codec_) verbose_note("encoder", "--codec auto: no GPU encoder works here (" + why + ")");
  }
  if (!codec_ && (options_.codec.empty() || automatic)) {
    const bool takes_h264 = avformat_query_codec(container_, AV_CODEC_ID_H264, FF_COMPLIANCE_NORMAL) == 1;
    codec_ = takes_h264 ? avcodec_find_encoder_by_name("libx264") : nullptr;
    if (!codec_) codec_ = avcodec_find_encoder(container_->video_codec);
  } else if (!codec_) {
    codec_ = avcodec_find_encoder_by_name(options_.codec.c_str());
    if (!codec_) {
      const AVCodecDescriptor* desc = avcodec_descriptor_get_by_name(options_.codec.c_str());
      if (desc) codec_ = avcodec_find_encoder(desc->id);
    }
  }
  if (!codec_ || codec_->type != AVMEDIA_TYPE_VIDEO)
    throw UsageError("unknown or unavailable video encoder '" + options_.codec + "' for " + name.string() +
                     " (this FFmpeg has none by that name; try libx264 or ffv1)");
  codec_name_ = codec_->name;
  if (automatic) verbose_note("encoder", "--codec auto: " + codec_name_);
  if (avformat_query_codec(container_, codec_->id, FF_COMPLIANCE_NORMAL) == 0)
    throw UsageError("the " + std::string(container_->name) + " container of " + name.string() +
                     " cannot hold " + codec_name_ + " video (try .mkv)");
  check_preset(codec_, options_.preset);
  AVDictionary* checked = encoder_settings(codec_, options_.encoder_options);  // fails before any work
  av_dict_free(&checked);
  pixel_format_ = choose_pixel_format(codec_, wanted, name.string());
  if (!automatic && is_hardware(codec_)) {
    const std::string why = hardware_refusal(codec_, pixel_format_);
    if (!why.empty())
      throw UsageError(
          "the " + codec_name_ + " encoder cannot encode on this machine: " + why +
          " (it needs a GPU with a video encoder and its driver; the A100, H100 and H200 have none): "
          "use --codec libx264, or --codec auto to take a GPU encoder only where one works");
  }
  if (format_.width > 0 && format_.height > 0) make_converter(format_.width, format_.height);
}

void VideoWriter::make_converter(int width, int height) {
  converter_.emplace(pixel_format_, width, height,
                     resolve_colour(pixel_format_, output_tags(format_, pixel_format_), width, height),
                     chroma_location_for(format_.chroma_location, pixel_format_));
}

void VideoWriter::open(int width, int height) {
  encoder_.reset(avcodec_alloc_context3(codec_));
  if (!encoder_) throw Error("cannot allocate the " + codec_name_ + " encoder: out of memory");
  AVCodecContext* enc = encoder_.get();
  enc->width = width;
  enc->height = height;
  enc->pix_fmt = pixel_format_;
  enc->time_base = format_.time_base;
  if (valid(format_.frame_rate)) enc->framerate = format_.frame_rate;
  if (valid(format_.sample_aspect_ratio)) enc->sample_aspect_ratio = format_.sample_aspect_ratio;
  const ColourTags tags = output_tags(format_, pixel_format_);
  enc->color_primaries = tags.primaries;
  enc->color_trc = tags.transfer;
  enc->colorspace = tags.matrix;
  enc->color_range = tags.range;
  enc->chroma_sample_location = chroma_location_for(format_.chroma_location, pixel_format_);
  enc->thread_count = options_.threads;
  if (container_->flags & AVFMT_GLOBALHEADER) enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;

  AVDictionary* settings = encoder_settings(codec_, options_.encoder_options);
  if (has_option(codec_, "crf") && !av_dict_get(settings, "crf", nullptr, 0))
    av_dict_set_int(&settings, "crf", options_.crf, 0);
  if (!options_.preset.empty() && has_option(codec_, "preset"))
    av_dict_set(&settings, "preset", options_.preset.c_str(), 0);
  if (!has_option(codec_, "crf") && has_option(codec_, "cq") && !av_dict_get(settings, "cq", nullptr, 0)) {
    // NVENC: --crf as constant quality, no bitrate target (Note [GPU encoders]).
    av_dict_set_int(&settings, "cq", options_.crf, 0);
    if (!av_dict_get(settings, "rc", nullptr, 0)) av_dict_set(&settings, "rc", "vbr", 0);
    enc->bit_rate = 0;
  }
  if (codec_name_ == "libx264") {  // Note [x264's tail]
    if (!av_dict_get(settings, "rc-lookahead", nullptr, 0))
      av_dict_set_int(&settings, "rc-lookahead", kX264Lookahead, 0);
    const AVDictionaryEntry* params = av_dict_get(settings, "x264-params", nullptr, 0);
    const std::string given = params ? params->value : "";
    // x264 reads "sync_lookahead" as "sync-lookahead".
    if (given.find("sync-lookahead") == std::string::npos &&
        given.find("sync_lookahead") == std::string::npos)
      av_dict_set(&settings, "x264-params", (kX264Params + (given.empty() ? "" : ":" + given)).c_str(), 0);
  }
  const int opened = avcodec_open2(enc, codec_, &settings);
  av_dict_free(&settings);
  if (opened < 0 && !options_.encoder_options.empty())
    throw UsageError("cannot open the " + codec_name_ + " encoder for " + name_.string() +
                     " with --encoder-options '" + options_.encoder_options +
                     "': " + av_error_string(opened));
  check_av(opened,
           "cannot open the " + codec_name_ + " encoder (" + pixel_format_name(pixel_format_) + ", " +
               std::to_string(width) + "x" + std::to_string(height) + ") for",
           name_);

  AVFormatContext* raw = nullptr;
  check_av(avformat_alloc_output_context2(&raw, container_, nullptr, path_.c_str()),
           "cannot set up the muxer for", name_);
  muxer_.reset(raw);
  video_stream_ = avformat_new_stream(raw, nullptr);
  if (!video_stream_) throw Error("cannot add a video stream to " + name_.string());
  check_av(avcodec_parameters_from_context(video_stream_->codecpar, enc), "cannot set the video stream of",
           name_);
  video_stream_->time_base = enc->time_base;
  video_stream_->avg_frame_rate = enc->framerate;
  video_stream_->sample_aspect_ratio = enc->sample_aspect_ratio;

  for (const AudioStream& in : audio_in_) {
    if (avformat_query_codec(container_, in.parameters->codec_id, FF_COMPLIANCE_NORMAL) == 0) {
      warn("the " + std::string(avcodec_get_name(in.parameters->codec_id)) + " audio of stream " +
           std::to_string(in.index) + " cannot go into " + name_.string() + "; it is left out");
      continue;
    }
    AVStream* out = avformat_new_stream(raw, nullptr);
    if (!out) throw Error("cannot add an audio stream to " + name_.string());
    check_av(avcodec_parameters_copy(out->codecpar, in.parameters), "cannot copy an audio stream into",
             name_);
    out->codecpar->codec_tag = 0;  // the input container's tag may mean nothing in this one
    out->time_base = in.time_base;
    audio_map_[in.index] = {in.time_base, out};
  }

  AVIOInterruptCB interrupt{ffmpeg_interrupt_callback, nullptr};
  check_av(avio_open2(&raw->pb, path_.c_str(), AVIO_FLAG_WRITE, &interrupt, nullptr), "cannot write output",
           name_);
  check_av(avformat_write_header(raw, nullptr), "cannot write the header of", name_);
  header_written_ = true;  // the streams' time bases are final from here on

  frame_ = make_frame();
  frame_->format = pixel_format_;
  frame_->width = width;
  frame_->height = height;
  check_av(av_frame_get_buffer(frame_.get(), 0), "cannot allocate a frame for", name_);
  if (!converter_ || width != format_.width || height != format_.height) make_converter(width, height);

  for (PacketPtr& packet : early_audio_) mux_audio(packet.get());
  early_audio_.clear();
}

void VideoWriter::write(const torch::Tensor& rgb, int64_t pts, int64_t duration) {
  if (!encoder_) open(static_cast<int>(rgb.size(2)), static_cast<int>(rgb.size(1)));
  check_av(av_frame_make_writable(frame_.get()), "cannot reuse the frame buffer for", name_);
  converter_->convert(rgb, frame_.get());
  send(pts, duration);
}

void VideoWriter::write_planes(const std::array<torch::Tensor, 3>& planes, int64_t pts, int64_t duration) {
  if (!encoder_) open(static_cast<int>(planes[0].size(-1)), static_cast<int>(planes[0].size(-2)));
  check_av(av_frame_make_writable(frame_.get()), "cannot reuse the frame buffer for", name_);
  converter_->write_planes(planes, frame_.get());
  send(pts, duration);
}

void VideoWriter::send(int64_t pts, int64_t duration) {
  frame_->pts = pts;
  compat::set_frame_duration(frame_.get(), duration);
  frame_->color_primaries = encoder_->color_primaries;
  frame_->color_trc = encoder_->color_trc;
  frame_->colorspace = encoder_->colorspace;
  frame_->color_range = encoder_->color_range;
  frame_->chroma_location = encoder_->chroma_sample_location;
  frame_->sample_aspect_ratio = encoder_->sample_aspect_ratio;
  if (duration > 0) durations_[pts] = duration;
  check_av(avcodec_send_frame(encoder_.get(), frame_.get()), "cannot encode a frame for", name_);
  ++frames_;
  drain_encoder();
}

void VideoWriter::write_audio(PacketPtr packet) {
  if (!header_written_) {
    early_audio_.push_back(std::move(packet));
    return;
  }
  mux_audio(packet.get());
}

// Note [Audio before time 0]
// Audio often starts before the first frame: AAC's priming packet lies at [-1024, 0) samples, to be decoded
// and skipped. MP4 and MOV keep such negative timestamps (edit lists); Matroska and most others cannot, and
// their muxers would shift every stream to make them non-negative, moving the video's pts too. So for those
// containers an audio packet that ends at or before 0 is left out (counted, and reported by finish()); the
// video keeps its pts exactly and the audio is in sync, minus its priming.
void VideoWriter::mux_audio(AVPacket* packet) {
  const auto it = audio_map_.find(packet->stream_index);
  if (it == audio_map_.end()) return;
  if (!(container_->flags & AVFMT_TS_NEGATIVE) && packet->pts != AV_NOPTS_VALUE &&
      packet->pts + packet->duration <= 0) {
    ++audio_dropped_;
    return;
  }
  av_packet_rescale_ts(packet, it->second.in_time_base, it->second.stream->time_base);
  packet->stream_index = it->second.stream->index;
  packet->pos = -1;
  check_av(av_interleaved_write_frame(muxer_.get(), packet), "cannot write audio to", name_);
}

// Encoders that hold frames back (x264's lookahead, B-frames) give packets later; each keeps the pts and
// duration of the frame it came from, rescaled to the stream's time base as the muxer chose it.
void VideoWriter::drain_encoder() {
  while (true) {
    const int received = avcodec_receive_packet(encoder_.get(), packet_.get());
    if (received == AVERROR(EAGAIN) || received == AVERROR_EOF) return;
    check_av(received, "cannot encode video for", name_);
    const auto it = durations_.find(packet_->pts);
    if (it != durations_.end()) {
      if (packet_->duration <= 0) packet_->duration = it->second;
      durations_.erase(it);
    }
    av_packet_rescale_ts(packet_.get(), encoder_->time_base, video_stream_->time_base);
    packet_->stream_index = video_stream_->index;
    check_av(av_interleaved_write_frame(muxer_.get(), packet_.get()), "cannot write video to", name_);
  }
}

void VideoWriter::finish() {
  if (finished_) return;
  if (!encoder_) throw Error("no frames to write to " + name_.string());
  check_av(avcodec_send_frame(encoder_.get(), nullptr), "cannot flush the encoder for", name_);
  drain_encoder();
  check_av(av_write_trailer(muxer_.get()), "cannot finish", name_);
  check_av(avio_closep(&muxer_->pb), "cannot close", name_);
  finished_ = true;
  if (audio_dropped_)
    warn(std::to_string(audio_dropped_) + " audio packets before time 0 (encoder priming) were left out of " +
         name_.string() + ": the " + container_->name + " container cannot hold negative timestamps");
}

std::vector<std::pair<std::string, std::string>> gpu_encoders() {
  std::vector<std::pair<std::string, std::string>> found;
  for (const char* name : kGpuEncoders)
    if (const AVCodec* codec = avcodec_find_encoder_by_name(name))
      found.emplace_back(name, hardware_refusal(codec, AV_PIX_FMT_YUV420P));
  return found;
}

}  // namespace vaecodec::io
