#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/metrics.h"
#include "tests/gpu_support.h"
#include "tests/test_support.h"

namespace {

using Catch::Matchers::Equals;
using vaecodec::io::FrameQuality;
using vaecodec::io::QualityMeter;

using vaecodec::test::cuda_here;
using vaecodec::test::TempDir;

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// SSIM straight from the paper's definitions, in plain loops: BT.709 luma, an 11 x 11 (or smaller, as
// documented) Gaussian window built in 2-D, two-pass weighted moments at every valid position.
double reference_ssim(const torch::Tensor& a, const torch::Tensor& b) {
  const auto x = a.to(torch::kDouble).contiguous();
  const auto y = b.to(torch::kDouble).contiguous();
  const int64_t height = x.size(1);
  const int64_t width = x.size(2);
  auto xa = x.accessor<double, 3>();
  auto ya = y.accessor<double, 3>();
  std::vector<double> lx(height * width), ly(height * width);
  for (int64_t i = 0; i < height; ++i) {
    for (int64_t j = 0; j < width; ++j) {
      lx[i * width + j] = 0.2126 * xa[0][i][j] + 0.7152 * xa[1][i][j] + 0.0722 * xa[2][i][j];
      ly[i * width + j] = 0.2126 * ya[0][i][j] + 0.7152 * ya[1][i][j] + 0.0722 * ya[2][i][j];
    }
  }
  int64_t n = std::min<int64_t>({11, height, width});
  if (n % 2 == 0) --n;
  const double sigma = 1.5 * static_cast<double>(n) / 11.0;
  const double centre = (n - 1) / 2.0;
  std::vector<double> w(n * n);
  double total = 0;
  for (int64_t u = 0; u < n; ++u) {
    for (int64_t v = 0; v < n; ++v) {
      const double d2 = (u - centre) * (u - centre) + (v - centre) * (v - centre);
      w[u * n + v] = std::exp(-d2 / (2 * sigma * sigma));
      total += w[u * n + v];
    }
  }
  for (double& value : w) value /= total;

  const double c1 = 0.01 * 0.01;
  const double c2 = 0.03 * 0.03;
  double sum = 0;
  int64_t count = 0;
  for (int64_t i = 0; i + n <= height; ++i) {
    for (int64_t j = 0; j + n <= width; ++j) {
      double mx = 0, my = 0;
      for (int64_t u = 0; u < n; ++u) {
        for (int64_t v = 0; v < n; ++v) {
          mx += w[u * n + v] * lx[(i + u) * width + j + v];
          my += w[u * n + v] * ly[(i + u) * width + j + v];
        }
      }
      double vx = 0, vy = 0, cxy = 0;
      for (int64_t u = 0; u < n; ++u) {
        for (int64_t v = 0; v < n; ++v) {
          const double dx = lx[(i + u) * width + j + v] - mx;
          const double dy = ly[(i + u) * width + j + v] - my;
          vx += w[u * n + v] * dx * dx;
          vy += w[u * n + v] * dy * dy;
          cxy += w[u * n + v] * dx * dy;
        }
      }
      sum += ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2));
      ++count;
    }
  }
  return sum / static_cast<double>(count);
}

// A smooth frame with some texture, and the same plus Gaussian noise.
std::pair<torch::Tensor, torch::Tensor> noisy_pair(int64_t height, int64_t width, double noise) {
  torch::manual_seed(11);
  auto ramp_y = torch::linspace(0, 1, height, torch::kDouble).view({1, height, 1});
  auto ramp_x = torch::linspace(0, 1, width, torch::kDouble).view({1, 1, width});
  auto reference = (0.3 * ramp_y + 0.4 * ramp_x + 0.1 * torch::rand({3, height, width}, torch::kDouble) +
                    torch::tensor({0.0, 0.05, 0.1}, torch::kDouble).view({3, 1, 1}))
                       .clamp(0, 1);
  auto reconstruction = (reference + noise * torch::randn({3, height, width}, torch::kDouble)).clamp(0, 1);
  return {reference, reconstruction};
}

}  // namespace

TEST_CASE("identical frames: infinite PSNR, SSIM 1", "[metrics]") {
  const auto [reference, unused] = noisy_pair(24, 32, 0.0);
  QualityMeter meter;
  meter.add(reference, reference.clone());
  REQUIRE(meter.frames().size() == 1);
  const FrameQuality& frame = meter.frames()[0];
  CHECK(frame.mse == 0);
  CHECK(std::isinf(frame.psnr));
  CHECK(frame.psnr > 0);
  CHECK(frame.ssim == Approx(1.0).epsilon(1e-12));
  CHECK(std::isinf(meter.summary().psnr));
}

TEST_CASE("PSNR of a known MSE", "[metrics]") {
  SECTION("float frames, a constant offset of 0.1 -> 20 dB") {
    const auto reference = torch::full({3, 16, 16}, 0.2, torch::kDouble);
    const auto reconstruction = torch::full({3, 16, 16}, 0.3, torch::kDouble);
    QualityMeter meter;
    meter.add(reference, reconstruction);
    CHECK(meter.frames()[0].mse == Approx(0.01).epsilon(1e-12));
    CHECK(meter.frames()[0].psnr == Approx(20.0).epsilon(1e-12));
    CHECK(vaecodec::io::frame_mse(reference.to(torch::kFloat), reconstruction.to(torch::kFloat)) ==
          Approx(0.01).epsilon(1e-6));
  }
  SECTION("uint8 frames are divided by 255: 51 levels apart -> MSE 0.04") {
    const auto reference = torch::zeros({3, 12, 12}, torch::kByte);
    const auto reconstruction = torch::full({3, 12, 12}, 51, torch::kByte);
    QualityMeter meter;
    meter.add(reference, reconstruction);
    CHECK(meter.frames()[0].mse == Approx(0.04).epsilon(1e-12));
    CHECK(meter.frames()[0].psnr == Approx(-10 * std::log10(0.04)).epsilon(1e-12));
  }
  SECTION("overall PSNR from the mean MSE, and the mean of per-frame PSNRs") {
    QualityMeter meter;
    const auto reference = torch::zeros({3, 12, 12}, torch::kDouble);
    meter.add(reference, torch::full({3, 12, 12}, 0.1, torch::kDouble));   // MSE 0.01, 20 dB
    meter.add(reference, torch::full({3, 12, 12}, 0.01, torch::kDouble));  // MSE 0.0001, 40 dB
    const auto summary = meter.summary();
    CHECK(summary.frames == 2);
    CHECK(summary.mse == Approx(0.00505));
    CHECK(summary.psnr == Approx(-10 * std::log10(0.00505)));
    CHECK(summary.mean_psnr == Approx(30.0));
    CHECK(summary.min_psnr == Approx(20.0));
    CHECK(meter.frames()[1].index == 1);
  }
}

TEST_CASE("SSIM matches a plain-loop implementation of Wang et al. 2004", "[metrics]") {
  SECTION("an 11 x 11 window") {
    const auto [reference, reconstruction] = noisy_pair(20, 27, 0.05);
    const double expected = reference_ssim(reference, reconstruction);
    const double ssim = vaecodec::io::frame_ssim(reference, reconstruction);
    CHECK(expected < 0.99);
    CHECK(expected > 0.1);
    CHECK(ssim == Approx(expected).epsilon(1e-10));
    // float32 input gives the same to float32 precision of the pixels.
    CHECK(vaecodec::io::frame_ssim(reference.to(torch::kFloat), reconstruction.to(torch::kFloat)) ==
          Approx(expected).epsilon(1e-5));
  }
  SECTION("a frame smaller than the window") {
    const auto [reference, reconstruction] = noisy_pair(8, 30, 0.05);  // window 7
    CHECK(vaecodec::io::frame_ssim(reference, reconstruction) ==
          Approx(reference_ssim(reference, reconstruction)).epsilon(1e-10));
  }
}

TEST_CASE("a batch of frames gives what the frames give one by one", "[metrics]") {
  const auto [a0, b0] = noisy_pair(16, 16, 0.02);
  const auto [a1, b1] = noisy_pair(16, 16, 0.1);
  QualityMeter batched;
  batched.add(torch::stack({a0, a1}), torch::stack({b0, b1}));
  QualityMeter single;
  single.add(a0, b0);
  single.add(a1, b1);
  REQUIRE(batched.frames().size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(batched.frames()[i].index == static_cast<int64_t>(i));
    CHECK(batched.frames()[i].psnr == Approx(single.frames()[i].psnr).epsilon(1e-12));
    CHECK(batched.frames()[i].ssim == Approx(single.frames()[i].ssim).epsilon(1e-12));
  }
}

TEST_CASE("quality files parse back", "[metrics]") {
  TempDir dir;
  QualityMeter meter;
  const auto [reference, reconstruction] = noisy_pair(16, 24, 0.05);
  meter.add(reference, reconstruction);
  meter.add(reference, reference);  // a perfect frame: infinite PSNR

  SECTION(".json") {
    const auto path = dir / "quality.json";
    meter.write(path);
    const auto json = nlohmann::json::parse(read_text(path));
    REQUIRE(json["frames"].size() == 2);
    CHECK(json["frames"][0]["index"] == 0);
    CHECK(json["frames"][0]["psnr"].get<double>() == meter.frames()[0].psnr);
    CHECK(json["frames"][0]["ssim"].get<double>() == meter.frames()[0].ssim);
    CHECK(json["frames"][1]["psnr"].is_null());
    CHECK(json["frames"][1]["ssim"].get<double>() == Approx(1.0));
    const auto summary = meter.summary();
    CHECK(json["summary"]["frames"] == 2);
    CHECK(json["summary"]["psnr"].get<double>() == summary.psnr);
    CHECK(json["summary"]["mean_psnr"].is_null());
    CHECK(json["summary"]["ssim"].get<double>() == summary.ssim);
    CHECK(json["summary"]["min_ssim"].get<double>() == summary.min_ssim);
  }
  SECTION(".csv") {
    const auto path = dir / "quality.csv";
    meter.write(path);
    std::istringstream lines(read_text(path));
    std::string line;
    REQUIRE(std::getline(lines, line));
    CHECK(line == "frame,psnr,ssim");
    for (size_t i = 0; i < 2; ++i) {
      REQUIRE(std::getline(lines, line));
      std::istringstream fields(line);
      std::string index, psnr, ssim;
      std::getline(fields, index, ',');
      std::getline(fields, psnr, ',');
      std::getline(fields, ssim, ',');
      CHECK(std::stoll(index) == static_cast<int64_t>(i));
      CHECK(std::stod(psnr) == meter.frames()[i].psnr);  // exact: shortest round-trip text, or "inf"
      CHECK(std::stod(ssim) == meter.frames()[i].ssim);
    }
    CHECK_FALSE(std::getline(lines, line));
  }
  SECTION("unknown extension") {
    const auto path = dir / "quality.txt";
    REQUIRE_THROWS_WITH(
        meter.write(path),
        Equals(path.string() + ": unknown metrics file extension '.txt' (expected .json or .csv)"));
  }
  SECTION("no stray temporary files") {
    meter.write(dir / "quality.json");
    meter.write(dir / "quality.json");
    int files = 0;
    for (std::filesystem::directory_iterator it(dir.path()), end; it != end; ++it) ++files;
    CHECK(files == 1);
  }
}

TEST_CASE("quality input errors", "[metrics]") {
  QualityMeter meter;
  REQUIRE_THROWS_WITH(meter.add(torch::zeros({3, 8, 8}), torch::zeros({3, 8, 9})),
                      Equals("quality: the reference is [3, 8, 8] but the reconstruction is [3, 8, 9]"));
  REQUIRE_THROWS_WITH(
      meter.add(torch::zeros({1, 8, 8}), torch::zeros({1, 8, 8})),
      Equals("quality: the reference must be RGB frames [3, H, W] or [N, 3, H, W], not [1, 8, 8]"));
  REQUIRE_THROWS_WITH(
      meter.add(torch::zeros({3, 8, 8}, torch::kInt), torch::zeros({3, 8, 8}, torch::kInt)),
      Equals("quality: the reference frames are Int; expected floating point in [0, 1] or uint8"));
  CHECK(meter.frames().empty());
  CHECK(meter.summary().frames == 0);
  CHECK(std::isnan(meter.summary().psnr));
}

TEST_CASE("quality on the GPU matches the CPU", "[metrics][gpu]") {
  if (!cuda_here()) return;
  const auto [reference, reconstruction] = noisy_pair(40, 56, 0.05);
  QualityMeter cpu;
  cpu.add(reference.to(torch::kFloat), reconstruction.to(torch::kFloat));
  QualityMeter gpu;
  gpu.add(reference.to(torch::kFloat).cuda(), reconstruction.to(torch::kFloat).cuda());
  CHECK(gpu.frames()[0].psnr == Approx(cpu.frames()[0].psnr).epsilon(1e-9));
  CHECK(gpu.frames()[0].ssim == Approx(cpu.frames()[0].ssim).epsilon(1e-9));
}
