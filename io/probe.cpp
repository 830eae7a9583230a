#include "io/probe.h"

#include <algorithm>
#include <exception>

#include "core/error.h"
#include "core/safetensors.h"
#include "io/ffmpeg_common.h"
#include "io/latent_file.h"

namespace vaecodec::io {
namespace {

bool valid(AVRational q) {
  return q.num > 0 && q.den > 0;
}

InputLength probe_video(const std::filesystem::path& path) {
  AVFormatContext* raw = nullptr;
  // No avformat_find_stream_info: it decodes frames, and the header is enough for an order and a total.
  if (avformat_open_input(&raw, path.c_str(), nullptr, nullptr) < 0) return {};
  const InputFormatPtr context(raw);
  const int index = av_find_best_stream(raw, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
  if (index < 0) return {};
  const AVStream* stream = raw->streams[index];
  InputLength length;
  if (stream->duration > 0 && stream->duration != AV_NOPTS_VALUE)
    length.seconds = static_cast<double>(stream->duration) * av_q2d(stream->time_base);
  else if (raw->duration > 0)
    length.seconds = static_cast<double>(raw->duration) / AV_TIME_BASE;
  const AVRational rate = valid(stream->avg_frame_rate) ? stream->avg_frame_rate : stream->r_frame_rate;
  if (stream->nb_frames > 0)
    length.frames = stream->nb_frames;
  else if (length.seconds > 0 && valid(rate))
    length.frames = static_cast<int64_t>(length.seconds * av_q2d(rate) + 0.5);
  return length;
}

InputLength probe_latents(const std::filesystem::path& path) {
  const core::SafetensorsFile file(path);
  InputLength length;
  if (const auto record = file.metadata().find("vaecodec"); record != file.metadata().end()) {
    const LatentMeta meta = parse_latent_meta(record->second);
    length.frames = meta.frames.value_or(0);
    if (meta.frame_rate && meta.frame_rate->num > 0 && meta.frame_rate->den > 0 && length.frames > 0)
      length.seconds = static_cast<double>(length.frames) * meta.frame_rate->den / meta.frame_rate->num;
  }
  if (length.frames == 0)
    for (const auto& [name, entry] : file.entries())
      if (entry.shape.size() == 5) length.frames = std::max(length.frames, entry.shape[2]);
  return length;
}

}  // namespace

InputLength probe_length(const std::filesystem::path& path) {
  try {
    return is_latent_path(path) ? probe_latents(path) : probe_video(path);
  } catch (const std::exception&) {
    return {};
  }
}

VideoCount count_video_frames(const std::filesystem::path& path) {
  AVFormatContext* raw = nullptr;
  check_av(avformat_open_input(&raw, path.c_str(), nullptr, nullptr), "cannot open", path);
  const InputFormatPtr context(raw);
  int index = av_find_best_stream(raw, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
  if (index < 0 || raw->streams[index]->codecpar->width <= 0) {  // a header without the size: look further
    check_av(avformat_find_stream_info(raw, nullptr), "cannot read", path);
    index = av_find_best_stream(raw, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
    if (index < 0) throw Error("cannot read " + path.string() + ": it holds no video stream");
  }
  VideoCount count;
  count.width = raw->streams[index]->codecpar->width;
  count.height = raw->streams[index]->codecpar->height;
  if (count.width <= 0 || count.height <= 0)
    throw Error("cannot read " + path.string() + ": its video stream has no frame size");
  const PacketPtr packet = make_packet();
  while (true) {
    const int code = av_read_frame(raw, packet.get());
    if (code == AVERROR_EOF) break;
    check_av(code, "cannot read", path);
    if (packet->stream_index == index && packet->size > 0 && !(packet->flags & AV_PKT_FLAG_DISCARD))
      ++count.frames;
    av_packet_unref(packet.get());
  }
  if (count.frames == 0) throw Error("cannot read " + path.string() + ": its video stream holds no frames");
  return count;
}

}  // namespace vaecodec::io
