#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "io/metrics.h"

namespace vaecodec::io {

// Note [Quality plot]
// `compare --plot` draws the per-frame curves into an RGB24 image and encodes it with libavcodec's PNG
// encoder, so no plotting library is needed (and the image has no text: the axes' ranges are returned for
// the caller to print). Two panels, PSNR above and SSIM below, the frame index along x; each panel spans
// its curve's own range of values, a light line marks the mean and a vertical one the worst frame. Frames
// with an infinite PSNR (equal to the reference) are drawn at the top of the PSNR panel; when every frame
// is, the panel shows a flat line.

struct QualityPlotRanges {
  double psnr_low = 0, psnr_high = 0;  // dB, bottom and top of the PSNR panel (finite frames)
  double ssim_low = 0, ssim_high = 0;  // bottom and top of the SSIM panel
};

inline constexpr int kQualityPlotWidth = 960;
inline constexpr int kQualityPlotHeight = 540;

// Draws `frames` and writes the PNG to `path` atomically (a temporary file renamed over it). Throws
// vaecodec::Error when there are no frames or the encoder or the write fails.
QualityPlotRanges write_quality_plot(const std::filesystem::path& path,
                                     const std::vector<FrameQuality>& frames);

}  // namespace vaecodec::io
