#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "core/causal_cache.h"
#include "core/planner.h"
#include "core/vae_model.h"

namespace vaecodec::core {

// Note [Tile blending]
// A tiled run cuts every chunk into the grid's tiles (TileGrid, in latent pixels), runs each tile through the
// model with the tile's own causal cache, and adds the tiles' outputs into the frame with weights. Along each
// axis a tile's weight is 1 in its interior and a raised-cosine ramp, 0.5 - 0.5 cos(pi (x + 0.5) / L), over
// the L pixels it shares with each neighbour; the weights of all tiles are then divided by their sum, so they
// add to exactly 1 everywhere, and a 2-D weight is the product of its row and column weights. Where two tiles
// overlap their ramps cross over smoothly, so neither tile's edge (where it saw zero padding instead of its
// neighbour's pixels) shows: no seam. The result is close to the untiled one, not equal: the tile's
// convolutions and the middle block's attention see less context near the tile's edges (docs/memory.md).
// Each tile's cache goes with the tile through time, so chunks of any length give the same tiled result.

// The blend weights of every tile, row-major, each [tile_height * scale, tile_width * scale] in float64 on the
// CPU; `scale` is the output's pixels per latent pixel (the spatial factor for decode, 1 for encode).
std::vector<torch::Tensor> blend_weights(const TileGrid& grid, int64_t scale);

// The tiles of a run, their caches and the blend (Note [Tile blending]). One model call per tile per chunk; the
// engine's EncodeRun/DecodeRun use it when ChunkOptions::tiles cuts the frame.
// With `offload`, a tile's cache waits in (pinned) host memory while the other tiles run.
class TileSet {
 public:
  enum class Direction { kEncode, kDecode };
  TileSet(VaeModel& model, TileGrid grid, Direction direction, bool offload);
  // x: one chunk of the whole frame, [B, C, t, H, W] (pixels for encode, latents for decode), any device.
  torch::Tensor run(const torch::Tensor& x);
  const TileGrid& grid() const { return grid_; }
  int64_t cache_bytes() const;  // every tile's cache, wherever it is

 private:
  struct Tile {
    int64_t row = 0, col = 0;  // origin, latent pixels
    CausalCache cache;
    torch::Tensor weight;  // [1, 1, 1, h, w] on the device in the accumulation dtype; undefined until needed
  };
  VaeModel& model_;
  TileGrid grid_;
  Direction direction_;
  bool offload_;
  std::vector<Tile> tiles_;
};

// The tiles for frames of latent_height x latent_width, or nullptr when `grid` does not cut them (a default
// grid means the whole frame). Throws when the grid was planned for another frame size.
std::unique_ptr<TileSet> make_tile_set(VaeModel& model, const TileGrid& grid, TileSet::Direction direction,
                                       bool offload, int64_t latent_height, int64_t latent_width);

}  // namespace vaecodec::core
