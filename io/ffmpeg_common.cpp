#include "io/ffmpeg_common.h"

#include "core/error.h"
#include "io/interrupt.h"

namespace vaecodec::io {

FramePtr make_frame() {
  FramePtr frame(av_frame_alloc());
  if (!frame) throw Error("cannot allocate an AVFrame: out of memory");
  return frame;
}

PacketPtr make_packet() {
  PacketPtr packet(av_packet_alloc());
  if (!packet) throw Error("cannot allocate an AVPacket: out of memory");
  return packet;
}

std::string av_error_string(int code) {
  char buffer[AV_ERROR_MAX_STRING_SIZE] = {};
  if (av_strerror(code, buffer, sizeof(buffer)) < 0) return "unknown FFmpeg error " + std::to_string(code);
  return buffer;
}

int check_av(int code, const std::string& what, const std::filesystem::path& path) {
  if (code == AVERROR_EXIT && interrupted()) throw Interrupted();  // Note [Interrupts]
  if (code < 0) throw Error(what + " " + path.string() + ": " + av_error_string(code));
  return code;
}

std::string pixel_format_name(AVPixelFormat format) {
  const char* name = av_get_pix_fmt_name(format);
  return name ? name : "none";
}

void set_ffmpeg_log_level(int level) {
  av_log_set_level(level);
}

}  // namespace vaecodec::io
