#pragma once

#include <cstdint>
#include <memory>

#include <torch/torch.h>

#include "core/causal_cache.h"
#include "core/chunk_options.h"
#include "core/device/device.h"
#include "core/op.h"
#include "core/packed_frames.h"
#include "core/planner.h"
#include "core/vae_model.h"

namespace vaecodec::core {

class Split;

// Streams a clip through the model, one way (`op`: encode or decode). Push frames or latents as they arrive
// (any number at a time); the run cuts them into chunks of the model's shape, runs them where the plan says
// (Note [Splits] in core/split/split.h) and returns whatever output is complete.
//   encode: frames [B, 3, t, H, W] in [-1, 1], any device and float dtype (moved to the model's device and
//           dtype here); returns latents [B, z, n, h, w], n >= 0. The frame count over the whole run must be
//           1 + temporal_factor * k (the I/O layer pads it).
//   decode: latents [B, z, n, h, w]; returns video frames [B, 3, t, H, W] (unclamped, model dtype, model
//           device) as chunks complete, or hands them to ChunkOptions::emit (exact tiles).
class Run {
 public:
  Run(VaeModel& model, Device& device, Op op, ChunkOptions chunks = {});
  ~Run();
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;
  torch::Tensor push(const torch::Tensor& x);  // the output completed by this call
  // Encode: frames packed by the caller (Note [Frames kept packed] in core/packed_frames.h), where
  // keeps_packed() says the run keeps them so.
  torch::Tensor push_packed(std::shared_ptr<const PackedFrames> x);
  bool keeps_packed() const;
  torch::Tensor finish();                           // what is left; encode throws if the count was not 1 + 4k
  int64_t frames_in() const { return frames_in_; }  // frames (encode) or latent frames (decode) pushed

 private:
  VaeModel& model_;
  Device& device_;  // the model's
  Op op_;
  ChunkOptions chunks_;
  std::unique_ptr<Split> split_;  // made at the first push, for its frame size
  int64_t frames_in_ = 0;
};

// Whole-sequence helpers over the run above, on the model's device.
torch::Tensor encode_video(VaeModel& model, const torch::Tensor& video, ChunkOptions chunks = {});
torch::Tensor decode_latents(VaeModel& model, const torch::Tensor& latents, ChunkOptions chunks = {});

}  // namespace vaecodec::core
