#pragma once

#include <filesystem>

#include "io/metrics.h"
#include "io/video_reader.h"

namespace vaecodec::io {

// Note [Comparing two videos]
// `vaecodec compare A B` measures B against A with the metrics of `roundtrip --metrics`
// (Note [quality metrics]), on the frames as vaecodec's reader gives them to a model: decoded, converted to
// RGB with the file's own colour tags, in [0, 1]. The two must have the same size and the same number of
// frames; frames are paired in order (timestamps are not compared). Either difference is the user's mistake:
// a UsageError naming both values, found before anything is written.

struct VideoComparison {
  VideoFormat reference, distorted;  // A's and B's formats (of their first frames)
  QualityMeter meter;                // one entry per frame pair
};

// Decodes A and B side by side and measures every frame pair. Throws UsageError for different sizes or frame
// counts, Error for a file that cannot be read.
VideoComparison compare_videos(const std::filesystem::path& reference,
                               const std::filesystem::path& distorted);

}  // namespace vaecodec::io
