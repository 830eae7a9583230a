#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <torch/torch.h>

#include "core/causal_cache.h"
#include "core/device/device.h"
#include "core/op.h"
#include "core/place.h"
#include "core/plan_types.h"
#include "core/split/eight_bit_window.h"
#include "core/split/parking.h"
#include "core/split/pieces.h"
#include "core/split/places.h"
#include "core/split/split.h"
#include "core/split/whole_frame_bands.h"
#include "core/tile_grid.h"
#include "core/trunk.h"
#include "core/vae_model.h"

namespace vaecodec::core {

// Note [Tiles through time]
// Exact tiles (Note [Exact tiles] in core/trunk.h) run tile by tile through a window of chunks, not chunk by
// chunk through the tiles. For a window:
//   decode: the whole-frame part (latent normalisation, conv1, the middle with its attention) runs over the
//           window's latents chunk by chunk with the run's own cache, into one tensor of features at latent
//           resolution on the device; then each tile in turn runs its trunk over every chunk of the window
//           with only its own causal cache on the device, and writes its interior into the window's frames;
//   encode: each tile in turn runs its trunk over the window's frames into the window's features; then the
//           whole-frame part makes the latents.
// A tile's cache is made at its first chunk and dropped after its last: when the window is the whole clip no
// cache ever leaves the device and only one tile's is there at a time. Longer clips run in several windows,
// and between two windows every tile's cache waits in host memory (the only copies of caches). The window's
// frames stay on the device, or in host memory where the plan says so (`host_window`), and go to the caller
// when the window is done. Exact tiles are a partition of the frame (TileGrid::part): nothing is blended.
// A decoder that looks ahead holds frames back in the whole-frame part's cache and in every tile's, across
// windows, and the window that ends the clip ends them all (Note [Held-back frames of exact tiles] in
// exact_tiles.cpp).

// Note [Norms of tiles through time]
// SeedVR2's convolutions are local but its GroupNorms take their statistics over the whole frame (Note
// [SeedVR2 GroupNorm per frame]), which no tile sees. Its tiles still run through time as exact ones do, and
// differ in three ways (TileGrid::through_time without `exact`):
//   - what runs on the whole frame runs there: the decoder's conv_in, middle (with its attention) and first
//     up block's resnets, the encoder's last down block's resnets, middle and head - everything at latent
//     resolution - so their norms and the attention see the whole frame, exactly;
//   - the tiles are cover()'s, overlapping by `overlap` latent pixels, and blended in the overlaps with
//     Note [Tile blending]'s weights (decode: the frames; encode: the features), since two tiles' norms
//     differ slightly and a partition would show the difference as a seam;
//   - each tile's trunk computes its tile plus `context` latent pixels on every side (clipped to the frame),
//     which it does not write: only for its norms' statistics. With the trunk's own margins (Note [Exact
//     tiles]) the convolutions are exact over all of that, so nothing at a tile's cut creeps inward through
//     time; what remains inexact is the statistics alone.
// So every norm of a tile's trunk takes its statistics, per frame and group, over the tile, its context and
// the margin its block needs, at that block's resolution: the larger the tiles and the context, the closer to
// the whole frame (tests/test_norm_tiles.cpp measures it). The result does not depend on the chunk or the
// window (a frame's statistics are its own), and each tile carries its own cache through time.

// Note [Crop tiles]
// A second way to tile a family whose norms see the frame (TileGrid::crop): each tile runs the whole model -
// latent-resolution blocks, attention and all - on its crop alone, the tile and `context` latent pixels
// around it (clipped to the frame), with its own causal cache through time, as a model of that frame size
// would; what it computes outside its tile is dropped, and the tiles blend in their overlaps as Note [Norms
// of tiles through time]'s do. Every norm (and the middle's attention) sees the crop, at every resolution;
// nothing runs on the whole frame, so there is no whole-frame part, no whole-frame cache and no features
// between the two: a decode tile reads the window's latents, an encode tile writes latents. At the crop's
// cut the convolutions see the zero padding of a smaller frame, and the context moves that cut away from
// what the tile writes. Against Note [Norms of tiles through time]'s split (the whole frame's statistics at
// latent resolution, the tile's above it) the statistics are one crop's throughout: on a trained SeedVR2 the
// decode's tiles come 3-4x closer to the untiled decode (docs/benchmarks.md, "crop tiles"), and what a
// tile's norms see no longer depends on the resolution of the block.

// Note [A window's edges stream]
// Tile by tile through a window serialises a file's pipeline: the encoder would wait until the window's last
// frame was read, and the writer would get nothing until the decoder's last tile is done. Two edges of the
// window need not wait, and do not:
//   encode: the window's first tile (the lead) runs each of its chunks as soon as the chunk's frames have
//   come
//           (advance(), from push()), so its work overlaps the reading of the rest of the window;
//   decode: during the window's last tile, the frames of each chunk it finishes are final (every other tile
//           wrote them already), and they go to the caller's `emit` at once, so the writer encodes while the
//           last tile runs.
// Neither changes what is computed: the lead's chunks are the window's own (every chunk but the last has
// the full length, so a chunk that is complete when it runs is the chunk the window would have cut), and an
// emitted frame is the one the window would have returned.

// Note [Exact tiles across devices]
// A clip split across devices whose bands do not fit whole (Note [Planning bands] in io/run_plan.cpp) runs
// the one-device plan's exact tiles instead of blended columns, shared out among the devices by their work
// (places_by_work: a tile's computed area times VaeModel::tile_work, the largest first to the least loaded
// place; tiles at the frame's edges have narrower margins and cost less), every place with its own model and
// on its own thread, each running its tiles one after the other through the window as one device would. The
// whole-frame part runs in bands across the same places (Note [Whole-frame part in bands] in
// core/split/whole_frame_bands.h): each place runs its latent rows of the window, with its own whole-frame
// cache, the bands exchanging halo rows and attention keys and values in step, and the bands' features
// (decode) or latents (encode) are joined on the run's own device. The window's features and frames are there
// (or in host memory); a place reads the features from there and writes its tiles' interiors back. Tiles are
// independent of one another, so the tiles' output is the one-device output bit for bit, and the whole-frame
// part's equals it up to the order in which the attention adds (exact in the CPU tests' float64); every
// device holds at most what the one-device plan holds. With several places a window's frames are handed over
// when the window is done, and no tile runs ahead of its window (Note [A window's edges stream] needs one
// place).

// The place of each job when jobs of these works are shared out among `places` (Note [Exact tiles across
// devices]): the largest first, each to the place with the least work so far (the first of equals), so that
// the most loaded place ends as early as a greedy choice can make it; equal works go round the places in
// order.
std::vector<size_t> places_by_work(const std::vector<double>& works, size_t places);

// The exact tiles of one run: the split of a run whose plan runs tiles through time (SplitKind::
// kExactTiles). Frames wait until a window is full, its first tile running ahead over the chunks that
// have come (Note [A window's edges stream]).
class ExactTiles : public Split {
 public:
  // What the caller is told as the tiles go (ChunkOptions' fields of the same names).
  struct Hooks {
    std::function<void(int64_t)> progress;           // frames done so far, as each tile finishes a chunk
    std::function<void(const torch::Tensor&)> emit;  // decode: frames as they become final, in order
    // Decode with `emit`: the caller keeps 8 bits of each colour at most, so a window in host memory waits
    // as 8-bit RGB (Note [A window held in 8 bits] in core/split/eight_bit_window.h). (No initialiser: the
    // constructor's default argument needs Hooks complete; `{}` makes it false.)
    bool emit_8bit;
  };
  // grid: its rows and cols are the partition; chunk: latent frames per trunk call; window: latent frames
  // per window, 0 for the whole clip; store: where the window waits (Plan::window_store): its frames (decode
  // output, encode input) in host memory, and a decode's features too (tiles that are not exact). places:
  // two or more share the tiles out (Note [Exact tiles across devices]); else they run on `model`.
  ExactTiles(VaeModel& model, Device& device, const TileGrid& grid, Op op, int64_t chunk, int64_t window,
             WindowStore store, Hooks hooks = {}, std::vector<BandPlace> places = {});
  ~ExactTiles() override;
  ExactTiles(const ExactTiles&) = delete;
  ExactTiles& operator=(const ExactTiles&) = delete;
  // Decode: latents [B, z, n, h, w]; encode: frames [B, 3, t, H, W], any device. Returns the windows they
  // complete (a window runs once a frame past it has come); with Hooks::emit, a decode window's frames go
  // there instead and nothing is returned.
  torch::Tensor push(const torch::Tensor& x) override;
  // Encode with the window in host memory: frames kept as they came (Note [Frames kept packed]).
  torch::Tensor push_packed(std::shared_ptr<const PackedFrames> x) override;
  torch::Tensor finish() override;  // the last window
  int64_t cache_bytes() const override;

 private:
  // One window: decode, latents [B, z, n, h, w]; encode, frames [B, 3, t, H, W] (the first window 1 + 4k
  // frames, later ones multiples of 4), any device. `more`: another window follows, so the tiles' caches are
  // kept (in host memory) until then. Returns the window's frames or latents; with Hooks::emit, a decode
  // window's frames go there instead and nothing is returned.
  torch::Tensor run_window(const Pieces& x, bool more);
  // Encode: runs the windows the frames pending complete, and the lead over the rest.
  torch::Tensor run_encode_windows();
  // Encode: runs the window's first tile over the chunks of `x` (the window's frames so far) that are
  // complete, up to `limit` frames (the window's length; 0: open-ended), before the window is run
  // (Note [A window's edges stream]).
  void advance(const Pieces& x, int64_t limit);
  // Where a window's input should wait while it fills: the model's device, or pinned host memory.
  torch::Tensor keep(const torch::Tensor& x) const;

  struct Tile {
    Area interior;  // what it writes, latent pixels
    Area computed;  // what its trunk computes: the interior and its norms' context (latent pixels)
    Area input;     // what its trunk (crop tiles: the model) reads: latent pixels (decode) or pixels (encode)
    torch::Tensor weight;  // blended tiles: the blend weights of the interior as the output has it
    CausalCache cache;
    CacheParking parking{/*pinned=*/false};  // its cache's copies to host memory (Note [Offloaded caches])
    BandPlace place;                         // where it runs
  };
  torch::Tensor decode_window(const Pieces& z, bool more);
  torch::Tensor encode_window(const Pieces& x, bool more);
  // Decode: `mine` (the tiles of one place) over the window's `features` (on their place's device) in
  // `chunks`, each writing its interior into `out`, and each ending its trunk when the window ends the clip
  // (not `more`); with `emit_last`, the last hands its frames on as it goes.
  void decode_tiles(const std::vector<Tile*>& mine, const torch::Tensor& features,
                    const std::vector<int64_t>& chunks, torch::Tensor& out, bool more, bool emit_last);
  // Encode: `mine` over the window `x` from chunk `first` on, each chunk's features to place(tile, y, at).
  void encode_tiles(const std::vector<Tile*>& mine, const Pieces& x, const std::vector<int64_t>& chunks,
                    bool more, const std::function<void(const Tile&, const torch::Tensor&, int64_t)>& place);
  // Runs run(place's tiles) for each place on its worker (Note [Places]), its device current; rethrows the
  // first failure once all are done.
  void on_places(const std::function<void(const std::vector<Tile*>&)>& run);
  void park(Tile& tile);
  void unpark(Tile& tile);
  // A trunk's output over tile.computed cut to its interior (`scale` output pixels per latent pixel) and,
  // blended, weighted.
  torch::Tensor written(const Tile& tile, const torch::Tensor& y, int64_t scale) const;
  // The output pixels `tile` writes (a decode's).
  Area pixels_of(const Tile& tile) const;
  // Puts `values` (from written()) into `region`: copied, or added where the tiles blend.
  void put(const torch::Tensor& region, const torch::Tensor& values) const;
  // Encode: `tile`'s trunk over frames [at, at + len) of the window `x`.
  torch::Tensor encode_chunk(Tile& tile, const Pieces& x, int64_t at, int64_t len);
  // The first encode chunk of a window in frames, and every later one.
  int64_t first_chunk_frames() const;
  int64_t later_chunk_frames() const;
  // Hands decoded frames to Hooks::emit on the run's device: a window kept in host memory goes back a few
  // frames at a time (to be converted where the model ran, as every other split's frames are); 8-bit ones
  // as the float32 values they stand for.
  void emit(const torch::Tensor& frames) const;
  // Counts a tile chunk of the window done and, with `report`, tells Hooks::progress (from any place's
  // thread; the lead's chunks were told when they ran).
  void count_step(bool report = true);

  VaeModel& model_;
  Device& device_;
  TileGrid grid_;
  Op op_;
  bool crop_;  // crop tiles for this op (Note [Crop tiles])
  int64_t chunk_;
  int64_t window_;  // latent frames per window; 0: the whole clip
  bool host_window_;
  bool host_features_;
  // A decode window waits as 8-bit RGB (Note [A window held in 8 bits]): in host memory, emitted, one place.
  bool eight_bit_ = false;
  std::unique_ptr<EightBitWindow> eight_;  // the window in hand, when 8-bit
  std::vector<BandPlace> places_;          // one, or those sharing the tiles out
  std::unique_ptr<Places> workers_;        // with several places: one worker each
  std::vector<Tile> tiles_;
  std::unique_ptr<WholeFrameBands> whole_;  // the whole-frame part, with its caches; null for crop tiles
  Pieces pending_;                          // the frames of the window being filled
  int64_t windows_ = 0;                     // encode: windows run
  int64_t latents_ = 0;                     // decode: the latent frames of the windows run
  bool started_ = false;  // a window has run (encode: later chunks are multiples of the temporal factor)
  Hooks hooks_;
  int64_t frames_done_ = 0;  // the frames of the windows done
  // The window in hand's tile chunks done (guarded by step_mutex_, counted by any place's thread) and in
  // all, and its frames.
  int64_t step_ = 0, steps_ = 0, window_frames_ = 0;
  std::mutex step_mutex_;
  struct Lead {                           // encode: the window's first tile, run ahead by advance()
    int64_t frames = 0;                   // the window's frames it has run through
    std::vector<torch::Tensor> features;  // its output, chunk by chunk
  } lead_;
};

}  // namespace vaecodec::core
