#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include <torch/torch.h>

#include "core/band_set.h"
#include "core/causal_cache.h"
#include "core/device/device.h"
#include "core/planner.h"
#include "core/vae_model.h"

namespace vaecodec::core {

class TileSet;
class ExactTiles;
class Pieces;

// How a run splits a sequence in time and space. Chunks in time and bands across devices do not change the
// result; spatial tiles (Note [Tile blending] in core/tiling.h) change it slightly. Memory and speed depend
// on all three.
struct ChunkOptions {
  int64_t latent_frames =
      1;                 // latent frames per chunk; an encode chunk is temporal_factor * this many frames
  TileGrid tiles;        // the default, or a grid that does not cut the frame, runs whole frames
  bool offload = false;  // tiles' caches wait in host memory while other tiles run (blended tiles)
  // Exact tiles (tiles.exact: Note [Tiles through time] in core/exact_tiles.h): latent frames per window, 0
  // for the whole clip in one window; and whether the window's frames wait in host memory.
  int64_t window = 0;
  bool host_window = false;
  // Two or more: the frame is split into these bands, top to bottom, each run by its place's model
  // (Note [Bands across devices] in core/band_exchange.h); the run's own model then only names the output's
  // device and the family. `tiles` may then cut the frame into blended columns (one row of tiles, no
  // offload): each band runs the same columns. Exact `tiles` are shared out among the places instead.
  std::vector<BandPlace> bands;
  // Exact tiles: told, each time a tile finishes a chunk, the frames of the run done so far (a decode's
  // output frames, an encode's input frames), a window's share counted in its tiles' chunks. A window's
  // frames reach the caller only when it is done; this keeps a progress line moving meanwhile.
  std::function<void(int64_t frames)> progress;
  // Exact tiles, decode: where a window's frames go, in order, as they become final during its last tile
  // (Note [A window's edges stream] in core/exact_tiles.h); DecodeRun then returns nothing for them. Unset:
  // they are returned when the window is done.
  std::function<void(const torch::Tensor& frames)> emit;

  // Whether the run goes through windows of tiles through time (Note [Tiles through time]): exact tiles or
  // SeedVR2's blended ones (Note [Norms of tiles through time]) that cut the frame, or a window of a whole
  // frame; with bands, exact tiles are shared out among their places (Note [Exact tiles across devices] in
  // core/exact_tiles.h) instead of splitting the frame in bands.
  bool runs_through_time() const { return tiles.through_time && (tiles.tiled() || window != 0); }

  // A plan's chunks and tiles, split across `bands` when there are two or more.
  static ChunkOptions of(const Plan& plan, std::vector<BandPlace> bands = {}) {
    return {plan.chunk, plan.tiles, plan.offload, plan.window, plan.host_window, std::move(bands), {}, {}};
  }
};

// Streams a video through the encoder. Push frames as they arrive (any number at a time); the run cuts them
// into chunks of the model's shape and returns whatever latent frames are complete. frames: [B, 3, t, H, W]
// in [-1, 1], any device and float dtype; moved to the model's device and dtype here. The frame count over
// the whole run must be 1 + temporal_factor * k (the I/O layer pads it).
class EncodeRun {
 public:
  EncodeRun(VaeModel& model, Device& device, ChunkOptions chunks = {});
  ~EncodeRun();
  torch::Tensor push(const torch::Tensor& frames);  // latents completed by this call, [B, z, n, h, w], n >= 0
  torch::Tensor finish();                           // what is left; throws if the frame count was not 1 + 4k
  int64_t frames_in() const { return frames_in_; }

 private:
  torch::Tensor run_chunk(const torch::Tensor& frames);
  torch::Tensor push_window(const torch::Tensor& frames);

  VaeModel& model_;
  Device& device_;  // the model's
  ChunkOptions chunks_;
  CausalCache cache_;
  std::unique_ptr<TileSet> tiles_;     // made at the first push when chunks_.tiles cuts the frame
  std::unique_ptr<ExactTiles> exact_;  // the same for exact tiles
  std::unique_ptr<Pieces> window_;     // exact tiles: the frames of the window being filled
  std::unique_ptr<BandSet> bands_;     // made at the first push when chunks_.bands splits the frame
  torch::Tensor pending_;              // frames waiting for a full chunk (exact tiles: a full window)
  int64_t frames_in_ = 0;
  int64_t windows_ = 0;  // exact tiles: windows run
};

// Streams latents through the decoder; returns video frames [B, 3, t, H, W] (unclamped, model dtype, model
// device) as chunks complete, or hands them to ChunkOptions::emit (exact tiles).
class DecodeRun {
 public:
  DecodeRun(VaeModel& model, Device& device, ChunkOptions chunks = {});
  ~DecodeRun();
  torch::Tensor push(const torch::Tensor& latents);
  torch::Tensor finish();

 private:
  torch::Tensor run_chunk(const torch::Tensor& latents);
  torch::Tensor push_window(const torch::Tensor& latents);

  VaeModel& model_;
  Device& device_;  // the model's
  ChunkOptions chunks_;
  CausalCache cache_;
  std::unique_ptr<TileSet> tiles_;
  std::unique_ptr<ExactTiles> exact_;
  std::unique_ptr<Pieces> window_;
  std::unique_ptr<BandSet> bands_;
  torch::Tensor pending_;
  int64_t latents_in_ = 0;
};

// Whole-sequence helpers over the runs above, on the model's device.
torch::Tensor encode_video(VaeModel& model, const torch::Tensor& video, ChunkOptions chunks = {});
torch::Tensor decode_latents(VaeModel& model, const torch::Tensor& latents, ChunkOptions chunks = {});

}  // namespace vaecodec::core
