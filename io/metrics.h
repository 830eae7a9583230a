#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

namespace vaecodec::io {

// Note [quality metrics]
// Frames are RGB, [3, H, W] (or a batch [N, 3, H, W]), float in [0, 1] or uint8 in [0, 255] (divided by 255).
// Floats are taken as they are, not clamped. The work runs on the reference's device, in float64.
//   PSNR  10 log10(1 / MSE), the MSE over all three channels of a frame (peak 1.0). A frame equal to its
//         reference has MSE 0 and PSNR +inf.
//   SSIM  Wang, Bovik, Sheikh, Simoncelli 2004 on luma Y = 0.2126 R + 0.7152 G + 0.0722 B (BT.709 weights),
//         Gaussian window 11 x 11 with sigma 1.5 (normalized to sum 1), K1 = 0.01, K2 = 0.03, L = 1, over
//         the valid region only (no padding): the mean of the SSIM map of (H - 10) x (W - 10) positions.
//         A frame with a side under 11 pixels gets the largest odd window that fits (n = min(H, W), minus one
//         when even) and sigma 1.5 * n / 11.
// The summary gives PSNR both ways: from the mean MSE over all frames (each frame weighing the same), and as
// the mean of the per-frame PSNRs; they differ when quality varies from frame to frame.

// Quality of one reconstructed frame.
struct FrameQuality {
  int64_t index = 0;  // frames counted from 0 in the order added
  double mse = 0;
  double psnr = 0;  // dB; +inf for a perfect frame
  double ssim = 0;
};

// Quality over all frames added. With no frames, `frames` is 0 and the values are NaN.
struct QualitySummary {
  int64_t frames = 0;
  double mse = 0;        // mean of the per-frame MSEs
  double psnr = 0;       // from `mse`: 10 log10(1 / mse)
  double mean_psnr = 0;  // mean of the per-frame PSNRs (+inf if any frame is perfect)
  double min_psnr = 0;
  double ssim = 0;  // mean of the per-frame SSIMs
  double min_ssim = 0;
  // The frames of the minima (the first of equal ones); -1 with no frames.
  int64_t min_psnr_frame = -1, min_ssim_frame = -1;
};

// PSNR in dB of a mean squared error with peak 1.0; +inf for 0.
double psnr_from_mse(double mse);

// MSE and SSIM of one frame pair [3, H, W] (Note [quality metrics]).
double frame_mse(const torch::Tensor& reference, const torch::Tensor& reconstruction);
double frame_ssim(const torch::Tensor& reference, const torch::Tensor& reconstruction);

// Collects per-frame quality of a reconstruction against its reference and writes it out. Not thread-safe:
// one thread adds frames.
class QualityMeter {
 public:
  // Compares one frame [3, H, W] or a batch [N, 3, H, W] of the same shape; the next frame index follows the
  // last. The reconstruction is moved to the reference's device if it is elsewhere. Throws vaecodec::Error
  // for shapes that differ or are not RGB frames, and for dtypes other than floating point or uint8.
  void add(const torch::Tensor& reference, const torch::Tensor& reconstruction);

  const std::vector<FrameQuality>& frames() const { return frames_; }
  QualitySummary summary() const;
  // The summary as JSON, the keys of write()'s "summary" (an infinite PSNR is null).
  nlohmann::json summary_json() const;

  // Writes the frames and the summary, in the format the extension names; atomic (a temporary file beside
  // `path` is renamed over it). Throws vaecodec::Error for another extension or a failed write.
  //   .json  {"frames": [{"index", "psnr", "ssim", "mse"}, ...],
  //           "summary": {"frames", "psnr", "mean_psnr", "min_psnr", "min_psnr_frame", "ssim", "min_ssim",
  //                       "min_ssim_frame", "mse"}}
  //          JSON has no infinity: an infinite PSNR (and any NaN, as in the summary of no frames) is null.
  //   .csv   a header line "frame,psnr,ssim", then one line per frame; no summary line, so the file stays one
  //          table. An infinite PSNR is written "inf" (as Python's float() and pandas read it).
  // Numbers are written with the fewest digits that read back to the same double.
  void write(const std::filesystem::path& path) const;

 private:
  std::vector<FrameQuality> frames_;
};

}  // namespace vaecodec::io
