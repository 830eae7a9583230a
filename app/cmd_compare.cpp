#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/overwrite.h"
#include "core/error.h"
#include "core/json_text.h"
#include "io/compare.h"
#include "io/ffmpeg_common.h"
#include "io/output_file.h"
#include "io/quality_plot.h"

namespace vaecodec::app {
namespace {

struct CompareOptions {
  std::string reference, distorted;
  bool json = false;
  std::string csv;   // per-frame rows; empty: none
  std::string plot;  // the per-frame curves, .png or .svg; empty: none
  OverwriteOptions overwrite;
};

std::string decibels(double psnr) {
  if (std::isinf(psnr)) return "inf dB";
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f dB", psnr);
  return text;
}

std::string fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

void compare(const CompareOptions& o) {
  io::set_ffmpeg_log_level(AV_LOG_QUIET);  // drawtext's "Using font ..." and the like; errors are ours
  const std::vector<std::filesystem::path> inputs = {o.reference, o.distorted};
  if (!o.csv.empty()) {
    if (std::filesystem::path(o.csv).extension() != ".csv")
      throw UsageError("--csv " + o.csv + ": the per-frame table is written as .csv; name a .csv file");
    io::check_output_path(o.csv, inputs);
  }
  if (!o.plot.empty()) {
    if (!io::is_quality_plot_path(o.plot))
      throw UsageError("--plot " + o.plot + ": the plot is written as .png or .svg; name such a file");
    io::check_output_path(o.plot, inputs);
  }
  check_overwrite({o.csv, o.plot}, o.overwrite);
  const io::VideoComparison result = io::compare_videos(o.reference, o.distorted);
  const io::QualityMeter& meter = result.meter;
  const io::QualitySummary s = meter.summary();
  if (!o.csv.empty()) meter.write(o.csv);
  std::optional<io::QualityPlotRanges> ranges;
  if (!o.plot.empty())
    ranges =
        io::write_quality_plot(o.plot, meter.frames(), std::filesystem::path(o.reference).filename().string(),
                               std::filesystem::path(o.distorted).filename().string());

  if (o.json) {
    nlohmann::json j = meter.summary_json();
    j["reference"] = o.reference;
    j["distorted"] = o.distorted;
    j["width"] = result.reference.width;
    j["height"] = result.reference.height;
    j["identical"] = std::isinf(s.min_psnr);
    if (!o.csv.empty()) j["csv"] = o.csv;
    if (ranges)
      j["plot"] = {{"file", o.plot},
                   {"psnr_range", {ranges->psnr_low, ranges->psnr_high}},
                   {"ssim_range", {ranges->ssim_low, ranges->ssim_high}}};
    std::cout << core::json_text(j) << "\n";
    return;
  }
  std::cout << o.distorted << " against " << o.reference << ": " << s.frames << " frames of "
            << result.reference.width << "x" << result.reference.height << "\n";
  if (std::isinf(s.min_psnr)) {
    std::cout << "identical: PSNR inf dB, SSIM " << fixed(s.ssim, 4) << " in every frame\n";
  } else {
    std::cout << "PSNR  " << decibels(s.psnr) << " (mean of frames " << decibels(s.mean_psnr) << "), lowest "
              << decibels(s.min_psnr) << " at frame " << s.min_psnr_frame << "\n"
              << "SSIM  " << fixed(s.ssim, 4) << ", lowest " << fixed(s.min_ssim, 4) << " at frame "
              << s.min_ssim_frame << "\n";
  }
  if (!o.csv.empty()) std::cout << "per-frame values: " << o.csv << "\n";
  if (ranges)
    std::cout << "plot: " << o.plot << " (PSNR above, " << fixed(ranges->psnr_low, 2) << " to "
              << fixed(ranges->psnr_high, 2) << " dB; SSIM below, " << fixed(ranges->ssim_low, 4) << " to "
              << fixed(ranges->ssim_high, 4) << ")\n";
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "compare", "Measure a video against a reference: PSNR and SSIM, their means and worst frames");
  auto o = std::make_shared<CompareOptions>();
  cmd->add_option("reference", o->reference, "The reference video (A)")->required();
  cmd->add_option("distorted", o->distorted, "The video measured against it (B), same size and frame count")
      ->required();
  cmd->add_flag("--json", o->json, "Print one JSON object instead of text (an infinite PSNR is null)");
  cmd->add_option("--csv", o->csv, "Write one row per frame (frame,psnr,ssim) to this .csv file");
  cmd->add_option(
      "--plot", o->plot,
      "Draw the per-frame PSNR and SSIM curves, titled and labelled, into this .png or .svg file");
  add_overwrite_options(*cmd, o->overwrite);
  cmd->callback([o] { compare(*o); });
}

}  // namespace vaecodec::app
