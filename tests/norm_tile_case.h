#pragma once

// The case SeedVR2's tile tests share (tests/test_norm_tiles.cpp, tests/test_crop_tiles.cpp): the tiny model
// in float32 on the CPU, frames of 24 x 16 latent pixels (192 x 128 pixels), 5 frames (2 latent frames) - the
// model's full-resolution layers make larger or float64 runs take tens of seconds on two cores - and 1x2
// tiles of 14x16 latent pixels sharing 4.

#include <memory>

#include "core/engine.h"
#include "tests/tiny_models.h"

namespace vaecodec::test::tile_case {

constexpr int64_t kRows = 16, kCols = 24, kFrames = 5;
constexpr core::TileSize kTile{kRows, 14};
constexpr int64_t kOverlap = 4;

inline std::shared_ptr<core::VaeModel> tiny_seedvr2() {
  return load_tiny(tiny_model("seedvr2-vae"), torch::kCPU, torch::kFloat);
}

// The blended tiles of before (BlendedTiles) on the case's grid: every tile runs the whole model on its own
// pixels, chunk by chunk.
inline core::ChunkOptions blended_tiles() {
  core::ChunkOptions o;
  o.tiles = core::TileGrid::cover(kRows, kCols, kTile, kOverlap);
  o.kind = core::SplitKind::kBlendedTiles;
  return o;
}

}  // namespace vaecodec::test::tile_case
