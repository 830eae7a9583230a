#include "io/compare.h"

#include <string>

#include "core/error.h"

namespace vaecodec::io {
namespace {

std::string size_text(const VideoFormat& format) {
  return std::to_string(format.width) + "x" + std::to_string(format.height);
}

// The frames left in a reader, counted (their pixels are not needed).
int64_t count_rest(VideoReader& reader, VideoFrame& frame) {
  int64_t n = 0;
  while (reader.next(frame)) ++n;
  return n;
}

}  // namespace

VideoComparison compare_videos(const std::filesystem::path& reference,
                               const std::filesystem::path& distorted) {
  VideoReader a(reference), b(distorted);
  VideoComparison result;
  result.reference = a.format();
  result.distorted = b.format();
  if (a.format().width != b.format().width || a.format().height != b.format().height)
    throw UsageError("cannot compare " + reference.string() + " (" + size_text(a.format()) + ") with " +
                     distorted.string() + " (" + size_text(b.format()) + "): the sizes differ");
  VideoFrame x, y;
  int64_t paired = 0;
  for (;;) {
    const bool has_x = a.next(x), has_y = b.next(y);
    if (!has_x || !has_y) {
      if (has_x || has_y) {
        const int64_t rest = 1 + count_rest(has_x ? a : b, has_x ? x : y);
        const int64_t frames_a = paired + (has_x ? rest : 0), frames_b = paired + (has_y ? rest : 0);
        throw UsageError("cannot compare " + reference.string() + " (" + std::to_string(frames_a) +
                         " frames) with " + distorted.string() + " (" + std::to_string(frames_b) +
                         " frames): the frame counts differ");
      }
      break;
    }
    // [-1, 1] -> [0, 1], as roundtrip --metrics gives the meter its frames.
    result.meter.add(x.rgb.clamp(-1.0, 1.0).add_(1.0).mul_(0.5), y.rgb.clamp(-1.0, 1.0).add_(1.0).mul_(0.5));
    ++paired;
  }
  return result;
}

}  // namespace vaecodec::io
