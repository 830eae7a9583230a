#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavfilter/avfilter.h>
#include <libavformat/avformat.h>
#include <libavutil/avutil.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
}

namespace vaecodec::io {

// Every libav* object vaecodec holds has exactly one owner, one of the aliases below. They are move-only;
// packets and frames are allocated once per stage and unref'd after each use.
namespace detail {
struct InputFormatDeleter {
  void operator()(AVFormatContext* ctx) const { avformat_close_input(&ctx); }
};
// An output context also owns its AVIOContext (opened with avio_open), closed here if still open.
struct OutputFormatDeleter {
  void operator()(AVFormatContext* ctx) const {
    if (ctx->oformat && !(ctx->oformat->flags & AVFMT_NOFILE)) avio_closep(&ctx->pb);
    avformat_free_context(ctx);
  }
};
struct CodecContextDeleter {
  void operator()(AVCodecContext* ctx) const { avcodec_free_context(&ctx); }
};
struct FrameDeleter {
  void operator()(AVFrame* frame) const { av_frame_free(&frame); }
};
struct PacketDeleter {
  void operator()(AVPacket* packet) const { av_packet_free(&packet); }
};
struct SwsDeleter {
  void operator()(SwsContext* ctx) const { sws_freeContext(ctx); }
};
struct FilterGraphDeleter {
  void operator()(AVFilterGraph* graph) const { avfilter_graph_free(&graph); }
};
struct FilterInOutDeleter {
  void operator()(AVFilterInOut* inout) const { avfilter_inout_free(&inout); }
};
}  // namespace detail

using InputFormatPtr = std::unique_ptr<AVFormatContext, detail::InputFormatDeleter>;
using OutputFormatPtr = std::unique_ptr<AVFormatContext, detail::OutputFormatDeleter>;
using CodecContextPtr = std::unique_ptr<AVCodecContext, detail::CodecContextDeleter>;
using FramePtr = std::unique_ptr<AVFrame, detail::FrameDeleter>;
using PacketPtr = std::unique_ptr<AVPacket, detail::PacketDeleter>;
using SwsContextPtr = std::unique_ptr<SwsContext, detail::SwsDeleter>;
using FilterGraphPtr = std::unique_ptr<AVFilterGraph, detail::FilterGraphDeleter>;
using FilterInOutPtr = std::unique_ptr<AVFilterInOut, detail::FilterInOutDeleter>;

// Allocators that throw vaecodec::Error instead of returning nullptr.
FramePtr make_frame();
PacketPtr make_packet();

// FFmpeg's own message for an error code ("Invalid data found when processing input").
std::string av_error_string(int code);

// Throws vaecodec::Error "`what` `path`: `FFmpeg's message`" when `code` < 0 (Interrupted when the code is
// AVERROR_EXIT from an interrupt); returns `code` otherwise.
int check_av(int code, const std::string& what, const std::filesystem::path& path);

// "yuv420p10le" for a format, "none" for AV_PIX_FMT_NONE.
std::string pixel_format_name(AVPixelFormat format);

// Keeps the error lines libav* logs on this thread while it lives (whatever the log level), for errors that
// FFmpeg explains only in its log: a bad filter graph ("No such filter: 'foo'"), an encoder that cannot open
// ("Cannot load libcuda.so.1") where the code it returns says only "Invalid argument".
class LogCapture {
 public:
  LogCapture();
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  const std::vector<std::string>& lines() const { return lines_; }

 private:
  std::vector<std::string> lines_;
  std::vector<std::string>* previous_;
};

// Quiets libav*'s own logging to errors only (or `level`), once for the process. Our messages are the ones
// the user sees; FFmpeg's chatter ("deprecated pixel format used") is noise on a progress line.
void set_ffmpeg_log_level(int level = AV_LOG_ERROR);

}  // namespace vaecodec::io
