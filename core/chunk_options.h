#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <torch/torch.h>

#include "core/place.h"
#include "core/plan_types.h"
#include "core/tile_grid.h"

namespace vaecodec::core {

// How a run splits a sequence in time and space. Chunks in time and bands across devices do not change the
// result; spatial tiles (Note [Tile blending] in core/split/blended_tiles.h) change it slightly. Memory and
// speed depend on all three.
struct ChunkOptions {
  int64_t latent_frames =
      1;                 // latent frames per chunk; an encode chunk is temporal_factor * this many frames
  TileGrid tiles;        // the default, or a grid that does not cut the frame, runs whole frames
  bool offload = false;  // tiles' caches wait in host memory while other tiles run (blended tiles); the whole
                         // frame's stream between its layers (resident_cache)
  // Exact tiles (tiles.exact: Note [Tiles through time] in core/split/exact_tiles.h): latent frames per
  // window, 0 for the whole clip in one window; and where the window waits (Plan::window_store).
  int64_t window = 0;
  WindowStore window_store = WindowStore::kDevice;
  // Two or more: the frame is split into these bands, top to bottom, each run by its place's model
  // (Note [Bands across devices] in core/band_exchange.h); the run's own model then only names the output's
  // device and the family. `tiles` may then cut the frame into blended columns (one row of tiles, no
  // offload): each band runs the same columns. Exact `tiles` are shared out among the places instead.
  std::vector<BandPlace> bands;
  // Told, each time a chunk (exact tiles: a tile's chunk) is done, the frames of the run done so far (a
  // decode's output frames, an encode's input frames, padding included), a window's share counted in its
  // tiles' chunks (a window's frames reach the caller only when it is done).
  std::function<void(int64_t frames)> progress;
  // Exact tiles, decode: where a window's frames go, in order, as they become final during its last tile
  // (Note [A window's edges stream] in core/split/exact_tiles.h), on the run's device (a window kept in host
  // memory goes back a few frames at a time); the run then returns nothing for them. Unset: they are
  // returned when the window is done.
  std::function<void(const torch::Tensor& frames)> emit;
  // With `emit`: the caller keeps 8 bits of each colour at most (an 8-bit video), so a window of tiles
  // through time in host memory may wait as 8-bit RGB, and `emit` gets the float32 values of its 8-bit frames
  // (Note [A window held in 8 bits] in core/split/eight_bit_window.h).
  bool emit_8bit = false;
  // Where the chunks run, as the plan names it (Plan::split); make_split refuses options that do not fit it
  // (tiles that cut the frame for kWhole, fewer than two bands for kBands, tiles not through time for
  // kExactTiles).
  SplitKind kind = SplitKind::kWhole;
  // The whole frame with `offload`: the cache's bytes kept on the device; the rest streams slot by slot
  // (Note [Caches streamed slot by slot] in core/split/cache_stream.h).
  int64_t resident_cache = 0;

  // A plan's chunks and tiles, split across `bands` when there are two or more.
  static ChunkOptions of(const Plan& plan, std::vector<BandPlace> bands = {}) {
    return {plan.chunk, plan.tiles, plan.offload, plan.window, plan.window_store,  std::move(bands),
            {},         {},         false,        plan.split,  plan.resident_cache};
  }
};

// Frames of an encode chunk of `latent_frames` latent frames: the clip's first chunk is one frame shorter,
// frame 0 being a group of its own (Note [Chunks] in core/engine.cpp). Whoever pushes frames a chunk at a
// time pushes these lengths.
inline int64_t encode_chunk_frames(int64_t temporal_factor, int64_t latent_frames, bool first) {
  return first ? 1 + temporal_factor * (latent_frames - 1) : temporal_factor * latent_frames;
}

}  // namespace vaecodec::core
