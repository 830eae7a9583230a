#pragma once

#include <string>

#include <torch/torch.h>

#include "io/ffmpeg_common.h"

namespace vaecodec::io {

// Note [Colour]
// The VAE sees RGB in [-1, 1]: R'G'B' as coded, not linear light, in the primaries of the source. vaecodec
// therefore converts only the YUV <-> RGB matrix and the range, and carries primaries and transfer through as
// tags (the output is tagged exactly as the input was; nothing is re-graded).
// - Matrix: the frame's own colorspace (BT.601, BT.709, BT.2020 NCL, SMPTE 240M, FCC). When the file leaves it
//   unspecified, vaecodec follows what players do: BT.709 for HD (width >= 1280 or height >= 720), BT.601
//   below. BT.2020 CL is converted as NCL (swscale has no CL path). RGB sources have no matrix.
// - Range: the frame's color_range; unspecified means limited (16-235) for YUV, except the yuvj* formats,
//   which are full range by definition. RGB is always full range. swscale is handed the deprecated yuvj*
//   formats as their yuv* twins plus an explicit full range, so the range is never guessed twice.
// - The same matrix and range are used both ways: the output is encoded with the input's matrix and range
//   and tagged with them, so a limited-range BT.709 clip comes back limited-range BT.709.
// The conversion is swscale's with sws_setColorspaceDetails (16-bit planar GBR in the middle, accurate
// rounding, full chroma interpolation); one SwsContext per converter, re-made only when the source format,
// size or colour details change.
struct ColourTags {
  AVColorPrimaries primaries = AVCOL_PRI_UNSPECIFIED;
  AVColorTransferCharacteristic transfer = AVCOL_TRC_UNSPECIFIED;
  AVColorSpace matrix = AVCOL_SPC_UNSPECIFIED;
  AVColorRange range = AVCOL_RANGE_UNSPECIFIED;

  bool operator==(const ColourTags&) const = default;
};

// The tags a frame carries (as written in the file, unspecified left unspecified).
ColourTags colour_tags_of(const AVFrame* frame);
// "matrix bt709, range tv, primaries bt709, transfer bt709" for messages.
std::string colour_tags_string(const ColourTags& tags);
// Tags from FFmpeg's names ("bt709", "tv", as av_color_*_name gives them); empty or unknown names are
// unspecified.
ColourTags colour_tags_from_names(const std::string& primaries, const std::string& transfer,
                                  const std::string& matrix, const std::string& range);

// The matrix and range vaecodec converts with (Note [Colour]): never unspecified.
struct ColourDetails {
  AVColorSpace matrix = AVCOL_SPC_BT709;
  AVColorRange range = AVCOL_RANGE_MPEG;
  bool operator==(const ColourDetails&) const = default;
};
ColourDetails resolve_colour(AVPixelFormat format, const ColourTags& tags, int width, int height);

// For yuvj* the yuv* twin (swscale wants those plus an explicit range), the format itself otherwise.
AVPixelFormat without_jpeg_range(AVPixelFormat format);
bool is_rgb_format(AVPixelFormat format);

// Decoded frames -> RGB tensors [3, H, W], float32 in [-1, 1], at a fixed output size.
class FrameToTensor {
 public:
  FrameToTensor(int width, int height) : width_(width), height_(height) {}
  // Fills `out` (a contiguous float32 CPU tensor [3, H, W], e.g. pinned) from `frame`.
  void convert(const AVFrame* frame, torch::Tensor& out);

 private:
  struct Key {
    AVPixelFormat format = AV_PIX_FMT_NONE;
    int width = 0, height = 0;
    ColourDetails colour;
    bool operator==(const Key&) const = default;
  };
  int width_, height_;
  Key key_;
  SwsContextPtr sws_;
  FramePtr rgb_;  // GBRP16 staging frame
};

// RGB tensors [3, H, W] (float, any range; clamped to [-1, 1]) -> frames of an encoder's pixel format.
class TensorToFrame {
 public:
  TensorToFrame(AVPixelFormat format, int width, int height, ColourDetails colour);
  // Writes `rgb` (CPU, [3, H, W]) into `out`, which must be a writable frame of the format and size above.
  void convert(const torch::Tensor& rgb, AVFrame* out);

 private:
  int width_, height_;
  SwsContextPtr sws_;
  FramePtr rgb_;
};

}  // namespace vaecodec::io
