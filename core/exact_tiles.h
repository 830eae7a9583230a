#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <torch/torch.h>

#include "core/causal_cache.h"
#include "core/device/device.h"
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

// Frames or latents along time, in the pieces they came in: a window's input without one copy of it all.
class Pieces {
 public:
  void push(torch::Tensor t);
  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // [at, at + len) along time as one tensor: a view where it lies in one piece.
  torch::Tensor slice(int64_t at, int64_t len) const;
  // Removes the first n and returns them.
  Pieces take(int64_t n);

 private:
  std::vector<torch::Tensor> pieces_;
  int64_t size_ = 0;
};

// The exact tiles of one run.
class ExactTiles {
 public:
  enum class Direction { kEncode, kDecode };
  // grid: its rows and cols are the partition; chunk: latent frames per trunk call; host_window: the
  // window's frames (decode output, encode input) are kept in host memory; progress: ChunkOptions::progress.
  ExactTiles(VaeModel& model, Device& device, const TileGrid& grid, Direction direction, int64_t chunk,
             bool host_window, std::function<void(int64_t)> progress = {});
  ~ExactTiles();
  ExactTiles(const ExactTiles&) = delete;
  ExactTiles& operator=(const ExactTiles&) = delete;

  // One window: decode, latents [B, z, n, h, w]; encode, frames [B, 3, t, H, W] (the first window 1 + 4k
  // frames, later ones multiples of 4), any device. `more`: another window follows, so the tiles' caches are
  // kept (in host memory) until then. Returns the window's frames or latents.
  torch::Tensor run_window(const Pieces& x, bool more);
  // Where a window's input should wait while it fills: the model's device, or pinned host memory.
  torch::Tensor keep(const torch::Tensor& x) const;

 private:
  struct Tile {
    Area interior;  // latent pixels
    Area input;     // what its trunk reads: latent pixels (decode) or pixels (encode)
    CausalCache cache;
    bool parked = false;  // its cache is in host memory
  };
  torch::Tensor decode_window(const Pieces& z, bool more);
  torch::Tensor encode_window(const Pieces& x, bool more);
  void park(Tile& tile);
  void unpark(Tile& tile);
  torch::Tensor to_model(const torch::Tensor& x, bool convert_dtype) const;
  // Tells progress_ that `step` of `steps` tile chunks of a window of `frames` frames are done.
  void report(int64_t step, int64_t steps, int64_t frames) const;

  VaeModel& model_;
  Device& device_;
  TileGrid grid_;
  Direction direction_;
  int64_t chunk_;
  bool host_window_;
  std::vector<Tile> tiles_;
  CausalCache whole_;     // the whole-frame part's
  bool started_ = false;  // a window has run (encode: later chunks are multiples of the temporal factor)
  std::function<void(int64_t)> progress_;
  int64_t frames_done_ = 0;  // the frames of the windows done
};

}  // namespace vaecodec::core
