#include "io/quality_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/atomic_file.h"
#include "core/error.h"
#include "io/figure.h"

namespace vaecodec::io {
namespace {

using Anchor = Figure::Anchor;

constexpr Rgb kText{30, 30, 30};
constexpr Rgb kFrame{120, 120, 120};
constexpr Rgb kGrid{232, 232, 232};
constexpr Rgb kMean{150, 150, 150};
constexpr Rgb kWorst{210, 30, 30};
constexpr Rgb kPsnr{31, 90, 180};
constexpr Rgb kSsim{215, 105, 10};

struct Panel {
  double left, top, right, bottom;  // the plotting area
};

std::string fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

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

// Frame numbers to label: 0, the last, and round steps between (at most about 10 labels).
std::vector<int64_t> frame_ticks(int64_t frames) {
  std::vector<int64_t> ticks;
  if (frames <= 1) return {0};
  int64_t step = 1;
  for (const int64_t base : {1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000}) {
    step = base;
    if ((frames - 1) / base <= 9) break;
  }
  while ((frames - 1) / step > 9) step *= 10;
  for (int64_t f = 0; f < frames - 1; f += step)
    if (frames - 1 - f >= step / 2 || f == 0) ticks.push_back(f);
  ticks.push_back(frames - 1);
  return ticks;
}

struct Series {
  const char* name;  // "PSNR (dB)" or "SSIM"
  const char* unit;  // " dB" or ""
  int digits;
  Rgb colour;
  std::vector<double> values;
  double low, high;
};

void draw_panel(Figure& figure, const Panel& p, const Series& s) {
  const auto n = static_cast<int64_t>(s.values.size());
  auto x_of = [&](int64_t i) {
    return n == 1 ? (p.left + p.right) / 2 : p.left + double(i) * (p.right - p.left) / double(n - 1);
  };
  auto y_of = [&](double v) {
    if (!std::isfinite(v)) return p.top;  // an infinite PSNR: a perfect frame, at the top
    return p.bottom - std::clamp((v - s.low) / (s.high - s.low), 0.0, 1.0) * (p.bottom - p.top);
  };
  // Value ticks and grid lines: five, bottom to top.
  for (int k = 0; k <= 4; ++k) {
    const double v = s.low + (s.high - s.low) * k / 4.0;
    const double y = y_of(v);
    if (k > 0 && k < 4) figure.lines.push_back({p.left, y, p.right, y, kGrid, 1});
    figure.lines.push_back({p.left - 6, y, p.left, y, kFrame, 1});
    figure.texts.push_back({p.left - 10, y - 9, fixed(v, s.digits), 17, kText, Anchor::kEnd});
  }
  for (const int64_t f : frame_ticks(n)) {
    const double x = x_of(f);
    figure.lines.push_back({x, p.bottom, x, p.bottom + 6, kFrame, 1});
    figure.texts.push_back({x, p.bottom + 10, std::to_string(f), 17, kText, Anchor::kMiddle});
  }
  // The frame around the area.
  figure.lines.push_back({p.left, p.top, p.right, p.top, kFrame, 1});
  figure.lines.push_back({p.left, p.bottom, p.right, p.bottom, kFrame, 1});
  figure.lines.push_back({p.left, p.top, p.left, p.bottom, kFrame, 1});
  figure.lines.push_back({p.right, p.top, p.right, p.bottom, kFrame, 1});

  double sum = 0;
  int64_t finite = 0, worst = -1;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(s.values[size_t(i)])) {
      sum += s.values[size_t(i)];
      ++finite;
      if (worst < 0 || s.values[size_t(i)] < s.values[size_t(worst)]) worst = i;
    }
  std::string header = s.name;
  if (finite == 0) {
    header += "   every frame equals the reference (infinite PSNR)";
  } else {
    const double mean = sum / double(finite);
    const double y = y_of(mean);
    figure.lines.push_back({p.left, y, p.right, y, kMean, 2});
    figure.texts.push_back({p.right - 6, y - 24, "mean", 17, kMean, Anchor::kEnd});
    figure.lines.push_back({x_of(worst), p.top, x_of(worst), p.bottom, kWorst, 1});
    header += "   mean " + fixed(mean, s.digits) + s.unit +
              (finite < n ? " (of the " + std::to_string(finite) + " frames not identical)" : std::string()) +
              "   worst frame " + std::to_string(worst) + ": " + fixed(s.values[size_t(worst)], s.digits) +
              s.unit;
  }
  figure.texts.push_back({p.left, p.top - 34, header, 22, s.colour, Anchor::kStart});
  for (int64_t i = 0; i < n; ++i) {
    const double x0 = x_of(std::max<int64_t>(i - 1, 0)), x1 = x_of(i);
    if (n == 1) {
      figure.lines.push_back({p.left, y_of(s.values[0]), p.right, y_of(s.values[0]), s.colour, 3});
    } else if (i > 0) {
      figure.lines.push_back({x0, y_of(s.values[size_t(i - 1)]), x1, y_of(s.values[size_t(i)]), s.colour, 3});
    }
  }
}

}  // namespace

bool is_quality_plot_path(const std::filesystem::path& path) {
  return path.extension() == ".png" || path.extension() == ".svg";
}

QualityPlotRanges write_quality_plot(const std::filesystem::path& path,
                                     const std::vector<FrameQuality>& frames, const std::string& reference,
                                     const std::string& distorted) {
  if (frames.empty()) throw Error(path.string() + ": no frames to plot");
  Series psnr{"PSNR (dB)", " dB", 2, kPsnr, {}, 0, 0};
  Series ssim{"SSIM", "", 4, kSsim, {}, 0, 0};
  for (const FrameQuality& f : frames) {
    psnr.values.push_back(f.psnr);
    ssim.values.push_back(f.ssim);
  }
  std::tie(psnr.low, psnr.high) = value_range(psnr.values, /*least_span=*/1.0);
  std::tie(ssim.low, ssim.high) = value_range(ssim.values, /*least_span=*/0.01);

  Figure figure;
  figure.width = kQualityPlotWidth;
  figure.height = kQualityPlotHeight;
  figure.texts.push_back(
      {kQualityPlotWidth / 2.0, 14,
       distorted + " against " + reference + ", " + std::to_string(frames.size()) + " frames", 26, kText,
       Anchor::kMiddle});
  const Panel top{110, 120, kQualityPlotWidth - 50.0, 340};
  const Panel bottom{110, 440, kQualityPlotWidth - 50.0, 660};
  draw_panel(figure, top, psnr);
  draw_panel(figure, bottom, ssim);
  figure.texts.push_back({(top.left + top.right) / 2, 694, "frame", 18, kText, Anchor::kMiddle});

  const std::string bytes = path.extension() == ".svg" ? figure_svg(figure) : figure_png(figure, path);
  core::write_file_atomically(path, bytes);
  return {psnr.low, psnr.high, ssim.low, ssim.high};
}

}  // namespace vaecodec::io
