#pragma once

#include <array>
#include <functional>
#include <optional>

#include <string>

#include <torch/torch.h>

#include "io/chroma.h"
#include "io/ffmpeg_common.h"

namespace vaecodec::io {

// Note [Colour]
// The VAE sees RGB in [-1, 1]: R'G'B' as coded, not linear light, in the primaries of the source. vaecodec
// therefore converts only the YUV <-> RGB matrix and the range, and carries primaries and transfer through as
// tags (the output is tagged as the input was; nothing is re-graded).
// - Matrix: the frame's own colorspace (BT.601 = SMPTE 170M = BT.470BG, BT.709, BT.2020 NCL, SMPTE 240M,
// FCC).
//   When the file leaves it unspecified (or names one vaecodec cannot convert, such as YCgCo), vaecodec does
//   what players do: BT.709 for HD (width >= 1280 or height >= 720), BT.601 below. BT.2020 CL is converted as
//   NCL. RGB sources have no matrix.
// - Range: the frame's color_range; unspecified means limited for YUV and gray, except the yuvj* formats,
// which
//   are full range by definition. RGB is always full range.
// - The same matrix and range are used both ways: the output is encoded with the input's matrix and range and
//   tagged with them, so a limited-range BT.709 clip comes back limited-range BT.709.
// The arithmetic is done here, on tensors, from the definitions (BT.601/709/2020: E'y = Kr R + Kg G + Kb B,
// limited range Y = 16 + 219 E'y and C = 128 + 224 E'c in 8-bit units, times 2^(n-8) for n bits; full range
// Y = (2^n - 1) E'y, C = 2^(n-1) + (2^n - 1) E'c), and so is the chroma resampling (Note [Chroma resampling]
// in chroma.h). Planar YUV frames are read and written in place; swscale only repacks other layouts (NV12,
// P010, YUYV, big-endian) into the planar one of the same subsampling, widening the bit depth by a shift and
// leaving the range alone. swscale's own YUV <-> RGB path was not used because its fixed-point coefficients
// are off by up to 0.8 code values (a bias, measured against these formulas). RGB sources go to planar RGB at
// their own bit depth, which swscale does exactly. One SwsContext per converter, re-made only when the source
// format or size changes.
// - Out of gamut: Y'CbCr can hold colours outside the RGB cube (upsampled chroma overshoots at sharp colour
//   edges). They are kept, not clamped: the model gets RGB slightly beyond [-1, 1] there, and the way back
//   lands on the same code values, so that a pass-through loses nothing. Only the code values written are
//   clamped (to what the bit depth holds), and RGB outputs to [0, 1].
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
// Bytes a pixel of a frame of `format` that the reader hands on as its 8-bit planes (FrameToTensor::planes:
// 1.5 for yuv420p), 0 for a format it converts to RGB.
double plane_bytes_per_pixel(AVPixelFormat format);

// Note [Colour conversion of the input on the GPU]
// Converting a decoded frame to RGB costs the reader's thread more than decoding it (about 20 ms for an
// 8-bit 4:2:0 1080p frame on the CPU), which a run that waits for its input (exact tiles' windows) pays in
// full. With the model on a GPU, an 8-bit Y'CbCr frame of a layout read in place (yuv420p, yuv422p, yuv444p
// and their full-range forms) leaves the reader as its planes (VideoFrame::yuv: an eighth of the float RGB's
// bytes for 4:2:0), and the model's thread converts it on the GPU with yuv_to_rgb, the very function the CPU
// path runs (the same float32 operations; a GPU's fused multiply-adds may round the last bit differently).
// Other layouts, and frames a quality meter or a side-by-side video needs as RGB, are converted by the reader
// as before. The mirror of Note [Colour conversion on the GPU] (io/pipeline.cpp) for the output.

// A Y'CbCr frame's planes and what turns them into RGB (Levels, luma weights, chroma layout and siting).
struct YuvFrame {
  std::array<torch::Tensor, 3> planes;  // Y, Cb, Cr code values [h, w] (Cb and Cr subsampled), any device
  double kr = 0, kb = 0;                // luma weights of the matrix
  double y_offset = 0, y_scale = 1, c_offset = 0, c_scale = 1;  // E'y = (Y - y_offset) / y_scale, ...
  double unshift = 1;  // a 16-bit copy's n-bit values are shifted left by 16 - n: this undoes it
  int log2_chroma_w = 0, log2_chroma_h = 0;
  ChromaSiting siting;
  int64_t height = 0, width = 0;  // the RGB frame's
};

// Writes the RGB frame of `yuv` into `out` ([3, H, W] float32 where the planes are): [-1, 1], not clamped
// (Note [Colour]).
void yuv_to_rgb(const YuvFrame& yuv, torch::Tensor& out);
// The RGB frame of `yuv` on `device` ([3, H, W] float32), its planes taken there by `upload`.
torch::Tensor yuv_to_rgb(const YuvFrame& yuv, torch::Device device,
                         const std::function<torch::Tensor(const torch::Tensor&)>& upload);

// Decoded frames -> RGB tensors [3, H, W], float32, [-1, 1] (beyond it where Y'CbCr is out of gamut:
// Note [Colour]), at a fixed output size (a frame of another size, as in a stream that changes resolution, is
// scaled to it). Each frame is converted with its own matrix, range and chroma location.
class FrameToTensor {
 public:
  FrameToTensor(int width, int height) : width_(width), height_(height) {}
  // Fills `out` (a contiguous float32 CPU tensor [3, H, W], e.g. pinned) from `frame`.
  void convert(const AVFrame* frame, torch::Tensor& out);
  // An 8-bit Y'CbCr frame of the output's size in a layout read in place: its planes copied (into pinned
  // memory with `pinned`) and what converting them takes (Note [Colour conversion of the input on the GPU]);
  // nullopt for any other frame.
  std::optional<YuvFrame> planes(const AVFrame* frame, bool pinned) const;

 private:
  int width_, height_;
  AVPixelFormat format_ = AV_PIX_FMT_NONE;  // source format and size the context was made for
  int source_width_ = 0, source_height_ = 0;
  SwsContextPtr sws_;  // null when the frame is read in place
  FramePtr planar_;    // planar YUV (16-bit) or RGB staging frame
};

// RGB tensors [3, H, W] (float, [-1, 1]; Note [Colour] for what lies beyond) -> frames of an encoder's pixel
// format, chroma subsampled for `chroma_location` (Note [Chroma resampling]).
class TensorToFrame {
 public:
  TensorToFrame(AVPixelFormat format, int width, int height, ColourDetails colour,
                AVChromaLocation chroma_location = AVCHROMA_LOC_UNSPECIFIED);
  // Writes `rgb` (CPU, [3, H, W]) into `out`, which must be a writable frame of the format and size above:
  // write_planes(quantize(rgb), out).
  void convert(const torch::Tensor& rgb, AVFrame* out);
  // The colour conversion and chroma subsampling, computed where `rgb` is (CPU or GPU, for a batch of frames
  // at once): rgb [..., 3, H, W] -> the three planes of the written layout as code values [..., h, w]
  // (uint8 for 8-bit, int16 up to 15 bits, int32 beyond). const: safe beside write_planes on another thread.
  std::array<torch::Tensor, 3> quantize(const torch::Tensor& rgb) const;
  // One frame's planes as quantize() makes them, on the CPU, into `out` (a writable frame as above).
  void write_planes(const std::array<torch::Tensor, 3>& planes, AVFrame* out);
  // Bits of each sample quantize() writes.
  int bits() const { return planar_bits(); }

 private:
  AVPixelFormat format_;
  int width_, height_;
  ColourDetails colour_;
  AVChromaLocation chroma_location_;
  int planar_bits() const;       // storage bits per sample of the layout quantize() writes
  int log2_w_ = 0, log2_h_ = 0;  // chroma subsampling done here (Note [Chroma resampling])
  SwsContextPtr sws_;            // planar staging -> format_; null when format_ is written in place
  FramePtr planar_;              // planar YUV / GBRP staging frame at the output's bit depth
};

}  // namespace vaecodec::io
