#include "io/colour.h"

#include "core/error.h"

namespace vaecodec::io {
namespace {

// swscale's flags for every conversion (Note [Colour]): no resampling of luma happens, so the filter only
// matters for chroma planes; accurate rounding and full chroma both ways keep the round trip close to exact.
constexpr int kSwsFlags = SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT | SWS_FULL_CHR_H_INP;

// The matrices swscale knows, as its SWS_CS_* index; -1 for the rest.
int sws_matrix(AVColorSpace matrix) {
  switch (matrix) {
    case AVCOL_SPC_BT709: return SWS_CS_ITU709;
    case AVCOL_SPC_FCC: return SWS_CS_FCC;
    case AVCOL_SPC_BT470BG:
    case AVCOL_SPC_SMPTE170M: return SWS_CS_SMPTE170M;
    case AVCOL_SPC_SMPTE240M: return SWS_CS_SMPTE240M;
    case AVCOL_SPC_BT2020_NCL:
    case AVCOL_SPC_BT2020_CL: return SWS_CS_BT2020;
    default: return -1;
  }
}

void set_details(SwsContext* sws, AVColorSpace matrix, bool src_full, bool dst_full, const char* what) {
  const int* coefficients = sws_getCoefficients(sws_matrix(matrix));
  if (sws_setColorspaceDetails(sws, coefficients, src_full ? 1 : 0, coefficients, dst_full ? 1 : 0,
                               /*brightness=*/0, /*contrast=*/1 << 16, /*saturation=*/1 << 16) < 0)
    throw Error(std::string("swscale cannot set colour details for ") + what + " (matrix " +
                av_color_space_name(matrix) + ")");
}

FramePtr make_gbrp16(int width, int height) {
  FramePtr frame = make_frame();
  frame->format = AV_PIX_FMT_GBRP16;
  frame->width = width;
  frame->height = height;
  check_av(av_frame_get_buffer(frame.get(), 0), "cannot allocate a conversion frame for", "GBRP16");
  return frame;
}

// GBRP16 stores G, B, R in planes 0, 1, 2; tensors are R, G, B.
constexpr int kPlaneOfChannel[3] = {2, 0, 1};

torch::Tensor plane_view(AVFrame* frame, int channel) {
  const int plane = kPlaneOfChannel[channel];
  return torch::from_blob(frame->data[plane], {frame->height, frame->width}, {frame->linesize[plane] / 2, 1},
                          torch::kUInt16);
}

template <typename E>
E from_name(const std::string& name, int (*parse)(const char*), E fallback) {
  if (name.empty()) return fallback;
  const int value = parse(name.c_str());
  return value < 0 ? fallback : static_cast<E>(value);
}

std::string name_or_unknown(const char* name) { return name ? name : "unknown"; }

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
    case AV_PIX_FMT_YUVJ420P: return AV_PIX_FMT_YUV420P;
    case AV_PIX_FMT_YUVJ422P: return AV_PIX_FMT_YUV422P;
    case AV_PIX_FMT_YUVJ444P: return AV_PIX_FMT_YUV444P;
    case AV_PIX_FMT_YUVJ440P: return AV_PIX_FMT_YUV440P;
    case AV_PIX_FMT_YUVJ411P: return AV_PIX_FMT_YUV411P;
    default: return format;
  }
}

bool is_rgb_format(AVPixelFormat format) {
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(format);
  return desc && (desc->flags & AV_PIX_FMT_FLAG_RGB);
}

ColourDetails resolve_colour(AVPixelFormat format, const ColourTags& tags, int width, int height) {
  ColourDetails details;
  if (sws_matrix(tags.matrix) >= 0)
    details.matrix = tags.matrix;
  else
    details.matrix = (width >= 1280 || height >= 720) ? AVCOL_SPC_BT709 : AVCOL_SPC_SMPTE170M;
  if (is_rgb_format(format) || without_jpeg_range(format) != format)
    details.range = AVCOL_RANGE_JPEG;
  else if (tags.range == AVCOL_RANGE_JPEG || tags.range == AVCOL_RANGE_MPEG)
    details.range = tags.range;
  else
    details.range = AVCOL_RANGE_MPEG;
  return details;
}

void FrameToTensor::convert(const AVFrame* frame, torch::Tensor& out) {
  const auto format = static_cast<AVPixelFormat>(frame->format);
  const Key key{format, frame->width, frame->height,
                resolve_colour(format, colour_tags_of(frame), frame->width, frame->height)};
  if (!sws_ || !(key == key_)) {
    sws_.reset(sws_getContext(frame->width, frame->height, without_jpeg_range(format), width_, height_,
                              AV_PIX_FMT_GBRP16, kSwsFlags, nullptr, nullptr, nullptr));
    if (!sws_)
      throw Error("swscale cannot convert " + pixel_format_name(format) + " " + std::to_string(frame->width) +
                  "x" + std::to_string(frame->height) + " to RGB");
    set_details(sws_.get(), key.colour.matrix, key.colour.range == AVCOL_RANGE_JPEG, true,
                pixel_format_name(format).c_str());
    key_ = key;
    if (!rgb_) rgb_ = make_gbrp16(width_, height_);
  }
  sws_scale(sws_.get(), frame->data, frame->linesize, 0, frame->height, rgb_->data, rgb_->linesize);
  for (int c = 0; c < 3; ++c) out.select(0, c).copy_(plane_view(rgb_.get(), c));
  out.mul_(2.0 / 65535.0).sub_(1.0);
}

TensorToFrame::TensorToFrame(AVPixelFormat format, int width, int height, ColourDetails colour)
    : width_(width), height_(height) {
  sws_.reset(sws_getContext(width, height, AV_PIX_FMT_GBRP16, width, height, without_jpeg_range(format),
                            kSwsFlags, nullptr, nullptr, nullptr));
  if (!sws_) throw Error("swscale cannot convert RGB to " + pixel_format_name(format));
  const bool full = is_rgb_format(format) || colour.range == AVCOL_RANGE_JPEG ||
                    without_jpeg_range(format) != format;
  set_details(sws_.get(), colour.matrix, true, full, pixel_format_name(format).c_str());
  rgb_ = make_gbrp16(width, height);
}

void TensorToFrame::convert(const torch::Tensor& rgb, AVFrame* out) {
  TORCH_CHECK(rgb.dim() == 3 && rgb.size(0) == 3 && rgb.size(1) == height_ && rgb.size(2) == width_,
              "TensorToFrame: expected [3, ", height_, ", ", width_, "], got ", rgb.sizes());
  const torch::Tensor levels = rgb.to(torch::kFloat).clamp(-1.0, 1.0).add(1.0).mul_(65535.0 / 2.0).round_();
  for (int c = 0; c < 3; ++c) plane_view(rgb_.get(), c).copy_(levels.select(0, c));
  sws_scale(sws_.get(), rgb_->data, rgb_->linesize, 0, height_, out->data, out->linesize);
}

}  // namespace vaecodec::io
