#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "io/metrics.h"

namespace vaecodec::io {

// Note [Quality plot]
// `compare --plot` draws what a chart in a report needs, so that the image means something once shared: a
// title naming the two files and the frame count, a PSNR (dB) panel above and an SSIM panel below, each
// with its name, numbered value ticks and grid lines, frame numbers along x, the mean as a labelled grey
// line, the worst frame as a red line named with its value, and a header line per panel that doubles as
// the legend ("PSNR (dB)  mean 32.41 dB  worst frame 7: 30.12 dB"). Numbers are printed as the text
// output prints them (PSNR with 2 decimals, SSIM with 4). Each panel spans its curve's own range of values;
// frames with an infinite PSNR (equal to the reference) are drawn at the top of the PSNR panel, and when
// every frame is, the panel says so. Written as PNG or SVG by the file's extension (Note [Figures] in
// io/figure.h).

struct QualityPlotRanges {
  double psnr_low = 0, psnr_high = 0;  // dB, bottom and top of the PSNR panel (finite frames)
  double ssim_low = 0, ssim_high = 0;  // bottom and top of the SSIM panel
};

inline constexpr int kQualityPlotWidth = 1280;
inline constexpr int kQualityPlotHeight = 720;

// Whether `path` names a file the plot can be written as (.png or .svg).
bool is_quality_plot_path(const std::filesystem::path& path);

// Draws `frames` (of `distorted` measured against `reference`, named in the title) and writes the PNG or
// SVG to `path` atomically (a temporary file renamed over it). Throws vaecodec::Error when there are no
// frames or the drawing, the encoder or the write fails.
QualityPlotRanges write_quality_plot(const std::filesystem::path& path,
                                     const std::vector<FrameQuality>& frames, const std::string& reference,
                                     const std::string& distorted);

}  // namespace vaecodec::io
