#include "io/video_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <thread>

extern "C" {
#include <libavutil/avstring.h>
}

#include "core/error.h"
#include "core/input_file.h"
#include "io/ffmpeg_compat.h"
#include "io/interrupt.h"
#include "io/log.h"

namespace vaecodec::io {
namespace {

bool valid(AVRational q) {
  return q.num > 0 && q.den > 0;
}

std::string seconds_string(int64_t microseconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", static_cast<double>(microseconds) / AV_TIME_BASE);
  return text;
}

// A packet's time: its pts, else its dts (AV_NOPTS_VALUE when it has neither).
int64_t packet_time(const AVPacket* packet) {
  return packet->pts != AV_NOPTS_VALUE ? packet->pts : packet->dts;
}

}  // namespace

// Note [One input file]
// A video input is one self-contained local file. libavformat follows what a file names: an HLS or DASH
// playlist, a concat list or an IMF package opens further files, and a URL in one the network. Any file
// that only claims to be a video (an .mp4 that is really a playlist) could so make vaecodec read another
// file the user may read and write it, encoded, into the output. So:
// - the only protocol allowed is "file", and the input is given as a file: URL (a name with a colon in it
//   is not taken for a protocol);
// - the demuxer is probed first and one whose job is to open other files (kListDemuxers) is refused before
//   it reads anything; the one probed is then the one opened;
// - every other open than of the input itself is refused through AVFormatContext::io_open (an image
//   sequence's pattern, a subtitle's companion file; nested demuxers, which do not carry our opaque pointer,
//   are refused everything), and the input is reported as referring to other files.
int VideoReader::open_only_the_input(AVFormatContext* s, AVIOContext** pb, const char* url, int flags,
                                     AVDictionary** options) {
  auto* guard = static_cast<OpenGuard*>(s->opaque);
  if (guard && url && guard->url == url && !(flags & AVIO_FLAG_WRITE))
    return guard->open_default(s, pb, url, flags, options);
  if (guard && guard->refused.empty()) {
    guard->refused = url ? url : "";
    guard->demuxer = s->iformat ? s->iformat->name : "";
  }
  return AVERROR(EPERM);
}

namespace {

// Demuxers that read lists of other files or URLs (Note [One input file]), and those that run scripts.
constexpr const char* kListDemuxers[] = {"hls", "applehttp", "dash",       "concat",
                                         "imf", "avisynth",  "vapoursynth"};

AVDictionary* file_protocol_only() {
  AVDictionary* options = nullptr;
  av_dict_set(&options, "protocol_whitelist", "file", 0);
  return options;
}

// The demuxer libavformat would choose for `url`, found from its first bytes (and name) as
// avformat_open_input does; refused if it is one of kListDemuxers.
const AVInputFormat* probe_demuxer(const std::string& url, const std::filesystem::path& path) {
  AVDictionary* options = file_protocol_only();
  AVIOContext* pb = nullptr;
  const AVIOInterruptCB interrupt{ffmpeg_interrupt_callback, nullptr};
  const int opened = avio_open2(&pb, url.c_str(), AVIO_FLAG_READ, &interrupt, &options);
  av_dict_free(&options);
  check_av(opened, "cannot open input", path);
  const AVInputFormat* format = nullptr;
  const int probed = av_probe_input_buffer2(pb, &format, url.c_str(), nullptr, 0, 0);
  avio_closep(&pb);
  check_av(probed, "cannot open input", path);
  for (const char* name : kListDemuxers)
    if (av_match_name(name, format->name))
      throw Error("cannot open input " + path.string() + ": it is a " + name +
                  " file, which names other files to read; vaecodec reads one self-contained video file, "
                  "not playlists or lists of files");
  return format;
}

// Whether a decoder opens with an audio stream's parameters. Audio is copied, not decoded, but a stream whose
// header is damaged (a channel configuration that does not exist) would be copied into an output that
// players and ffprobe refuse; such a stream is left out instead (found by scripts/fuzz_video.sh).
bool audio_is_readable(const AVCodecParameters* parameters) {
  const AVCodec* codec = avcodec_find_decoder(parameters->codec_id);
  if (!codec) return true;  // nothing to check it with: copied as it is
  CodecContextPtr context(avcodec_alloc_context3(codec));
  if (!context || avcodec_parameters_to_context(context.get(), parameters) < 0) return false;
  return avcodec_open2(context.get(), codec, nullptr) >= 0;
}

}  // namespace

// Note [The reader's decoder threads]
// FFmpeg's frame threads decode a frame each at once, every one a frame of its own in memory beside the
// references, and FFmpeg takes one more thread than the cores, up to 16. A run whose window of frames waits
// in host memory (tiles through time) peaks as the clip's last frame is read, the decoder's frames included:
// SeedVR2's 4K x81 encode in 24 GB on an H200 held 5971 MiB with 16 threads and 5685 MiB with 4. But such a
// run's lead tile waits for the reader, which then costs the run its time: with 4 threads the 4K encodes in
// 8-24 GB waited 3.5-4.2 s for it (0.02 s with 16), a seventh of their time. Small frames cost little, and
// fast models want them read fast. So unless told, a reader keeps its threads' frames within kFramesBudget:
// 16 threads up to about 1440p, 8 at 4K, never fewer than 4 - nor more than one per core and one, as FFmpeg
// would take.
int reader_threads(int threads, int64_t width, int64_t height) {
  if (threads > 0) return threads;
  constexpr double kFramesBudget = 96.0 * (1 << 20);
  const double frame = 1.5 * static_cast<double>(std::max<int64_t>(width * height, 1));  // 8-bit 4:2:0
  const int by_size = static_cast<int>(std::clamp(kFramesBudget / frame, 4.0, 16.0));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::min(by_size, cores + 1);
}

VideoReader::VideoReader(const std::filesystem::path& path, ReaderOptions options)
    : path_(path), options_(options), packet_(make_packet()), frame_(make_frame()), decoded_(make_frame()) {
  core::check_regular_file(path, "input video");  // Note [Regular inputs]
  open_guard_.url = "file:" + path.string();      // Note [One input file]
  const AVInputFormat* demuxer = probe_demuxer(open_guard_.url, path);
  AVFormatContext* raw = avformat_alloc_context();
  if (!raw) throw Error("cannot allocate a demuxer for " + path.string() + ": out of memory");
  raw->interrupt_callback = {ffmpeg_interrupt_callback, nullptr};
  open_guard_.open_default = raw->io_open;
  raw->opaque = &open_guard_;
  raw->io_open = open_only_the_input;
  AVDictionary* open_options = file_protocol_only();
  // On failure avformat_open_input frees the context itself.
  const int opened = avformat_open_input(&raw, open_guard_.url.c_str(), demuxer, &open_options);
  av_dict_free(&open_options);
  auto refuse_references = [&] {
    if (open_guard_.refused.empty()) return;
    throw Error("cannot open input " + path.string() + ": it is " +
                (open_guard_.demuxer.empty() ? std::string("a file") : "a " + open_guard_.demuxer + " file") +
                " that refers to another file (" + open_guard_.refused +
                "); vaecodec reads one self-contained video file, not playlists or lists of files");
  };
  if (opened < 0) refuse_references();
  check_av(opened, "cannot open input", path);
  format_ctx_.reset(raw);
  const int found = avformat_find_stream_info(raw, nullptr);
  refuse_references();
  check_av(found, "cannot read the streams of", path);

  const int index = av_find_best_stream(raw, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
  if (index < 0 || (raw->streams[index]->disposition & AV_DISPOSITION_ATTACHED_PIC))
    throw Error("no video stream in " + path.string() + " (is it a video file?)");
  stream_ = raw->streams[index];
  for (unsigned i = 0; i < raw->nb_streams; ++i) {
    AVStream* st = raw->streams[i];
    if (st->codecpar->codec_type == AVMEDIA_TYPE_AUDIO && audio_is_readable(st->codecpar)) {
      audio_.push_back({st->index, st->codecpar, st->time_base});
    } else if (st != stream_) {
      if (st->codecpar->codec_type == AVMEDIA_TYPE_AUDIO) {
        note_damage(AVERROR_INVALIDDATA, "audio stream with damaged parameters");
        warn(path.string() + ": audio stream " + std::to_string(st->index) +
             " left out: its parameters are damaged and no decoder opens it");
      }
      st->discard = AVDISCARD_ALL;
    }
  }

  const AVCodec* codec = avcodec_find_decoder(stream_->codecpar->codec_id);
  if (!codec)
    throw Error("no decoder for the " + std::string(avcodec_get_name(stream_->codecpar->codec_id)) +
                " video in " + path.string() + " (this FFmpeg build lacks it)");
  decoder_.reset(avcodec_alloc_context3(codec));
  if (!decoder_) throw Error("cannot allocate a decoder for " + path.string() + ": out of memory");
  check_av(avcodec_parameters_to_context(decoder_.get(), stream_->codecpar), "cannot set up the decoder for",
           path);
  decoder_->pkt_timebase = stream_->time_base;
  decoder_->thread_count =
      reader_threads(options_.threads, stream_->codecpar->width, stream_->codecpar->height);
  check_av(avcodec_open2(decoder_.get(), codec, nullptr),
           "cannot open the " + std::string(codec->name) + " decoder for", path);

  format_.time_base = stream_->time_base;
  if (valid(stream_->avg_frame_rate))
    format_.frame_rate = stream_->avg_frame_rate;
  else if (valid(stream_->r_frame_rate))
    format_.frame_rate = stream_->r_frame_rate;
  damage_.expected_frames = stream_->nb_frames;
  stream_rate_ = format_.frame_rate;

  const SourceOptions& source = options_.source;
  if (source.start_us) seek_to_start();
  if (source.duration_us) end_ = av_rescale_q(*source.duration_us, AV_TIME_BASE_Q, stream_->time_base);
  if (!produce(frame_.get())) {
    if (source.start_us && !kept_input_) {
      std::string lasts;
      if (raw->duration > 0) lasts = " (it lasts " + seconds_string(raw->duration) + " s)";
      throw UsageError("--start " + seconds_string(*source.start_us) + " is past the end of " +
                       path.string() + lasts);
    }
    if (filter_)
      throw UsageError("--vf '" + source.filter_graph + "' let no frame of " + path.string() + " through");
    std::string why = damage_.first_error.empty() ? "" : " (" + damage_.first_error + ")";
    throw Error("no frames could be decoded from " + path.string() + why);
  }
  first_pending_ = true;
  format_.width = frame_->width;
  format_.height = frame_->height;
  format_.pixel_format = static_cast<AVPixelFormat>(frame_->format);
  format_.colour = colour_tags_of(frame_.get());
  format_.chroma_location = frame_->chroma_location;
  format_.sample_aspect_ratio =
      av_guess_sample_aspect_ratio(raw, const_cast<AVStream*>(stream_), frame_.get());
  if (filter_) {
    format_.time_base = filter_->time_base();
    if (valid(filter_->frame_rate())) format_.frame_rate = filter_->frame_rate();
    format_.sample_aspect_ratio = filter_->sample_aspect_ratio();
    if (!takes_pixel_format(format_.pixel_format))
      throw UsageError("--vf '" + source.filter_graph + "' gives " + pixel_format_name(format_.pixel_format) +
                       " frames, which the model cannot take; end the graph in a YUV or RGB format (e.g. "
                       "format=yuv420p)");
  }
  converter_.emplace(format_.width, format_.height);
}

// Note [Cutting the input]: ffmpeg's -ss, without -copyts.
void VideoReader::seek_to_start() {
  int64_t target = *options_.source.start_us;
  if (format_ctx_->start_time != AV_NOPTS_VALUE) target += format_ctx_->start_time;
  // The keyframe at or before the target; frames before it are dropped after decoding. A file that cannot
  // seek is decoded from its beginning, which gives the same frames.
  avformat_seek_file(format_ctx_.get(), -1, std::numeric_limits<int64_t>::min(), target, target, 0);
  offset_ = av_rescale_q(target, AV_TIME_BASE_Q, stream_->time_base);
}

void VideoReader::set_audio_sink(AudioSink sink) {
  audio_sink_ = std::move(sink);
  if (!audio_sink_) return;
  for (PacketPtr& packet : held_audio_) audio_sink_(std::move(packet));
  held_audio_.clear();
}

int64_t VideoReader::frame_count_hint() const {
  int64_t hint = 0;
  if (stream_->nb_frames > 0)
    hint = stream_->nb_frames;
  else if (stream_->duration > 0 && valid(format_.frame_rate))
    hint = av_rescale_q(stream_->duration, stream_->time_base, av_inv_q(format_.frame_rate));
  else if (format_ctx_->duration > 0 && valid(format_.frame_rate))
    hint = av_rescale_q(format_ctx_->duration, AV_TIME_BASE_Q, av_inv_q(format_.frame_rate));
  const SourceOptions& source = options_.source;
  const AVRational per_frame = valid(format_.frame_rate) ? av_inv_q(format_.frame_rate) : AVRational{0, 1};
  if (source.start_us && hint > 0 && per_frame.num > 0)
    hint = std::max<int64_t>(hint - av_rescale_q(*source.start_us, AV_TIME_BASE_Q, per_frame), 0);
  if (source.duration_us && per_frame.num > 0) {
    const int64_t span = av_rescale_q(*source.duration_us, AV_TIME_BASE_Q, per_frame);
    hint = hint > 0 ? std::min(hint, span) : span;
  }
  if (source.max_frames) hint = hint > 0 ? std::min(hint, *source.max_frames) : *source.max_frames;
  return hint;
}

bool VideoReader::next(VideoFrame& out) {
  if (finished_) return false;
  const std::optional<int64_t>& limit = options_.source.max_frames;
  if (limit && frames_taken_ >= *limit) {
    finish(/*limited=*/true);
    return false;
  }
  if (first_pending_) {
    first_pending_ = false;
  } else if (!produce(frame_.get())) {
    finish(/*limited=*/false);
    return false;
  }
  fill(frame_.get(), out);
  av_frame_unref(frame_.get());
  ++frames_taken_;
  video_end_seconds_ = static_cast<double>(out.pts + out.duration) * av_q2d(format_.time_base);
  release_audio(video_end_seconds_);
  return true;
}

int64_t VideoReader::PtsGuard::next(int64_t pts, int64_t duration, int64_t* fixed) {
  if (pts == AV_NOPTS_VALUE) {
    pts = has_last ? last + std::max<int64_t>(last_duration, 1) : 0;
    if (has_last && fixed) ++*fixed;
  } else if (has_last && pts <= last) {
    pts = last + 1;
    if (fixed) ++*fixed;
  }
  has_last = true;
  last = pts;
  last_duration = duration;
  return pts;
}

// The next frame for next(): decoded, its pts repaired and shifted (Note [Timestamps],
// Note [Cutting the input]), inside the cut, through the filter graph. False at the end.
bool VideoReader::produce(AVFrame* out) {
  const SourceOptions& source = options_.source;
  while (true) {
    if (filter_ && filter_->pull(out)) {
      out->pts = output_pts_.next(out->pts, compat::frame_duration(out), nullptr);
      return true;
    }
    if (input_done_) {
      if (!filter_ || filter_flushed_) return false;
      filter_flushed_ = true;
      filter_->push(nullptr);
      continue;
    }
    AVFrame* frame = decoded_.get();
    if (!decode_next(frame)) {
      input_done_ = true;
      continue;
    }
    int64_t duration = compat::frame_duration(frame);
    if (duration <= 0 && valid(stream_rate_))
      duration = av_rescale_q(1, av_inv_q(stream_rate_), stream_->time_base);
    const int64_t pts =
        decoded_pts_.next(frame->best_effort_timestamp, duration, &damage_.fixed_timestamps) - offset_;
    if (pts < 0) {  // before the start
      av_frame_unref(frame);
      continue;
    }
    if (end_ && pts >= *end_) {  // the cut's end: the decoder is not fed again
      av_frame_unref(frame);
      input_done_ = true;
      continue;
    }
    kept_input_ = true;
    frame->pts = pts;
    compat::set_frame_duration(frame, std::max<int64_t>(duration, 0));
    if (source.filter_graph.empty()) {
      av_frame_move_ref(out, frame);
      return true;
    }
    if (!filter_) {
      FilterInput input;
      input.width = frame->width;
      input.height = frame->height;
      input.pixel_format = static_cast<AVPixelFormat>(frame->format);
      input.time_base = stream_->time_base;
      input.frame_rate = stream_rate_;
      input.sample_aspect_ratio =
          av_guess_sample_aspect_ratio(format_ctx_.get(), const_cast<AVStream*>(stream_), frame);
      filter_.emplace(source.filter_graph, input);
    }
    filter_->push(frame);
    av_frame_unref(frame);
  }
}

// Note [Cutting the input]: the audio of the span taken. `limited`: --frames stopped the video.
void VideoReader::finish(bool limited) {
  finished_ = true;
  // Nothing is decoded any more: the decoder's frames go now, not when the reader does, so the rest of the
  // run (a window's tiles after the clip has been read) goes without them. It saved little at the peak
  // (42 MiB of a 4K encode in 24 GB: the run peaks while the last frames are read; Note [The reader's decoder
  // threads] is what bounds that).
  decoder_.reset();
  filter_.reset();
  av_frame_unref(decoded_.get());
  const SourceOptions& source = options_.source;
  if (!source.cuts()) return;
  double end = std::numeric_limits<double>::infinity();
  if (limited)
    end = video_end_seconds_;
  else if (source.duration_us)
    end = static_cast<double>(*source.duration_us) / AV_TIME_BASE;
  release_audio(end);
  gated_audio_.clear();
  if (!options_.keep_audio || audio_.empty()) return;
  // Audio stored after the last video packet taken: read on until every audio stream has passed the end.
  std::set<int> passed;
  while (passed.size() < audio_.size()) {
    throw_if_interrupted();
    if (av_read_frame(format_ctx_.get(), packet_.get()) < 0) break;  // the end (or damage past the cut)
    const AVStream* stream = format_ctx_->streams[packet_->stream_index];
    if (stream->codecpar->codec_type == AVMEDIA_TYPE_AUDIO) {
      PacketPtr copy = make_packet();
      av_packet_move_ref(copy.get(), packet_.get());
      if (!shift_audio(copy.get())) continue;
      if (static_cast<double>(packet_time(copy.get())) * av_q2d(stream->time_base) >= end)
        passed.insert(copy->stream_index);
      else
        deliver_audio(std::move(copy));
    }
    av_packet_unref(packet_.get());
  }
}

// Shifts an audio packet as the video (Note [Cutting the input]); false for one that begins before the start.
bool VideoReader::shift_audio(AVPacket* packet) const {
  const AVRational time_base = format_ctx_->streams[packet->stream_index]->time_base;
  const int64_t shift = av_rescale_q(offset_, stream_->time_base, time_base);
  if (packet->pts != AV_NOPTS_VALUE) packet->pts -= shift;
  if (packet->dts != AV_NOPTS_VALUE) packet->dts -= shift;
  const int64_t time = packet_time(packet);
  return time == AV_NOPTS_VALUE || time >= 0;
}

void VideoReader::route_audio(PacketPtr packet) {
  if (!options_.source.cuts()) {
    deliver_audio(std::move(packet));
    return;
  }
  if (shift_audio(packet.get())) gated_audio_.push_back(std::move(packet));
}

void VideoReader::deliver_audio(PacketPtr packet) {
  if (audio_sink_)
    audio_sink_(std::move(packet));
  else
    held_audio_.push_back(std::move(packet));
}

// Hands over the gated audio packets that begin before `until` (seconds, after the shift), in file order.
void VideoReader::release_audio(double until) {
  if (gated_audio_.empty()) return;
  std::vector<PacketPtr> waiting;
  for (PacketPtr& packet : gated_audio_) {
    const int64_t time = packet_time(packet.get());
    const double seconds =
        time == AV_NOPTS_VALUE ? 0.0 : time * av_q2d(format_ctx_->streams[packet->stream_index]->time_base);
    if (seconds < until)
      deliver_audio(std::move(packet));
    else
      waiting.push_back(std::move(packet));
  }
  gated_audio_ = std::move(waiting);
}

void VideoReader::note_damage(int code, const char* what) {
  if (damage_.first_error.empty()) damage_.first_error = std::string(what) + ": " + av_error_string(code);
  if (options_.strict)
    throw Error(path_.string() + " is damaged: " + what + ": " + av_error_string(code) + " (--strict)");
}

// Receives frames until one comes out; feeds packets while the decoder wants more. False once the decoder
// has been drained completely (every frame of the file has come out).
bool VideoReader::decode_next(AVFrame* frame) {
  while (true) {
    const int received = avcodec_receive_frame(decoder_.get(), frame);
    if (received == 0) {
      if (compat::frame_is_corrupt(frame)) {
        ++damage_.damaged_frames;
        note_damage(AVERROR_INVALIDDATA, "damaged frame");
      }
      return true;
    }
    if (received == AVERROR_EOF) return false;
    if (received == AVERROR(ENOMEM)) check_av(received, "cannot decode", path_);
    if (received != AVERROR(EAGAIN)) {
      ++damage_.bad_packets;
      note_damage(received, "decoding failed");
      continue;
    }
    if (draining_) return false;  // a draining decoder never asks for more; nothing else will come
    if (!feed_decoder()) {
      // The end: the decoder gives back what it holds, then AVERROR_EOF. With frame threads, an error of an
      // earlier packet may surface here; the flush itself has been taken all the same.
      const int flushed = avcodec_send_packet(decoder_.get(), nullptr);
      draining_ = true;
      if (flushed == AVERROR(ENOMEM)) check_av(flushed, "cannot flush the decoder for", path_);
      if (flushed < 0 && flushed != AVERROR_EOF) {
        ++damage_.bad_packets;
        note_damage(flushed, "decoding failed");
      }
    }
  }
}

// Reads packets until one video packet has gone to the decoder; false at the end of the input.
bool VideoReader::feed_decoder() {
  while (true) {
    throw_if_interrupted();
    const int read = av_read_frame(format_ctx_.get(), packet_.get());
    if (read == AVERROR_EXIT && interrupted()) check_av(read, "cannot read", path_);
    if (read == AVERROR_EOF) return false;
    if (read < 0) {
      damage_.read_error = true;
      note_damage(read, "reading failed");
      return false;
    }
    if (packet_->stream_index == stream_->index) {
      if (packet_->flags & AV_PKT_FLAG_CORRUPT) {
        ++damage_.bad_packets;
        note_damage(AVERROR_INVALIDDATA, "truncated or damaged packet");
      }
      const int sent = avcodec_send_packet(decoder_.get(), packet_.get());
      av_packet_unref(packet_.get());
      if (sent == AVERROR(ENOMEM)) check_av(sent, "cannot decode", path_);
      if (sent < 0) {
        // The packet is lost; the decoder goes on with the next one (Note [Damaged input]).
        ++damage_.bad_packets;
        note_damage(sent, "undecodable packet");
      }
      return true;
    }
    if (options_.keep_audio &&
        format_ctx_->streams[packet_->stream_index]->codecpar->codec_type == AVMEDIA_TYPE_AUDIO) {
      PacketPtr copy = make_packet();
      av_packet_move_ref(copy.get(), packet_.get());
      route_audio(std::move(copy));
    }
    av_packet_unref(packet_.get());
  }
}

// Note [Timestamps]
// A frame keeps the pts the file gave it (best_effort_timestamp, in the stream's time base), so variable
// frame rates survive; pts are never counted up from a frame number. Two exceptions, both counted as fixed
// timestamps: a frame without any pts gets the previous one plus the previous duration, and a pts that does
// not increase (broken files; encoders and muxers refuse those) becomes the previous one plus one tick.
// Padding frames (Note [Padding]) never get a pts: they are cut before the writer.
void VideoReader::fill(const AVFrame* frame, VideoFrame& out) {
  int64_t duration = compat::frame_duration(frame);
  if (duration <= 0 && valid(format_.frame_rate))
    duration = av_rescale_q(1, av_inv_q(format_.frame_rate), format_.time_base);
  out.pts = frame->pts;
  out.duration = std::max<int64_t>(duration, 0);
  out.rgb = torch::Tensor();
  out.yuv = options_.yuv_planes ? converter_->planes(frame, options_.pinned) : std::nullopt;
  if (out.yuv) return;  // Note [Colour conversion of the input on the GPU] in io/colour.h
  out.rgb = torch::empty({3, format_.height, format_.width},
                         torch::TensorOptions().dtype(torch::kFloat).pinned_memory(options_.pinned));
  converter_->convert(frame, out.rgb);
}

torch::Tensor frame_rgb(const VideoFrame& frame, core::Device& device) {
  if (!frame.yuv) return device.upload(frame.rgb);
  return yuv_to_rgb(*frame.yuv, device.torch_device(),
                    [&](const torch::Tensor& p) { return device.upload(p); });
}

}  // namespace vaecodec::io
