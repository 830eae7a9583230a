#include "io/ffmpeg_common.h"

#include <cstdarg>
#include <cstdio>
#include <mutex>

#include "core/error.h"
#include "io/interrupt.h"

namespace vaecodec::io {
namespace {

thread_local std::vector<std::string>* captured_log = nullptr;

void capturing_log_callback(void* context, int level, const char* format, va_list args) {
  if (captured_log && level <= AV_LOG_ERROR) {
    char line[1024];
    va_list copy;
    va_copy(copy, args);
    std::vsnprintf(line, sizeof line, format, copy);
    va_end(copy);
    std::string text = line;
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    if (!text.empty()) captured_log->push_back(text);
  }
  av_log_default_callback(context, level, format, args);
}

}  // namespace

LogCapture::LogCapture() : previous_(captured_log) {
  static std::once_flag installed;
  std::call_once(installed, [] { av_log_set_callback(capturing_log_callback); });
  captured_log = &lines_;
}

LogCapture::~LogCapture() {
  captured_log = previous_;
}

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
