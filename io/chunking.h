#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include <torch/torch.h>

#include "core/device/device.h"
#include "core/engine.h"
#include "core/vae_model.h"
#include "io/stages.h"

namespace vaecodec::io {

// Note [Padding]
// The model takes sizes that are multiples of ModelInfo::spatial_factor and 1 + temporal_factor * k frames.
// Frames are padded on the right and at the bottom by repeating the edge pixels (a hard black edge would
// bleed into the picture through the convolutions), and the sequence is padded at the end by repeating the
// last frame. After decoding the padding is cropped and the extra frames are dropped, so the output has the
// input's size and frame count. The extra frames never reach the writer: output frame n takes the pts and
// duration of input frame n, and nothing needs a pts for a frame that did not exist.

// The size of the video and the size the model sees.
struct Geometry {
  int64_t width = 0, height = 0;
  int64_t padded_width = 0, padded_height = 0;
  int64_t temporal_factor = 4;
  static Geometry of(const core::ModelInfo& info, int64_t width, int64_t height);
  bool padded() const { return width != padded_width || height != padded_height; }
};

// 1 + factor * k for the smallest k that holds `frames` frames.
int64_t padded_frame_count(int64_t frames, int64_t temporal_factor);

// Whether a run's result holds any frames (runs may return nothing, or an empty tensor, between chunks).
bool has_frames(const torch::Tensor& t);

// Feeds host frames to an encode run (core::Run) in whole chunks: uploads each frame as it comes
// (Note [Overlapping copies]), pads the size, and pads the frame count at the end (Note [Padding]). Where the
// run keeps frames packed (Note [Frames kept packed] in core/packed_frames.h), a chunk of frames that came as
// their 8-bit Y'CbCr planes goes to it as those planes, in one page-locked block of their size, and is
// converted where each tile runs by the same operations (Note [An encode window as its planes]).
class EncodeFeeder {
 public:
  EncodeFeeder(core::VaeModel& model, core::ChunkOptions chunks, Geometry geometry, core::Device& device);
  // A frame as the reader made it, taken to the device as RGB (frame_rgb). Returns the latents this frame
  // completed, [1, z, n, h, w] (n may be 0).
  torch::Tensor push(const VideoFrame& frame);
  // Pads to 1 + 4k frames and returns the remaining latents.
  torch::Tensor finish();
  int64_t frames() const { return frames_in_; }
  // Frames handed to the run packed so far (Note [An encode window as its planes]), padding included.
  int64_t packed_frames() const { return packed_frames_; }

 private:
  torch::Tensor flush();

  core::Run run_;
  Geometry geometry_;
  core::Device& device_;
  torch::ScalarType
      dtype_;      // the model's: frames wait in it (Note [The encode's input in the model's dtype])
  int64_t group_;  // frames per push to the run: 1 + f * (L - 1) for the first chunk, f * L after
  int64_t later_group_;
  // Frames held as planes join pending_ as RGB (a chunk is packed only while all its frames are).
  void unpack_held();

  std::vector<torch::Tensor> pending_;  // device frames [3, H, W]
  torch::Tensor last_;
  bool packs_;                  // the run keeps frames packed
  std::vector<YuvFrame> held_;  // the chunk's frames as their planes (pending_ then empty)
  int64_t frames_in_ = 0;
  int64_t packed_frames_ = 0;
};

// Takes decoded chunks [1, 3, t, Hp, Wp] on the device, crops the padding, downloads them and hands every
// real frame to the writer with the timing of its input frame (Note [Padding]).
class DecodedFrameSink {
 public:
  // converter: when given, frames are colour-converted where the model ran (on the GPU: batched, and an
  // eighth of the bytes to download for 8-bit 4:2:0) and the writer only copies planes; null: RGB frames.
  DecodedFrameSink(Geometry geometry, core::Device& device, WriterStage& writer,
                   const TensorToFrame* converter = nullptr);
  // The timing of the next input frame, in order; `reference` is the input frame for quality metrics.
  void add_timing(int64_t pts, int64_t duration, torch::Tensor reference = {});
  void push(const torch::Tensor& video);
  int64_t emitted() const { return emitted_; }
  // The clip's own frames so far: emitted, or waiting with their timing (decoded frames beyond them are the
  // padding's, Note [Padding]).
  int64_t frames_timed() const { return emitted_ + static_cast<int64_t>(timings_.size()); }
  int64_t dropped() const { return dropped_; }
  // The frames go to a video of 8 bits of each colour at most, converted where the model ran
  // (ChunkOptions::emit_8bit).
  bool keeps_8_bits() const;

 private:
  struct Timing {
    int64_t pts, duration;
    torch::Tensor reference;
  };
  Geometry geometry_;
  core::Device& device_;
  WriterStage& writer_;
  const TensorToFrame* converter_;
  std::deque<Timing> timings_;
  int64_t emitted_ = 0;
  int64_t dropped_ = 0;
};

}  // namespace vaecodec::io
