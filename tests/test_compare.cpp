// `vaecodec compare A B`: PSNR and SSIM of real clips against numbers computed here and against `roundtrip
// --metrics`, the CSV and the PNG plot probed, and the pairs that cannot be compared.

#include <cmath>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "io/metrics.h"
#include "tests/video_test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace vaecodec;
using namespace vaecodec::test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

constexpr int kFrames = 7;

// An RGB clip stored losslessly (ffv1, gbrp), so that what the reader gives is the bytes ffmpeg made.
fs::path make_rgb_clip(const fs::path& path, const std::string& filter = "") {
  return make_clip(path, "-f lavfi -i testsrc2=size=64x48:rate=24 -frames:v " + std::to_string(kFrames) +
                             (filter.empty() ? "" : " -vf " + filter) + " -pix_fmt gbrp -c:v ffv1");
}

// Every frame as RGB [T, 3, H, W] uint8, decoded by the ffmpeg program (not by vaecodec's reader).
torch::Tensor ffmpeg_rgb(const fs::path& video, int width, int height) {
  const fs::path raw = video.string() + ".rgb";
  REQUIRE(shell("ffmpeg -nostdin -loglevel error -y -i " + quote(video) + " -pix_fmt rgb24 -f rawvideo " +
                quote(raw)) == 0);
  const std::string bytes = read_text(raw);
  ::unlink(raw.c_str());
  const int64_t frames = static_cast<int64_t>(bytes.size()) / (int64_t{width} * height * 3);
  REQUIRE(frames * width * height * 3 == static_cast<int64_t>(bytes.size()));
  return torch::from_blob(const_cast<char*>(bytes.data()), {frames, height, width, 3}, torch::kUInt8)
      .permute({0, 3, 1, 2})
      .clone();
}

nlohmann::json compare_json(const fs::path& a, const fs::path& b, const std::string& extra = "") {
  const CliResult r = run_cli("compare " + quote(a) + " " + quote(b) + " --json " + extra);
  INFO("stderr: " << r.err);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("compare of a clip with itself: infinite PSNR and SSIM 1", "[cli][compare]") {
  ScratchDir dir;
  const fs::path clip = make_rgb_clip(dir / "a.mkv");
  const nlohmann::json j = compare_json(clip, clip, "--csv " + quote(dir / "q.csv"));
  CHECK(j.at("frames") == kFrames);
  CHECK(j.at("identical") == true);
  CHECK(j.at("psnr").is_null());  // JSON has no infinity
  CHECK(j.at("min_psnr").is_null());
  CHECK(j.at("ssim").get<double>() == Approx(1.0).epsilon(1e-12));
  CHECK(j.at("width") == 64);
  CHECK(j.at("height") == 48);
  const auto rows = lines(read_text(dir / "q.csv"));
  REQUIRE(rows.size() == kFrames + 1);
  CHECK(rows[0] == "frame,psnr,ssim");
  CHECK_THAT(rows[1], StartsWith("0,inf,"));

  const CliResult text = run_cli("compare " + quote(clip) + " " + quote(clip));
  CHECK(text.status == 0);
  CHECK_THAT(text.out, Contains("identical: PSNR inf dB, SSIM 1.0000"));
}

TEST_CASE("compare of a noisy copy gives the PSNR and SSIM computed here", "[cli][compare]") {
  ScratchDir dir;
  const fs::path clean = make_rgb_clip(dir / "clean.mkv");
  const fs::path noisy = make_rgb_clip(dir / "noisy.mkv", "noise=alls=24:allf=t");
  const fs::path csv = dir / "q.csv", plot = dir / "q.png";
  const nlohmann::json j = compare_json(clean, noisy, "--csv " + quote(csv) + " --plot " + quote(plot));

  // Independently (the reader hands over float32 frames: agreement to 1e-6): frames decoded by ffmpeg, PSNR
  // over the three channels, worst frame found here; SSIM by the metrics library on these frames.
  const torch::Tensor a = ffmpeg_rgb(clean, 64, 48), b = ffmpeg_rgb(noisy, 64, 48);
  REQUIRE(a.size(0) == kFrames);
  double mse_sum = 0, ssim_sum = 0, worst_psnr = INFINITY, worst_ssim = INFINITY;
  int64_t worst_psnr_frame = -1, worst_ssim_frame = -1;
  const auto rows = lines(read_text(csv));
  REQUIRE(rows.size() == kFrames + 1);
  for (int64_t i = 0; i < kFrames; ++i) {
    const torch::Tensor x = a[i].to(torch::kDouble) / 255.0, y = b[i].to(torch::kDouble) / 255.0;
    const double mse = (x - y).square().mean().item<double>();
    const double psnr = 10.0 * std::log10(1.0 / mse);
    const double ssim = io::frame_ssim(a[i], b[i]);
    mse_sum += mse;
    ssim_sum += ssim;
    if (psnr < worst_psnr) worst_psnr = psnr, worst_psnr_frame = i;
    if (ssim < worst_ssim) worst_ssim = ssim, worst_ssim_frame = i;
    // The CSV row of this frame.
    INFO(rows[size_t(i) + 1]);
    double row_psnr = 0, row_ssim = 0;
    int row_frame = -1;
    REQUIRE(std::sscanf(rows[size_t(i) + 1].c_str(), "%d,%lf,%lf", &row_frame, &row_psnr, &row_ssim) == 3);
    CHECK(row_frame == i);
    CHECK(row_psnr == Approx(psnr).epsilon(1e-6));
    CHECK(row_ssim == Approx(ssim).epsilon(1e-6));
  }
  CHECK(worst_psnr < 40.0);  // the noise is there
  CHECK(j.at("psnr").get<double>() == Approx(10.0 * std::log10(kFrames / mse_sum)).epsilon(1e-6));
  CHECK(j.at("min_psnr").get<double>() == Approx(worst_psnr).epsilon(1e-6));
  CHECK(j.at("min_psnr_frame") == worst_psnr_frame);
  CHECK(j.at("ssim").get<double>() == Approx(ssim_sum / kFrames).epsilon(1e-6));
  CHECK(j.at("min_ssim").get<double>() == Approx(worst_ssim).epsilon(1e-6));
  CHECK(j.at("min_ssim_frame") == worst_ssim_frame);
  CHECK(j.at("identical") == false);

  // The plot: a PNG that libavcodec decodes, of the stated size, with the PSNR curve's colour in it.
  const Probe p = probe(plot);
  CHECK(p.codec == "png");
  CHECK(p.width == 1280);
  CHECK(p.height == 720);
  const torch::Tensor image = ffmpeg_rgb(plot, 1280, 720)[0];
  const torch::Tensor psnr_colour = torch::tensor({31, 90, 180}, torch::kUInt8).view({3, 1, 1});
  CHECK((image == psnr_colour).all(0).sum().item<int64_t>() > 500);
  CHECK(j.at("plot").at("file") == plot.string());
}

TEST_CASE("compare agrees with roundtrip --metrics", "[cli][compare]") {
  ScratchDir dir;
  const fs::path clip = make_rgb_clip(dir / "in.mkv");
  const fs::path out = dir / "out.mkv", metrics = dir / "m.json";
  const CliResult r =
      run_cli("roundtrip " + quote(clip) + " -o " + quote(out) + " --weights " + quote(tiny_weights()) +
              " --device cpu --dtype fp32 --codec ffv1 --quiet --metrics " + quote(metrics));
  INFO("stderr: " << r.err);
  REQUIRE(r.status == 0);
  const nlohmann::json roundtrip = read_json(metrics).at("summary");
  const nlohmann::json compared = compare_json(clip, out);
  // roundtrip measures the model's output before it is stored in 8 bits, compare the stored file: the
  // rounding (at most half a level) is all that differs.
  CHECK(compared.at("frames") == roundtrip.at("frames"));
  CHECK(compared.at("psnr").get<double>() == Approx(roundtrip.at("psnr").get<double>()).margin(0.02));
  CHECK(compared.at("min_psnr").get<double>() == Approx(roundtrip.at("min_psnr").get<double>()).margin(0.02));
  CHECK(compared.at("ssim").get<double>() == Approx(roundtrip.at("ssim").get<double>()).margin(2e-3));
  CHECK(compared.at("min_ssim").get<double>() == Approx(roundtrip.at("min_ssim").get<double>()).margin(2e-3));
}

TEST_CASE("compare refuses clips of different sizes or lengths in one line", "[cli][compare]") {
  ScratchDir dir;
  const fs::path a = make_rgb_clip(dir / "a.mkv");
  const fs::path small = make_rgb_clip(dir / "small.mkv", "scale=32:24");
  const fs::path shorter = make_clip(dir / "short.mkv",
                                     "-f lavfi -i testsrc2=size=64x48:rate=24 -frames:v 5 "
                                     "-pix_fmt gbrp -c:v ffv1");
  const fs::path csv = dir / "q.csv";
  auto refused = [&](const fs::path& b, const std::string& what) {
    const CliResult r = run_cli("compare " + quote(a) + " " + quote(b) + " --csv " + quote(csv));
    INFO("stderr: " << r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, StartsWith("vaecodec: error: cannot compare ") && Contains(what));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.out.empty());
    CHECK_FALSE(fs::exists(csv));
  };
  refused(small, "(64x48) with " + small.string() + " (32x24): the sizes differ");
  refused(shorter, "(7 frames) with " + shorter.string() + " (5 frames): the frame counts differ");
  // And the other way round: B longer than A.
  const CliResult r = run_cli("compare " + quote(shorter) + " " + quote(a));
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Contains("(5 frames) with " + a.string() + " (7 frames)"));
  // A --csv that is not a .csv file.
  const CliResult txt = run_cli("compare " + quote(a) + " " + quote(a) + " --csv " + quote(dir / "q.txt"));
  CHECK(txt.status == 2);
  CHECK_THAT(txt.err, Contains("name a .csv file"));
}
