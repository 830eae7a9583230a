#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "core/vae_model.h"
#include "io/chunking.h"
#include "io/ffmpeg_common.h"
#include "io/latent_file.h"
#include "io/video_reader.h"

// A latent file's record of the video it came from (LatentMeta, Note [latent files] in io/latent_file.h):
// made by encode from what the reader saw, and read back by decode into the video to write.

namespace vaecodec::io {

// The record of `frames` frames of a video of `format` (timestamps `pts`), encoded by a model of `info` at
// `geometry`, after `source`'s filter graph and cut; scale_applied: the latents are stored times the model's
// latent scale.
LatentMeta latent_record(const core::ModelInfo& info, const VideoFormat& format, const Geometry& geometry,
                         int64_t frames, std::vector<int64_t> pts, const SourceOptions& source,
                         bool scale_applied, bool has_audio, const std::filesystem::path& input);

// The video a latent file stands for: its record where it has one, else what the latents' shape and the
// options say.
struct DecodePlan {
  VideoFormat format;
  int64_t frames = 0;
  std::vector<int64_t> pts;
  std::vector<int64_t> durations;
};

// The video `file` stands for (read from `input`): its record where it has one, else what the latents' shape
// says, at `fps` when the file has no timing (0/1: none given). Throws Error for a record that does not fit
// the latents or contradicts itself, or a file without timing and no fps.
DecodePlan plan_decode(const LatentFile& file, const core::ModelInfo& info,
                       const std::filesystem::path& input, AVRational fps);

}  // namespace vaecodec::io
