#include "io/quality_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/atomic_file.h"
#include "core/error.h"
#include "io/ffmpeg_common.h"

namespace vaecodec::io {
namespace {

struct Colour {
  uint8_t r, g, b;
};
constexpr Colour kBackground{255, 255, 255};
constexpr Colour kFrame{120, 120, 120};
constexpr Colour kMean{205, 205, 205};
constexpr Colour kWorst{220, 40, 40};
constexpr Colour kPsnr{31, 90, 180};
constexpr Colour kSsim{230, 120, 20};

// An RGB24 image, row by row.
class Canvas {
 public:
  Canvas(int width, int height) : width_(width), height_(height), pixels_(size_t(width) * height * 3) {
    for (int y = 0; y < height; ++y)
      for (int x = 0; x < width; ++x) set(x, y, kBackground);
  }
  int width() const { return width_; }
  int height() const { return height_; }
  const uint8_t* row(int y) const { return pixels_.data() + size_t(y) * width_ * 3; }

  void set(int x, int y, Colour c) {
    if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
    uint8_t* p = pixels_.data() + (size_t(y) * width_ + x) * 3;
    p[0] = c.r;
    p[1] = c.g;
    p[2] = c.b;
  }
  // A line `thickness` pixels wide (a square pen), from Bresenham's steps.
  void line(int x0, int y0, int x1, int y1, Colour c, int thickness = 1) {
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int error = dx + dy;
    for (;;) {
      for (int i = 0; i < thickness; ++i)
        for (int j = 0; j < thickness; ++j) set(x0 + i - thickness / 2, y0 + j - thickness / 2, c);
      if (x0 == x1 && y0 == y1) break;
      const int e2 = 2 * error;
      if (e2 >= dy) {
        error += dy;
        x0 += sx;
      }
      if (e2 <= dx) {
        error += dx;
        y0 += sy;
      }
    }
  }

 private:
  int width_, height_;
  std::vector<uint8_t> pixels_;
};

struct Panel {
  int left, top, right, bottom;  // inclusive pixel bounds of the plotting area
};

// The range a panel spans: the finite values' minimum and maximum, widened by 5% (and to `least_span` when
// they are all but equal) so that the curve does not run along the border.
std::pair<double, double> value_range(const std::vector<double>& values, double least_span) {
  double low = std::numeric_limits<double>::infinity(), high = -low;
  for (double v : values)
    if (std::isfinite(v)) {
      low = std::min(low, v);
      high = std::max(high, v);
    }
  if (!std::isfinite(low)) return {0, 1};  // no finite value: a flat line at the top
  const double middle = (low + high) / 2;
  const double span = std::max(high - low, least_span) * 1.1;
  return {middle - span / 2, middle + span / 2};
}

void draw_panel(Canvas& canvas, const Panel& panel, const std::vector<double>& values, double low,
                double high, int64_t worst, Colour colour) {
  const auto n = static_cast<int64_t>(values.size());
  auto x_of = [&](int64_t i) {
    if (n == 1) return (panel.left + panel.right) / 2;
    return panel.left + static_cast<int>(std::lround(double(i) * (panel.right - panel.left) / double(n - 1)));
  };
  auto y_of = [&](double v) {
    if (!std::isfinite(v)) return panel.top;  // an infinite PSNR: a perfect frame, at the top
    const double t = (v - low) / (high - low);
    return panel.bottom - static_cast<int>(std::lround(std::clamp(t, 0.0, 1.0) * (panel.bottom - panel.top)));
  };

  double sum = 0;
  int64_t finite = 0;
  for (double v : values)
    if (std::isfinite(v)) {
      sum += v;
      ++finite;
    }
  if (finite > 0) {
    const int mean_y = y_of(sum / double(finite));
    canvas.line(panel.left, mean_y, panel.right, mean_y, kMean);
  }
  if (worst >= 0) canvas.line(x_of(worst), panel.top, x_of(worst), panel.bottom, kWorst);
  canvas.line(panel.left - 1, panel.top - 1, panel.right + 1, panel.top - 1, kFrame);
  canvas.line(panel.left - 1, panel.bottom + 1, panel.right + 1, panel.bottom + 1, kFrame);
  canvas.line(panel.left - 1, panel.top - 1, panel.left - 1, panel.bottom + 1, kFrame);
  canvas.line(panel.right + 1, panel.top - 1, panel.right + 1, panel.bottom + 1, kFrame);
  if (n == 1) {
    canvas.line(panel.left, y_of(values[0]), panel.right, y_of(values[0]), colour, 2);
    return;
  }
  for (int64_t i = 1; i < n; ++i)
    canvas.line(x_of(i - 1), y_of(values[i - 1]), x_of(i), y_of(values[i]), colour, 2);
}

// The canvas as PNG bytes, through libavcodec's PNG encoder.
std::string encode_png(const Canvas& canvas, const std::filesystem::path& path) {
  const AVCodec* codec = avcodec_find_encoder(AV_CODEC_ID_PNG);
  if (!codec) throw Error(path.string() + ": this FFmpeg has no PNG encoder");
  CodecContextPtr context(avcodec_alloc_context3(codec));
  if (!context) throw Error("cannot allocate the PNG encoder");
  context->width = canvas.width();
  context->height = canvas.height();
  context->pix_fmt = AV_PIX_FMT_RGB24;
  context->time_base = AVRational{1, 1};
  check_av(avcodec_open2(context.get(), codec, nullptr), "cannot open the PNG encoder for", path);

  FramePtr frame = make_frame();
  frame->format = AV_PIX_FMT_RGB24;
  frame->width = canvas.width();
  frame->height = canvas.height();
  frame->pts = 0;
  check_av(av_frame_get_buffer(frame.get(), 0), "cannot allocate the image of", path);
  for (int y = 0; y < canvas.height(); ++y)
    std::memcpy(frame->data[0] + size_t(y) * frame->linesize[0], canvas.row(y), size_t(canvas.width()) * 3);

  std::string bytes;
  PacketPtr packet = make_packet();
  auto drain = [&] {
    for (;;) {
      const int code = avcodec_receive_packet(context.get(), packet.get());
      if (code == AVERROR(EAGAIN) || code == AVERROR_EOF) return;
      check_av(code, "the PNG encoder failed on", path);
      bytes.append(reinterpret_cast<const char*>(packet->data), size_t(packet->size));
      av_packet_unref(packet.get());
    }
  };
  check_av(avcodec_send_frame(context.get(), frame.get()), "the PNG encoder refused the image of", path);
  drain();
  check_av(avcodec_send_frame(context.get(), nullptr), "cannot flush the PNG encoder of", path);
  drain();
  if (bytes.empty()) throw Error(path.string() + ": the PNG encoder gave no image");
  return bytes;
}

}  // namespace

QualityPlotRanges write_quality_plot(const std::filesystem::path& path,
                                     const std::vector<FrameQuality>& frames) {
  if (frames.empty()) throw Error(path.string() + ": no frames to plot");
  std::vector<double> psnr, ssim;
  int64_t worst_psnr = 0, worst_ssim = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    psnr.push_back(frames[i].psnr);
    ssim.push_back(frames[i].ssim);
    if (frames[i].psnr < psnr[size_t(worst_psnr)]) worst_psnr = int64_t(i);
    if (frames[i].ssim < ssim[size_t(worst_ssim)]) worst_ssim = int64_t(i);
  }
  QualityPlotRanges ranges;
  std::tie(ranges.psnr_low, ranges.psnr_high) = value_range(psnr, /*least_span=*/1.0);
  std::tie(ranges.ssim_low, ranges.ssim_high) = value_range(ssim, /*least_span=*/0.01);

  Canvas canvas(kQualityPlotWidth, kQualityPlotHeight);
  constexpr int kMargin = 24, kGap = 36;
  const int panel_height = (kQualityPlotHeight - 2 * kMargin - kGap) / 2;
  const Panel top{kMargin, kMargin, kQualityPlotWidth - kMargin, kMargin + panel_height};
  const Panel bottom{kMargin, top.bottom + kGap, kQualityPlotWidth - kMargin,
                     top.bottom + kGap + panel_height};
  const bool all_perfect = std::none_of(psnr.begin(), psnr.end(), [](double v) { return std::isfinite(v); });
  draw_panel(canvas, top, psnr, ranges.psnr_low, ranges.psnr_high, all_perfect ? -1 : worst_psnr, kPsnr);
  draw_panel(canvas, bottom, ssim, ranges.ssim_low, ranges.ssim_high, worst_ssim, kSsim);
  core::write_file_atomically(path, encode_png(canvas, path));
  return ranges;
}

}  // namespace vaecodec::io
