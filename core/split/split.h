#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include <torch/torch.h>

#include "core/chunk_options.h"
#include "core/device/device.h"
#include "core/op.h"
#include "core/packed_frames.h"
#include "core/vae_model.h"

namespace vaecodec::core {

// Note [Splits]
// Where a run's chunks run is one Split, chosen once per run from its plan (ChunkOptions) and the frame's
// size, and the engine's run (core/engine.h) only pushes a clip's frames or latents through it and finishes
// it. The kinds, each in a file of its own beside this one:
//   whole          (whole.h)          the model over the whole frame, chunk by chunk, with the run's cache;
//   blended tiles  (blended_tiles.h)  every chunk cut into overlapping tiles, each with its own cache (parked
//                                     in host memory with offload), blended back (Note [Tile blending]);
//   bands          (bands.h)          every chunk cut into horizontal bands, one per place, run at once on
//                                     the places' workers (Note [Bands across devices]), optionally in
//                                     blended columns;
//   exact tiles    (exact_tiles.h)    tiles run tile by tile through windows of chunks (Note [Tiles through
//                                     time]), exact or SeedVR2's blended ones, shared out among places
//                                     where the plan has several.
// What they share lives here too: the workers, one per place (places.h, Note [Places]) and the caches'
// copies to and from host memory (parking.h, Note [Offloaded caches]). A new kind is a class deriving from
// Split (or ChunkedSplit, when it runs chunk by chunk), in its own files here, named by a SplitKind
// (core/plan_types.h) that the planner chooses (Plan::split) and made in make_split() (make_split.cpp);
// nothing above the engine names its class. Every kind reports progress (ChunkOptions::progress), so the
// front ends count nothing themselves.

class Split {
 public:
  virtual ~Split() = default;
  // Frames (encode, [B, 3, t, H, W]) or latents (decode, [B, z, n, h, w]) as they come, any number at a
  // time, on any device; returns the output they complete (undefined or no frames: none yet). With
  // ChunkOptions::emit, exact tiles' decode frames may go there instead.
  virtual torch::Tensor push(const torch::Tensor& x) = 0;
  // Encode: frames kept packed (Note [Frames kept packed] in core/packed_frames.h), where
  // keeps_packed_frames() says this split keeps them; none else takes them.
  virtual torch::Tensor push_packed(std::shared_ptr<const PackedFrames> x);
  // What is left at the end of the clip.
  virtual torch::Tensor finish() = 0;
  // The bytes of the causal caches it holds, wherever they are.
  virtual int64_t cache_bytes() const = 0;
};

// A split that runs the clip chunk by chunk (Note [Chunks] in core/engine.cpp): push() cuts what came into
// the model's chunks and runs each through run_chunk().
class ChunkedSplit : public Split {
 public:
  ChunkedSplit(Op op, int64_t latent_frames, int64_t temporal_factor);
  torch::Tensor push(const torch::Tensor& x) override;
  torch::Tensor finish() override;
  // Told the frames done (ChunkOptions::progress) after every chunk.
  void report_to(std::function<void(int64_t frames)> progress) { progress_ = std::move(progress); }

 protected:
  // One chunk of the whole frame (pixels for encode, latents for decode), any device.
  virtual torch::Tensor run_chunk(const torch::Tensor& x) = 0;
  // After the last chunk: what the model held back (Note [Decoders that look ahead]); none by default.
  virtual torch::Tensor end() { return {}; }
  Op op_;

 private:
  int64_t latent_frames_, temporal_factor_;
  // One chunk through run_chunk, counted for progress_.
  torch::Tensor run_counted(const torch::Tensor& x);
  void count(int64_t frames);  // `frames` more done: told to progress_
  torch::Tensor pending_;      // what waits for a full chunk
  bool started_ = false;       // a chunk has run (encode: later chunks are multiples of the temporal factor)
  std::function<void(int64_t)> progress_;
  int64_t frames_done_ = 0;  // encode: frames in; decode: frames out
};

// Whether the split `chunks` names keeps an encode's frames packed as they came (Note [Frames kept packed]):
// exact tiles whose window waits in host memory.
bool keeps_packed_frames(Op op, const ChunkOptions& chunks);

// The split that runs `op` on `model` (on `device`) as `chunks` plans it - its kind, its places
// (ChunkOptions::bands) and its hooks (ChunkOptions::progress, ChunkOptions::emit) - for frames of
// latent_height x latent_width. Throws when its grid was planned for another frame size.
std::unique_ptr<Split> make_split(VaeModel& model, Device& device, Op op, const ChunkOptions& chunks,
                                  int64_t latent_height, int64_t latent_width);

// Parts of a run's output along time as one tensor: undefined when there are none (every frame went to
// ChunkOptions::emit).
torch::Tensor join_frames(std::vector<torch::Tensor>& parts);

}  // namespace vaecodec::core
