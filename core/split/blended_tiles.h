#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "core/causal_cache.h"
#include "core/device/device.h"
#include "core/op.h"
#include "core/split/parking.h"
#include "core/split/split.h"
#include "core/tile_grid.h"
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

// The blend weights of every tile, row-major, each [tile_height * scale, tile_width * scale] in float64 on
// the CPU; `scale` is the output's pixels per latent pixel (the spatial factor for decode, 1 for encode).
std::vector<torch::Tensor> blend_weights(const TileGrid& grid, int64_t scale);

// The weighted sum of a chunk's tile outputs into the frame (Note [Tile blending]), on `device`, in float64
// for a float64 model and in float32 otherwise. Tiles are added in the order given; the same order gives the
// same bits, whichever device each tile ran on.
class TileBlend {
 public:
  // scale: output pixels per latent pixel; model_dtype: the model's compute dtype.
  TileBlend(const TileGrid& grid, int64_t scale, torch::Device device, torch::ScalarType model_dtype);
  // Adds tile `index`'s output (row-major index, [B, C, t, h, w] in output pixels, any device).
  void add(size_t index, const torch::Tensor& out);
  // The frame in the dtype of the tiles' outputs; starts the next chunk's sum.
  torch::Tensor take();

 private:
  TileGrid grid_;
  int64_t scale_;
  std::vector<torch::Tensor> weights_;  // [1, 1, 1, h, w] each, on the device in the sum's dtype
  torch::ScalarType sum_dtype_;
  torch::Tensor sum_;
  torch::ScalarType out_dtype_ = torch::kFloat;
};

// The tiles of a run, their caches and the blend (Note [Tile blending]): the split of a run whose
// ChunkOptions::tiles cuts the frame and does not run through time. One model call per tile per chunk. With
// `offload`, a tile's cache waits in (pinned) host memory while the other tiles run (Note [Offloaded
// caches]).
class BlendedTiles : public ChunkedSplit {
 public:
  // chunk: latent frames per chunk.
  BlendedTiles(VaeModel& model, Device& device, TileGrid grid, Op op, bool offload, int64_t chunk);
  ~BlendedTiles() override;
  BlendedTiles(const BlendedTiles&) = delete;
  BlendedTiles& operator=(const BlendedTiles&) = delete;
  int64_t cache_bytes() const override;  // every tile's cache, wherever it is

 private:
  torch::Tensor run_chunk(const torch::Tensor& x) override;
  // Decode: every tile's held-back frames, blended (Note [Held-back frames of a split]).
  torch::Tensor end() override;
  // Tile i's model call `call` on the tile's cache, the cache on the device while it runs (offload).
  torch::Tensor run_tile(size_t i, const std::function<torch::Tensor(CausalCache&)>& call);

  struct Tile {
    int64_t row = 0, col = 0;  // origin, latent pixels
    CausalCache cache;
    CacheParking parking;  // offloaded on a CUDA device: the cache's copies (Note [Offloaded caches])
  };

  VaeModel& model_;
  Device& device_;  // where the model runs: its compute stream and the caches' copy streams
  TileGrid grid_;
  bool offload_;
  std::vector<Tile> tiles_;
  std::unique_ptr<TileBlend> blend_;  // made at the first chunk
  Tile* leaving_ = nullptr;           // the tile whose download was queued last
};

// `grid` for frames of latent_height x latent_width: a default grid is the whole frame. Throws when the grid
// was planned for another frame size.
TileGrid resolve_grid(const TileGrid& grid, int64_t latent_height, int64_t latent_width);

}  // namespace vaecodec::core
