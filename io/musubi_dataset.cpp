#include "io/musubi_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "core/error.h"

namespace vaecodec::io {
namespace {

int64_t floor_to_step(int64_t v) {
  return v - v % kMusubiBucketStep;
}

// media_utils.py's lists, case for case (the trainer's glob is case-sensitive).
}  // namespace

const std::vector<std::string>& musubi_video_extensions() {
  static const std::vector<std::string> list = {".mp4", ".webm", ".avi",  ".mkv", ".mov",  ".flv", ".wmv",
                                                ".m4v", ".mpg",  ".mpeg", ".MP4", ".WEBM", ".AVI", ".MKV",
                                                ".MOV", ".FLV",  ".WMV",  ".M4V", ".MPG",  ".MPEG"};
  return list;
}

namespace {

const std::vector<std::string>& image_extensions() {
  static const std::vector<std::string> list = {".png", ".jpg", ".jpeg", ".webp", ".bmp", ".avif",
                                                ".PNG", ".JPG", ".JPEG", ".WEBP", ".BMP", ".AVIF"};
  return list;
}

// What the trainer's glob("*" + ext) matches: not a hidden name, ending in ext.
bool has_extension(const std::filesystem::path& path, const std::vector<std::string>& extensions) {
  const std::string name = path.filename().string();
  if (name.empty() || name.front() == '.') return false;
  return std::any_of(extensions.begin(), extensions.end(),
                     [&](const std::string& ext) { return name.ends_with(ext); });
}

// A double as the shortest decimal that reads back as the same double: FFmpeg's expression parser then
// computes with the value the trainer's Python does.
std::string exact_decimal(double v) {
  char text[64];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, v);
    if (std::strtod(text, nullptr) == v) break;
  }
  return text;
}

}  // namespace

MusubiBuckets::MusubiBuckets(FrameSize resolution, bool enable_bucket, bool no_upscale)
    : resolution_(resolution), no_upscale_(enable_bucket && no_upscale) {
  if (resolution.width <= 0 || resolution.height <= 0)
    throw UsageError("resolution " + std::to_string(resolution.width) + "x" +
                     std::to_string(resolution.height) + " is not a frame size");
  if (!enable_bucket) {
    buckets_ = {resolution};
    return;
  }
  const int64_t area = resolution.width * resolution.height;
  const auto side = static_cast<int64_t>(std::sqrt(static_cast<double>(area)));
  const int64_t smallest = floor_to_step(side / 2);
  if (smallest <= 0)
    throw UsageError(
        "resolution " + std::to_string(resolution.width) + "x" + std::to_string(resolution.height) +
        " is too small for buckets (musubi-tuner's need a square root of the area of 32 or more)");
  std::set<std::pair<int64_t, int64_t>> sizes;
  for (int64_t w = smallest; w < side + kMusubiBucketStep; w += kMusubiBucketStep) {
    const int64_t h = floor_to_step(area / w);
    sizes.insert({w, h});
    sizes.insert({h, w});
  }
  for (const auto& [w, h] : sizes) buckets_.push_back({w, h});
}

FrameSize MusubiBuckets::select(FrameSize frame) const {
  if (no_upscale_ && frame.width * frame.height <= resolution_.width * resolution_.height)
    return {floor_to_step(frame.width), floor_to_step(frame.height)};
  const double aspect = static_cast<double>(frame.width) / static_cast<double>(frame.height);
  size_t best = 0;
  double best_error = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    const double ratio = static_cast<double>(buckets_[i].width) / static_cast<double>(buckets_[i].height);
    const double error = std::fabs(ratio - aspect);
    if (i == 0 || error < best_error) {
      best = i;
      best_error = error;
    }
  }
  return buckets_[best];
}

MusubiBuckets musubi_buckets(const MusubiDataset& dataset) {
  if (!dataset.image) return MusubiBuckets(dataset.resolution, /*enable_bucket=*/true, /*no_upscale=*/false);
  return MusubiBuckets(dataset.resolution, dataset.enable_bucket, dataset.bucket_no_upscale);
}

std::string musubi_resize_filter(FrameSize from, FrameSize bucket) {
  if (from == bucket) return "";
  const double scale = std::max(static_cast<double>(bucket.width) / static_cast<double>(from.width),
                                static_cast<double>(bucket.height) / static_cast<double>(from.height));
  const auto w = static_cast<int64_t>(static_cast<double>(from.width) * scale + 0.5);
  const auto h = static_cast<int64_t>(static_cast<double>(from.height) * scale + 0.5);
  std::vector<std::string> filters;
  if (w != from.width || h != from.height)
    filters.push_back("scale=" + std::to_string(w) + ":" + std::to_string(h) +
                      (scale > 1 ? ":flags=lanczos" : ":flags=area"));
  if (w != bucket.width || h != bucket.height)
    filters.push_back("crop=" + std::to_string(bucket.width) + ":" + std::to_string(bucket.height) + ":" +
                      std::to_string((w - bucket.width) / 2) + ":" + std::to_string((h - bucket.height) / 2) +
                      ":exact=1");
  std::string graph;
  for (const std::string& f : filters) graph += (graph.empty() ? "" : ",") + f;
  return graph;
}

std::vector<int64_t> musubi_target_frames(const std::vector<int64_t>& written) {
  std::set<int64_t> rounded;
  for (const int64_t f : written) rounded.insert((f - 1) / 4 * 4 + 1);
  return {rounded.begin(), rounded.end()};
}

std::string musubi_extraction(const MusubiDataset& dataset) {
  if (dataset.frame_extraction == "uniform" && dataset.frame_sample == 1) return "head";
  return dataset.frame_extraction;
}

std::optional<int64_t> musubi_frame_bound(const MusubiDataset& dataset) {
  if (musubi_extraction(dataset) != "head") return std::nullopt;
  const std::vector<int64_t> targets = musubi_target_frames(dataset.target_frames);
  if (targets.empty()) return std::nullopt;
  return targets.back();
}

int64_t musubi_converted_frames(int64_t decoded, std::optional<double> source_fps,
                                std::optional<int64_t> bound) {
  if (!source_fps) return bound ? std::min(decoded, *bound) : decoded;
  const double step = kMusubiWanFps / *source_fps;
  double sum = 0;
  int64_t previous = -1, kept = 0;
  for (int64_t i = 0; i < decoded; ++i) {
    const auto index = static_cast<int64_t>(sum);
    sum += step;
    if (index == previous) continue;
    previous = index;
    if (bound && index >= *bound) break;
    ++kept;
  }
  return kept;
}

std::string musubi_fps_filter(std::optional<double> source_fps, std::optional<int64_t> bound) {
  // The bound cuts the clip's end only (kept frames' indices grow), which trim does for each window: the
  // filter needs the drops alone. Variables: 0 the running sum, 1 the last kept index + 1, 2 this frame's.
  if (!source_fps) return "";
  return "select='st(2,trunc(ld(0)));st(0,ld(0)+" + exact_decimal(kMusubiWanFps) + "/" +
         exact_decimal(*source_fps) + ");if(eq(ld(2)+1,ld(1)),0,st(1,ld(2)+1)*0+1)'";
}

std::vector<MusubiWindow> musubi_windows(const MusubiDataset& dataset, int64_t frames) {
  const std::string mode = musubi_extraction(dataset);
  const std::vector<int64_t> targets = musubi_target_frames(dataset.target_frames);
  std::vector<MusubiWindow> windows;
  if (mode == "full") {
    const int64_t t = std::min(frames, dataset.max_frames);
    if (t >= 1) windows.push_back({0, (t - 1) / 4 * 4 + 1});
    return windows;
  }
  for (const int64_t t : targets) {
    if (mode == "head") {
      if (frames >= t) windows.push_back({0, t});
    } else if (mode == "chunk") {
      for (int64_t i = 0; i < frames; i += t)
        if (i + t <= frames) windows.push_back({i, t});
    } else if (mode == "slide") {
      if (frames >= t)
        for (int64_t i = 0; i <= frames - t; i += dataset.frame_stride) windows.push_back({i, t});
    } else if (mode == "uniform") {
      if (frames < t) continue;
      // numpy.linspace(0, frames - t, frame_sample) as integers: k * step, the last exactly the end.
      const double span = static_cast<double>(frames - t);
      const int64_t n = dataset.frame_sample;
      const double step = n > 1 ? span / static_cast<double>(n - 1) : 0.0;
      for (int64_t k = 0; k < n; ++k) {
        const double at = k == n - 1 && n > 1 ? span : static_cast<double>(k) * step;
        windows.push_back({static_cast<int64_t>(at), t});
      }
    } else {
      throw UsageError("frame_extraction \"" + mode +
                       "\" is not one of musubi-tuner's (head, chunk, slide, " + "uniform, full)");
    }
  }
  return windows;
}

bool is_musubi_video(const std::filesystem::path& path) {
  return has_extension(path, musubi_video_extensions());
}

bool is_musubi_image(const std::filesystem::path& path) {
  return has_extension(path, image_extensions());
}

}  // namespace vaecodec::io
