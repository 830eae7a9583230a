#pragma once

// The one place where libav* version differences live. vaecodec builds against FFmpeg 5.1 (Debian 12, the
// device kit); the branches below keep it building on 6.x and 7.x, where some fields moved.

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/frame.h>
}

namespace vaecodec::io::compat {

// AVFrame::duration replaced pkt_duration in libavutil 57.30 (FFmpeg 6.0).
inline int64_t frame_duration(const AVFrame* frame) {
#if LIBAVUTIL_VERSION_INT >= AV_VERSION_INT(57, 30, 100)
  return frame->duration;
#else
  return frame->pkt_duration;
#endif
}

inline void set_frame_duration(AVFrame* frame, int64_t duration) {
#if LIBAVUTIL_VERSION_INT >= AV_VERSION_INT(57, 30, 100)
  frame->duration = duration;
#else
  frame->pkt_duration = duration;
#endif
}

// The pixel formats an encoder takes, AV_PIX_FMT_NONE-terminated, or nullptr when it does not say.
// FFmpeg 7.1 deprecated AVCodec::pix_fmts in favour of avcodec_get_supported_config.
inline const AVPixelFormat* encoder_pixel_formats(const AVCodec* codec) {
#if LIBAVCODEC_VERSION_INT >= AV_VERSION_INT(61, 13, 100)
  const void* formats = nullptr;
  int count = 0;
  if (avcodec_get_supported_config(nullptr, codec, AV_CODEC_CONFIG_PIX_FORMAT, 0, &formats, &count) < 0)
    return nullptr;
  return static_cast<const AVPixelFormat*>(formats);
#else
  return codec->pix_fmts;
#endif
}

// Frames the decoder marked as damaged (errors it concealed).
inline bool frame_is_corrupt(const AVFrame* frame) {
  return (frame->flags & AV_FRAME_FLAG_CORRUPT) != 0 || frame->decode_error_flags != 0;
}

}  // namespace vaecodec::io::compat
