#pragma once

#include <cstdint>
#include <filesystem>

namespace vaecodec::io {

// How long an input is, as far as its header tells without decoding anything: for scheduling a batch
// (longest first, Note [Batches over devices] in app/device_batch.h) and for its progress line.
struct InputLength {
  int64_t frames = 0;  // 0: unknown
  double seconds = 0;  // 0: unknown
};

// A video's frame count and duration from its container (the stream's frame count, or its duration times
// its frame rate), or a latent file's from vaecodec's record (a file without one: its latent frames, the
// only length it knows). Cheap: opens the header only (a latent file is mapped, not read). Never throws:
// an input that cannot be probed has length 0 (its run reports why it fails).
InputLength probe_length(const std::filesystem::path& path);

// A video's (or an image's) frame count, counted by its packets (demuxed, not decoded: one packet per frame
// for the codecs of training sets; packets the container marks as discarded do not count), and its frame
// size. What a dataset's windows are planned from (Note [musubi-tuner's dataset rules] in
// io/musubi_dataset.h); a run checks that its window decodes to the frames planned. Throws Error with
// FFmpeg's message when the file cannot be read or holds no video.
struct VideoCount {
  int64_t frames = 0;
  int width = 0;
  int height = 0;
};
VideoCount count_video_frames(const std::filesystem::path& path);

}  // namespace vaecodec::io
