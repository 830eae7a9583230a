#include "io/colour.h"

#include <cmath>
#include <optional>

extern "C" {
#include <libavutil/avconfig.h>
}

#include "core/error.h"
#include "core/rgb_codes.h"
#include "io/chroma.h"

namespace vaecodec::io {
namespace {

// What swscale still resamples (Note [Colour]): a frame of another size than the stream's first, and chroma
// subsampled by more than 2 (4:1:1, 4:1:0). Chroma is upsampled bicubically and downsampled by area
// averaging.
constexpr int kUpsample = SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT;
constexpr int kDownsample = SWS_AREA | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INP;

// Luma weights Kr, Kb of a matrix (Kg = 1 - Kr - Kb); nullopt for the ones vaecodec does not convert.
std::optional<std::pair<double, double>> luma_weights(AVColorSpace matrix) {
  switch (matrix) {
    case AVCOL_SPC_BT709:
      return std::make_pair(0.2126, 0.0722);
    case AVCOL_SPC_FCC:
      return std::make_pair(0.30, 0.11);
    case AVCOL_SPC_BT470BG:
    case AVCOL_SPC_SMPTE170M:
      return std::make_pair(0.299, 0.114);
    case AVCOL_SPC_SMPTE240M:
      return std::make_pair(0.212, 0.087);
    case AVCOL_SPC_BT2020_NCL:
    case AVCOL_SPC_BT2020_CL:
      return std::make_pair(0.2627, 0.0593);
    default:
      return std::nullopt;
  }
}

// Code values of n-bit samples: E'y = (Y - y_offset) / y_scale, E'c = (C - c_offset) / c_scale.
struct Levels {
  double y_offset, y_scale, c_offset, c_scale, max;
};

Levels levels(int bits, bool full) {
  const double max = std::ldexp(1.0, bits) - 1.0;
  if (full) return {0.0, max, std::ldexp(1.0, bits - 1), max, max};
  const double unit = std::ldexp(1.0, bits - 8);
  return {16.0 * unit, 219.0 * unit, 128.0 * unit, 224.0 * unit, max};
}

int depth_of(AVPixelFormat format) {
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(format);
  return desc ? desc->comp[0].depth : 8;
}

// The bit depths with planar 4:4:4 formats: 8, 9, 10, 12, 14, 16.
int storage_depth(int bits) {
  for (int d : {8, 9, 10, 12, 14})
    if (bits <= d) return d;
  return 16;
}

AVPixelFormat planar_rgb(int bits) {
  switch (storage_depth(bits)) {
    case 8:
      return AV_PIX_FMT_GBRP;
    case 9:
      return AV_PIX_FMT_GBRP9;
    case 10:
      return AV_PIX_FMT_GBRP10;
    case 12:
      return AV_PIX_FMT_GBRP12;
    case 14:
      return AV_PIX_FMT_GBRP14;
    default:
      return AV_PIX_FMT_GBRP16;
  }
}

AVPixelFormat planar_yuv(int bits) {
  switch (storage_depth(bits)) {
    case 8:
      return AV_PIX_FMT_YUV444P;
    case 9:
      return AV_PIX_FMT_YUV444P9;
    case 10:
      return AV_PIX_FMT_YUV444P10;
    case 12:
      return AV_PIX_FMT_YUV444P12;
    case 14:
      return AV_PIX_FMT_YUV444P14;
    default:
      return AV_PIX_FMT_YUV444P16;
  }
}

// RGB and palette formats carry R'G'B' directly (full range, no matrix).
bool carries_rgb(AVPixelFormat format) {
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(format);
  return desc && (desc->flags & (AV_PIX_FMT_FLAG_RGB | AV_PIX_FMT_FLAG_PAL));
}

FramePtr make_planar(AVPixelFormat format, int width, int height) {
  FramePtr frame = make_frame();
  frame->format = format;
  frame->width = width;
  frame->height = height;
  check_av(av_frame_get_buffer(frame.get(), 0), "cannot allocate a conversion frame for",
           pixel_format_name(format));
  return frame;
}

SwsContextPtr make_sws(int src_w, int src_h, AVPixelFormat src, int dst_w, int dst_h, AVPixelFormat dst,
                       int flags) {
  SwsContextPtr sws(sws_getContext(src_w, src_h, without_jpeg_range(src), dst_w, dst_h,
                                   without_jpeg_range(dst), flags, nullptr, nullptr, nullptr));
  if (!sws)
    throw Error("swscale cannot convert " + pixel_format_name(src) + " " + std::to_string(src_w) + "x" +
                std::to_string(src_h) + " to " + pixel_format_name(dst));
  // Same range flag on both sides: swscale moves samples and never converts the range (Note [Colour]).
  const int* coefficients = sws_getCoefficients(SWS_CS_DEFAULT);
  sws_setColorspaceDetails(sws.get(), coefficients, 0, coefficients, 0, /*brightness=*/0,
                           /*contrast=*/1 << 16,
                           /*saturation=*/1 << 16);
  return sws;
}

// Plane `plane` of a planar frame as a [H, W] tensor over its memory (uint8 up to 8 bits, uint16 above);
// chroma planes of a subsampled format with their own size.
torch::Tensor plane_view(const AVFrame* frame, int plane) {
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(static_cast<AVPixelFormat>(frame->format));
  const bool wide = desc->comp[0].depth > 8;
  const bool chroma = plane == 1 || plane == 2;
  const int64_t height = chroma ? AV_CEIL_RSHIFT(frame->height, desc->log2_chroma_h) : frame->height;
  const int64_t width = chroma ? AV_CEIL_RSHIFT(frame->width, desc->log2_chroma_w) : frame->width;
  return torch::from_blob(frame->data[plane], {height, width}, {frame->linesize[plane] / (wide ? 2 : 1), 1},
                          wide ? torch::kUInt16 : torch::kUInt8);
}

// Planar Y'CbCr with one sample per element in planes 0, 1, 2, in this machine's byte order, chroma
// subsampled by at most 2: the layouts read and written in place (yuv420p, yuvj422p, yuv444p10le, yuva420p,
// ...).
bool in_place_yuv(const AVPixFmtDescriptor* desc) {
  constexpr uint64_t kOther = AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_BITSTREAM | AV_PIX_FMT_FLAG_HWACCEL |
                              AV_PIX_FMT_FLAG_RGB | AV_PIX_FMT_FLAG_FLOAT | AV_PIX_FMT_FLAG_BAYER;
  if (!desc || !(desc->flags & AV_PIX_FMT_FLAG_PLANAR) || (desc->flags & kOther) || desc->nb_components < 3)
    return false;
  if (desc->log2_chroma_w > 1 || desc->log2_chroma_h > 1) return false;
  const int depth = desc->comp[0].depth;
  const bool big_endian = (desc->flags & AV_PIX_FMT_FLAG_BE) != 0;
  if (depth > 8 && big_endian != (AV_HAVE_BIGENDIAN != 0)) return false;
  for (int i = 0; i < 3; ++i) {
    const AVComponentDescriptor& c = desc->comp[i];
    if (c.plane != i || c.step != (depth > 8 ? 2 : 1) || c.offset != 0 || c.shift != 0 || c.depth != depth)
      return false;
  }
  return true;
}

// The in-place layout (without alpha, not yuvj) of `bits` bits and the given subsampling; NONE if there is
// none (16-bit 4:4:0, say).
AVPixelFormat in_place_yuv_format(int bits, int log2_w, int log2_h) {
  for (const AVPixFmtDescriptor* d = av_pix_fmt_desc_next(nullptr); d; d = av_pix_fmt_desc_next(d)) {
    const AVPixelFormat id = av_pix_fmt_desc_get_id(d);
    if (in_place_yuv(d) && d->nb_components == 3 && d->comp[0].depth == bits && d->log2_chroma_w == log2_w &&
        d->log2_chroma_h == log2_h && without_jpeg_range(id) == id)
      return id;
  }
  return AV_PIX_FMT_NONE;
}

// GBR planar formats store G, B, R in planes 0, 1, 2; tensors are R, G, B.
constexpr int kGbrPlane[3] = {2, 0, 1};

template <typename E>
E from_name(const std::string& name, int (*parse)(const char*), E fallback) {
  if (name.empty()) return fallback;
  const int value = parse(name.c_str());
  return value < 0 ? fallback : static_cast<E>(value);
}

std::string name_or_unknown(const char* name) {
  return name ? name : "unknown";
}

}  // namespace

ColourTags colour_tags_of(const AVFrame* frame) {
  return {frame->color_primaries, frame->color_trc, frame->colorspace, frame->color_range};
}

std::string colour_tags_string(const ColourTags& tags) {
  return "matrix " + name_or_unknown(av_color_space_name(tags.matrix)) + ", range " +
         name_or_unknown(av_color_range_name(tags.range)) + ", primaries " +
         name_or_unknown(av_color_primaries_name(tags.primaries)) + ", transfer " +
         name_or_unknown(av_color_transfer_name(tags.transfer));
}

ColourTags colour_tags_from_names(const std::string& primaries, const std::string& transfer,
                                  const std::string& matrix, const std::string& range) {
  ColourTags tags;
  tags.primaries = from_name(primaries, av_color_primaries_from_name, AVCOL_PRI_UNSPECIFIED);
  tags.transfer = from_name(transfer, av_color_transfer_from_name, AVCOL_TRC_UNSPECIFIED);
  tags.matrix = from_name(matrix, av_color_space_from_name, AVCOL_SPC_UNSPECIFIED);
  tags.range = from_name(range, av_color_range_from_name, AVCOL_RANGE_UNSPECIFIED);
  return tags;
}

AVPixelFormat without_jpeg_range(AVPixelFormat format) {
  switch (format) {
    case AV_PIX_FMT_YUVJ420P:
      return AV_PIX_FMT_YUV420P;
    case AV_PIX_FMT_YUVJ422P:
      return AV_PIX_FMT_YUV422P;
    case AV_PIX_FMT_YUVJ444P:
      return AV_PIX_FMT_YUV444P;
    case AV_PIX_FMT_YUVJ440P:
      return AV_PIX_FMT_YUV440P;
    case AV_PIX_FMT_YUVJ411P:
      return AV_PIX_FMT_YUV411P;
    default:
      return format;
  }
}

namespace {
// The 8-bit Y'CbCr layouts read in place, whose frames the reader hands on as their planes (FrameToTensor::
// planes); null for any other.
const AVPixFmtDescriptor* eight_bit_planes(AVPixelFormat format) {
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(format);
  if (!desc || carries_rgb(format) || desc->comp[0].depth != 8 || !in_place_yuv(desc)) return nullptr;
  return desc;
}
}  // namespace

double plane_bytes_per_pixel(AVPixelFormat format) {
  const AVPixFmtDescriptor* desc = eight_bit_planes(format);
  if (!desc) return 0;
  return 1.0 + 2.0 / static_cast<double>(1 << (desc->log2_chroma_w + desc->log2_chroma_h));
}

bool is_rgb_format(AVPixelFormat format) {
  return carries_rgb(format);
}

ColourDetails resolve_colour(AVPixelFormat format, const ColourTags& tags, int width, int height) {
  ColourDetails details;
  if (luma_weights(tags.matrix))
    details.matrix = tags.matrix;
  else
    details.matrix = (width >= 1280 || height >= 720) ? AVCOL_SPC_BT709 : AVCOL_SPC_SMPTE170M;
  if (carries_rgb(format) || without_jpeg_range(format) != format)
    details.range = AVCOL_RANGE_JPEG;
  else if (tags.range == AVCOL_RANGE_JPEG || tags.range == AVCOL_RANGE_MPEG)
    details.range = tags.range;
  else
    details.range = AVCOL_RANGE_MPEG;
  return details;
}

namespace {

// What converting `frame`'s Y'CbCr to RGB takes, its samples read from `planes` (the frame itself, or its
// 16-bit planar copy, whose layout then gives the chroma subsampling).
YuvFrame describe_yuv(const AVFrame* frame, const AVFrame* planes, double unshift, int64_t height,
                      int64_t width) {
  const auto format = static_cast<AVPixelFormat>(frame->format);
  const int bits = av_pix_fmt_desc_get(format)->comp[0].depth;
  const ColourDetails colour = resolve_colour(format, colour_tags_of(frame), frame->width, frame->height);
  const auto [kr, kb] = *luma_weights(colour.matrix);
  const Levels l = levels(bits, colour.range == AVCOL_RANGE_JPEG);
  const AVPixFmtDescriptor* layout = av_pix_fmt_desc_get(static_cast<AVPixelFormat>(planes->format));
  YuvFrame yuv{.planes = {},
               .kr = kr,
               .kb = kb,
               .y_offset = l.y_offset,
               .y_scale = l.y_scale,
               .c_offset = l.c_offset,
               .c_scale = l.c_scale,
               .unshift = unshift,
               .log2_chroma_w = layout->log2_chroma_w,
               .log2_chroma_h = layout->log2_chroma_h,
               .siting = chroma_siting(frame->chroma_location),
               .height = height,
               .width = width};
  return yuv;
}

}  // namespace

void FrameToTensor::convert(const AVFrame* frame, torch::Tensor& out) {
  const auto format = static_cast<AVPixelFormat>(frame->format);
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(format);
  if (!desc) throw Error("frame of unknown pixel format " + std::to_string(frame->format));
  const bool rgb = carries_rgb(format);
  const int bits = desc->comp[0].depth;
  const bool same_size = frame->width == width_ && frame->height == height_;
  // The planes to read: the frame's own where it allows, else a planar copy made by swscale.
  const bool in_place = !rgb && same_size && in_place_yuv(desc);
  if (!in_place &&
      (!sws_ || format != format_ || frame->width != source_width_ || frame->height != source_height_)) {
    AVPixelFormat planar = planar_rgb(bits);
    if (!rgb) {
      const bool ours = same_size && desc->log2_chroma_w <= 1 && desc->log2_chroma_h <= 1;
      planar = ours ? in_place_yuv_format(16, desc->log2_chroma_w, desc->log2_chroma_h) : AV_PIX_FMT_NONE;
      if (planar == AV_PIX_FMT_NONE) planar = AV_PIX_FMT_YUV444P16;
    }
    sws_ = make_sws(frame->width, frame->height, format, width_, height_, planar, kUpsample);
    planar_ = make_planar(planar, width_, height_);
    format_ = format;
    source_width_ = frame->width;
    source_height_ = frame->height;
  }
  if (!in_place)
    sws_scale(sws_.get(), frame->data, frame->linesize, 0, frame->height, planar_->data, planar_->linesize);

  if (rgb) {
    const double max = std::ldexp(1.0, storage_depth(bits)) - 1.0;
    for (int c = 0; c < 3; ++c) out[c].copy_(plane_view(planar_.get(), kGbrPlane[c]));
    out.mul_(2.0 / max).sub_(1.0);
    return;
  }
  // A 16-bit copy holds the source's n-bit code values shifted left by 16 - n.
  const AVFrame* planes = in_place ? frame : planar_.get();
  YuvFrame yuv = describe_yuv(frame, planes, in_place ? 1.0 : std::ldexp(1.0, bits - 16), height_, width_);
  for (int p = 0; p < 3; ++p) yuv.planes[p] = plane_view(planes, p);
  yuv_to_rgb(yuv, out);
}

std::optional<YuvFrame> FrameToTensor::planes(const AVFrame* frame, bool pinned) const {
  if (!eight_bit_planes(static_cast<AVPixelFormat>(frame->format)) || frame->width != width_ ||
      frame->height != height_)
    return std::nullopt;
  YuvFrame yuv = describe_yuv(frame, frame, 1.0, height_, width_);
  for (int p = 0; p < 3; ++p) {
    const torch::Tensor view = plane_view(frame, p);
    yuv.planes[p] = torch::empty(view.sizes(), torch::TensorOptions(torch::kUInt8).pinned_memory(pinned));
    yuv.planes[p].copy_(view);
  }
  return yuv;
}

void yuv_to_rgb(const YuvFrame& yuv, torch::Tensor& out) {
  auto component = [&](int plane, double offset, double scale) {
    return yuv.planes[plane].to(torch::kFloat).mul_(yuv.unshift / scale).sub_(offset / scale);
  };
  const torch::Tensor y = component(0, yuv.y_offset, yuv.y_scale);
  torch::Tensor chroma =
      torch::stack({component(1, yuv.c_offset, yuv.c_scale), component(2, yuv.c_offset, yuv.c_scale)});
  if (yuv.log2_chroma_w || yuv.log2_chroma_h)
    chroma = upsample_chroma(chroma, yuv.height, yuv.width, yuv.log2_chroma_w, yuv.log2_chroma_h, yuv.siting);
  const double kr = yuv.kr, kb = yuv.kb;
  const torch::Tensor pb = chroma[0], pr = chroma[1];
  torch::Tensor r = out[0], g = out[1], b = out[2];
  torch::add_out(r, y, pr, 2.0 * (1.0 - kr));
  torch::add_out(b, y, pb, 2.0 * (1.0 - kb));
  g.copy_((y - kr * r - kb * b) / (1.0 - kr - kb));
  out.mul_(2.0).sub_(1.0);  // not clamped (Note [Colour])
}

torch::Tensor yuv_to_rgb(const YuvFrame& yuv, torch::Device device,
                         const std::function<torch::Tensor(const torch::Tensor&)>& upload) {
  YuvFrame there = yuv;
  for (torch::Tensor& plane : there.planes) plane = upload(plane);
  torch::Tensor rgb =
      torch::empty({3, there.height, there.width}, torch::TensorOptions(torch::kFloat).device(device));
  yuv_to_rgb(there, rgb);
  return rgb;
}

TensorToFrame::TensorToFrame(AVPixelFormat format, int width, int height, ColourDetails colour,
                             AVChromaLocation chroma_location)
    : format_(format), width_(width), height_(height), colour_(colour), chroma_location_(chroma_location) {
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(format);
  if (!desc) throw Error("unknown output pixel format " + std::to_string(format));
  const int bits = desc->comp[0].depth;
  AVPixelFormat planar = planar_rgb(bits);
  if (!carries_rgb(format)) {
    const bool ours = desc->nb_components >= 3 && desc->log2_chroma_w <= 1 && desc->log2_chroma_h <= 1;
    planar = ours ? in_place_yuv_format(storage_depth(bits), desc->log2_chroma_w, desc->log2_chroma_h)
                  : AV_PIX_FMT_NONE;
    if (planar == AV_PIX_FMT_NONE) planar = planar_yuv(bits);
    if (in_place_yuv(desc)) planar = format;
    const AVPixFmtDescriptor* layout = av_pix_fmt_desc_get(planar);
    log2_w_ = layout->log2_chroma_w;
    log2_h_ = layout->log2_chroma_h;
  }
  if (planar != format) {
    sws_ = make_sws(width, height, planar, width, height, format, kDownsample);
    planar_ = make_planar(planar, width, height);
  }
}

int TensorToFrame::planar_bits() const {
  const AVFrame* planar = planar_ ? planar_.get() : nullptr;
  return storage_depth(depth_of(planar ? static_cast<AVPixelFormat>(planar->format) : format_));
}

std::array<torch::Tensor, 3> TensorToFrame::quantize(const torch::Tensor& rgb) const {
  TORCH_CHECK(rgb.dim() >= 3 && rgb.size(-3) == 3 && rgb.size(-2) == height_ && rgb.size(-1) == width_,
              "TensorToFrame: expected [..., 3, ", height_, ", ", width_, "], got ", rgb.sizes());
  const int bits = planar_bits();
  // Code values fit uint8 at 8 bits, int16 up to 15, int32 beyond (uint16 has few kernels on the GPU).
  const auto type = bits <= 8 ? torch::kUInt8 : bits <= 15 ? torch::kInt16 : torch::kInt32;
  const torch::Tensor x = core::unit_rgb(rgb);  // [0, 1] inside the gamut
  std::array<torch::Tensor, 3> planes;
  if (carries_rgb(format_)) {
    const double max = std::ldexp(1.0, bits) - 1.0;
    for (int c = 0; c < 3; ++c) planes[kGbrPlane[c]] = core::rgb_codes(x.select(-3, c), max, type);
    return planes;
  }
  const auto [kr, kb] = *luma_weights(colour_.matrix);
  const Levels l = levels(bits, colour_.range == AVCOL_RANGE_JPEG);
  const torch::Tensor r = x.select(-3, 0), g = x.select(-3, 1), b = x.select(-3, 2);
  const torch::Tensor y = r * kr + g * (1.0 - kr - kb) + b * kb;
  torch::Tensor chroma = torch::stack({(b - y) / (2.0 * (1.0 - kb)), (r - y) / (2.0 * (1.0 - kr))}, -3);
  if (log2_w_ || log2_h_)
    chroma = downsample_chroma(chroma, log2_w_, log2_h_, chroma_siting(chroma_location_));
  auto code = [&](const torch::Tensor& e, double offset, double scale) {
    return e.mul(scale).add_(offset).round_().clamp_(0.0, l.max).to(type);
  };
  planes[0] = code(y, l.y_offset, l.y_scale);
  planes[1] = code(chroma.select(-3, 0), l.c_offset, l.c_scale);
  planes[2] = code(chroma.select(-3, 1), l.c_offset, l.c_scale);
  return planes;
}

void TensorToFrame::write_planes(const std::array<torch::Tensor, 3>& planes, AVFrame* out) {
  AVFrame* planar = planar_ ? planar_.get() : out;
  for (int p = 0; p < 3; ++p) {
    torch::Tensor view = plane_view(planar, p);
    TORCH_CHECK(planes[p].sizes() == view.sizes(), "TensorToFrame: plane ", p, " is ", planes[p].sizes(),
                ", the frame's ", view.sizes());
    view.copy_(planes[p]);
  }
  if (planar_) sws_scale(sws_.get(), planar_->data, planar_->linesize, 0, height_, out->data, out->linesize);
}

void TensorToFrame::convert(const torch::Tensor& rgb, AVFrame* out) {
  TORCH_CHECK(rgb.dim() == 3, "TensorToFrame: expected one frame [3, H, W], got ", rgb.sizes());
  write_planes(quantize(rgb), out);
}

}  // namespace vaecodec::io
