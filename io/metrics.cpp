#include "io/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_text.h"
#include "core/sizes.h"

namespace vaecodec::io {
namespace {

constexpr int64_t kSsimWindow = 11;
constexpr double kSsimSigma = 1.5;
constexpr double kSsimK1 = 0.01;
constexpr double kSsimK2 = 0.03;
// BT.709 luma weights of R, G, B.
constexpr double kLumaWeights[3] = {0.2126, 0.7152, 0.0722};

// [N, 3, H, W] float64 in [0, 1] (for inputs in range) on `device`.
torch::Tensor unit_frames(const torch::Tensor& frames, const char* which, torch::Device device) {
  if (!frames.defined() || (frames.dim() != 3 && frames.dim() != 4) || frames.size(-3) != 3) {
    throw Error(std::string("quality: the ") + which + " must be RGB frames [3, H, W] or [N, 3, H, W], not " +
                (frames.defined() ? core::shape_string(frames.sizes()) : std::string("an empty tensor")));
  }
  torch::Tensor x = frames.dim() == 3 ? frames.unsqueeze(0) : frames;
  x = x.to(device);
  if (x.scalar_type() == torch::kByte) return x.to(torch::kDouble) / 255.0;
  if (!torch::isFloatingType(x.scalar_type())) {
    throw Error(std::string("quality: the ") + which + " frames are " +
                std::string(c10::toString(x.scalar_type())) + "; expected floating point in [0, 1] or uint8");
  }
  return x.to(torch::kDouble);
}

// Normalized 1-D Gaussian of `size` taps.
torch::Tensor gaussian_taps(int64_t size, double sigma, torch::Device device) {
  torch::Tensor offsets = torch::arange(size, torch::TensorOptions(torch::kDouble)) - (size - 1) / 2.0;
  torch::Tensor taps = torch::exp(-(offsets * offsets) / (2 * sigma * sigma));
  return (taps / taps.sum()).to(device);
}

// Per-frame MSE of [N, 3, H, W] pairs: [N].
torch::Tensor mse_per_frame(const torch::Tensor& x, const torch::Tensor& y) {
  return (x - y).square().mean({1, 2, 3});
}

// Per-frame SSIM of [N, 3, H, W] pairs on luma (Note [quality metrics]): [N].
torch::Tensor ssim_per_frame(const torch::Tensor& x, const torch::Tensor& y) {
  const int64_t n = x.size(0);
  const int64_t height = x.size(2);
  const int64_t width = x.size(3);
  int64_t window = std::min({kSsimWindow, height, width});
  if (window % 2 == 0) window -= 1;
  const double sigma = kSsimSigma * static_cast<double>(window) / kSsimWindow;

  torch::Tensor weights = torch::tensor({kLumaWeights[0], kLumaWeights[1], kLumaWeights[2]}, torch::kDouble)
                              .to(x.device())
                              .view({1, 3, 1, 1});
  torch::Tensor luma_x = (x * weights).sum(1, /*keepdim=*/true);
  torch::Tensor luma_y = (y * weights).sum(1, /*keepdim=*/true);

  // The 2-D Gaussian is the outer product of the 1-D one: filter rows, then columns; valid region only.
  torch::Tensor taps = gaussian_taps(window, sigma, x.device());
  torch::Tensor row_kernel = taps.view({1, 1, 1, window});
  torch::Tensor column_kernel = taps.view({1, 1, window, 1});
  torch::Tensor moments = torch::cat({luma_x, luma_y, luma_x * luma_x, luma_y * luma_y, luma_x * luma_y}, 1)
                              .view({n * 5, 1, height, width});
  torch::Tensor filtered = torch::conv2d(torch::conv2d(moments, row_kernel), column_kernel);
  filtered = filtered.view({n, 5, filtered.size(2), filtered.size(3)});

  torch::Tensor mu_x = filtered.select(1, 0);
  torch::Tensor mu_y = filtered.select(1, 1);
  torch::Tensor var_x = filtered.select(1, 2) - mu_x * mu_x;
  torch::Tensor var_y = filtered.select(1, 3) - mu_y * mu_y;
  torch::Tensor cov_xy = filtered.select(1, 4) - mu_x * mu_y;
  const double c1 = kSsimK1 * kSsimK1;  // (K1 L)^2, L = 1
  const double c2 = kSsimK2 * kSsimK2;
  torch::Tensor map = ((2 * mu_x * mu_y + c1) * (2 * cov_xy + c2)) /
                      ((mu_x * mu_x + mu_y * mu_y + c1) * (var_x + var_y + c2));
  return map.mean({1, 2});
}

// Both sides as [N, 3, H, W] float64 on the reference's device, checked to match.
std::pair<torch::Tensor, torch::Tensor> frame_pair(const torch::Tensor& reference,
                                                   const torch::Tensor& reconstruction) {
  if (reference.defined() && reconstruction.defined() && reference.sizes() != reconstruction.sizes()) {
    throw Error("quality: the reference is " + core::shape_string(reference.sizes()) +
                " but the reconstruction is " + core::shape_string(reconstruction.sizes()));
  }
  const torch::Device device = reference.defined() ? reference.device() : torch::Device(torch::kCPU);
  return {unit_frames(reference, "reference", device), unit_frames(reconstruction, "reconstruction", device)};
}

// Shortest text that reads back to the same double; "inf", "-inf", "nan" for the rest.
std::string number_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, end);
}

nlohmann::json number_json(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

}  // namespace

double psnr_from_mse(double mse) {
  if (mse == 0) return std::numeric_limits<double>::infinity();
  return -10.0 * std::log10(mse);
}

double frame_mse(const torch::Tensor& reference, const torch::Tensor& reconstruction) {
  auto [x, y] = frame_pair(reference, reconstruction);
  if (x.size(0) != 1)
    throw Error("quality: frame_mse takes one frame [3, H, W], not " + core::shape_string(reference.sizes()));
  return mse_per_frame(x, y).item<double>();
}

double frame_ssim(const torch::Tensor& reference, const torch::Tensor& reconstruction) {
  auto [x, y] = frame_pair(reference, reconstruction);
  if (x.size(0) != 1) {
    throw Error("quality: frame_ssim takes one frame [3, H, W], not " +
                core::shape_string(reference.sizes()));
  }
  return ssim_per_frame(x, y).item<double>();
}

void QualityMeter::add(const torch::Tensor& reference, const torch::Tensor& reconstruction) {
  torch::NoGradGuard no_grad;
  auto [x, y] = frame_pair(reference, reconstruction);
  // One frame at a time bounds the float64 working memory (a 4K frame needs about 1 GB); the results stay on
  // the device until the end so that the batch costs one synchronisation.
  std::vector<torch::Tensor> mse;
  std::vector<torch::Tensor> ssim;
  for (int64_t i = 0; i < x.size(0); ++i) {
    torch::Tensor xi = x.narrow(0, i, 1);
    torch::Tensor yi = y.narrow(0, i, 1);
    mse.push_back(mse_per_frame(xi, yi));
    ssim.push_back(ssim_per_frame(xi, yi));
  }
  torch::Tensor results = torch::stack({torch::cat(mse), torch::cat(ssim)}).cpu();
  auto values = results.accessor<double, 2>();
  for (int64_t i = 0; i < x.size(0); ++i) {
    FrameQuality frame;
    frame.index = static_cast<int64_t>(frames_.size());
    frame.mse = values[0][i];
    frame.psnr = psnr_from_mse(frame.mse);
    frame.ssim = values[1][i];
    frames_.push_back(frame);
  }
}

QualitySummary QualityMeter::summary() const {
  QualitySummary summary;
  summary.frames = static_cast<int64_t>(frames_.size());
  if (frames_.empty()) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    summary.mse = summary.psnr = summary.mean_psnr = summary.min_psnr = summary.ssim = summary.min_ssim = nan;
    return summary;
  }
  double mse_sum = 0;
  double psnr_sum = 0;
  double ssim_sum = 0;
  summary.min_psnr = std::numeric_limits<double>::infinity();
  summary.min_ssim = std::numeric_limits<double>::infinity();
  for (const FrameQuality& frame : frames_) {
    mse_sum += frame.mse;
    psnr_sum += frame.psnr;
    ssim_sum += frame.ssim;
    if (summary.min_psnr_frame < 0 || frame.psnr < summary.min_psnr) {
      summary.min_psnr = frame.psnr;
      summary.min_psnr_frame = frame.index;
    }
    if (summary.min_ssim_frame < 0 || frame.ssim < summary.min_ssim) {
      summary.min_ssim = frame.ssim;
      summary.min_ssim_frame = frame.index;
    }
  }
  const auto count = static_cast<double>(frames_.size());
  summary.mse = mse_sum / count;
  summary.psnr = psnr_from_mse(summary.mse);
  summary.mean_psnr = psnr_sum / count;
  summary.ssim = ssim_sum / count;
  return summary;
}

nlohmann::json QualityMeter::summary_json() const {
  const QualitySummary s = summary();
  return {{"frames", s.frames},
          {"psnr", number_json(s.psnr)},
          {"mean_psnr", number_json(s.mean_psnr)},
          {"min_psnr", number_json(s.min_psnr)},
          {"min_psnr_frame", s.min_psnr_frame},
          {"ssim", number_json(s.ssim)},
          {"min_ssim", number_json(s.min_ssim)},
          {"min_ssim_frame", s.min_ssim_frame},
          {"mse", number_json(s.mse)}};
}

void QualityMeter::write(const std::filesystem::path& path) const {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string text;
  if (ext == ".json") {
    nlohmann::json frames = nlohmann::json::array();
    for (const FrameQuality& frame : frames_) {
      frames.push_back({{"index", frame.index},
                        {"psnr", number_json(frame.psnr)},
                        {"ssim", number_json(frame.ssim)},
                        {"mse", number_json(frame.mse)}});
    }
    text = core::json_text(nlohmann::json{{"frames", frames}, {"summary", summary_json()}}, 2) + "\n";
  } else if (ext == ".csv") {
    text = "frame,psnr,ssim\n";
    for (const FrameQuality& frame : frames_) {
      text +=
          std::to_string(frame.index) + "," + number_text(frame.psnr) + "," + number_text(frame.ssim) + "\n";
    }
  } else {
    throw Error(path.string() + ": unknown metrics file extension '" + path.extension().string() +
                "' (expected .json or .csv)");
  }
  core::write_file_atomically(path, text);
}

}  // namespace vaecodec::io
