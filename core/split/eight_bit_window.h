#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "core/device/device.h"
#include "core/trunk.h"

namespace vaecodec::core {

// Note [A window held in 8 bits]
// A decode's tiles through time finish a frame only when the last tile has passed over it, so the window's
// frames wait in host memory until then (Note [Tiles through time] in core/split/exact_tiles.h): at 4K x81
// in bf16 that is 3.75 GiB, in one pinned block rounded up to 4 GiB, and two tiles' frames on their way in
// beside it - the largest part of a file decode's host memory. Where the caller keeps 8 bits of each colour
// at most (an 8-bit video: ChunkOptions::emit_8bit), the window waits as 8-bit RGB in paged memory
// instead (1.9 GiB at 4K x81), and one tile's 8-bit frames at a time come down to it in a buffer of their
// exact size.
// A value is quantised as an 8-bit RGB writer quantises (core/rgb_codes.h, which io/colour.cpp writes with):
// round(255 clamp((x + 1) / 2, 0, 1)) in float32, from the value the window in the model's dtype would have
// held. So the frames handed on are that window's, rounded to 8 bits, and go on as the float32 values 2 q /
// 255 - 1 they stand for: an 8-bit RGB output is bit for bit what it was; an 8-bit Y'CbCr one is converted
// from the 8-bit RGB, one rounding more (at most a code value), and RGB beyond the cube is clipped there
// (Note [Colour] in io/colour.h). Only tiles that blend (SeedVR2's: Note [Norms of tiles through time]) hold
// their window so: their frames differ from the untiled run's by far more than one rounding (relative L2
// 0.09-0.12 on the trained SeedVR2, docs/benchmarks.md, "SeedVR2's crop tiles"), while exact tiles keep the
// model's dtype, so that a tiled file is the untiled file. Where tiles blend a pixel is final only once every
// tile covering it has added to it. The frame is cut into cells by every tile's edges: a cell of one tile is
// quantised on the device before it comes down; a cell two or more tiles share is summed in the model's dtype
// in host memory, each tile adding its weighted frames in the order the tiles run, as the window of that
// dtype adds them, and quantised as its last tile adds its frames, then dropped. Only the overlap bands wait
// wide, each for as long as its tiles run. During the last tile, the frames it hands on give their memory
// back as they go, while the video encoder's own frames grow (x264 fills its pool of frames over the first
// few dozen).
class EightBitWindow {
 public:
  // sizes: the window's frames [B, 3, T, H, W]; dtype: the model's (the dtype the window would have);
  // areas: the pixels each tile writes, in the order the tiles run; blended: tiles add where they overlap
  // (else the areas are a partition).
  EightBitWindow(std::vector<int64_t> sizes, torch::ScalarType dtype, std::vector<Area> areas, bool blended);

  // A tile's frames on their way into the window, in host memory.
  struct Down {
    size_t tile = 0;
    int64_t at = 0, frames = 0;
    torch::Tensor own;                  // its area quantised [B, 3, n, h, w]
    std::vector<torch::Tensor> shared;  // its values in each cell it shares, in cells_of(tile)'s order
  };
  // Tile `tile`'s frames [at, at + n) of its area, `values` [B, 3, n, h, w] as a window of the model's dtype
  // would take them (weighted where tiles blend), on `device`: quantised there where the tile is alone,
  // brought to host memory (page-locked on a GPU, the stream waited for).
  Down bring_down(size_t tile, int64_t at, const torch::Tensor& values, const Device& device) const;
  // Puts what came down in place. One at a time, in the order the tiles run (a tile's frames in order).
  void place(const Down& down);
  // Frames [at, at + n), 8-bit RGB [B, 3, n, H, W] in host memory; final once every tile covering them has
  // placed them.
  torch::Tensor frames(int64_t at, int64_t n) const { return window_.narrow(2, at, n); }
  int64_t size() const { return window_.size(2); }
  // Frames [0, upto) are handed on and no longer read: their host memory goes back to the system (the
  // window is stored time-major, so they are its first bytes; one clip at a time, B = 1).
  void release(int64_t upto);
  // The window's host bytes now: the frames and the sums of shared cells.
  int64_t bytes() const;

  // x (any float dtype) as the window of `dtype` would hold it, quantised as above, where x is.
  static torch::Tensor quantise(const torch::Tensor& x, torch::ScalarType dtype);
  // 8-bit RGB -> the float32 values it stands for, where q is.
  static torch::Tensor expand(const torch::Tensor& q);

 private:
  struct Cell {
    Area area;                  // pixels of the frame
    std::vector<size_t> tiles;  // the tiles covering it, in the order they run
    torch::Tensor sum;          // shared cells: the tiles' values so far [B, 3, T, h, w]
  };
  // The cells `tile` covers, in cells_'s order.
  std::vector<size_t> cells_of(size_t tile) const;
  // `cell`'s part of a tensor over tile `tile`'s area.
  torch::Tensor in_tile(const torch::Tensor& x, size_t tile, const Cell& cell) const;

  torch::ScalarType dtype_;
  std::vector<Area> areas_;
  std::vector<Cell> cells_;
  torch::Tensor window_;  // uint8 [B, 3, T, H, W], a view of [B, T, 3, H, W]
  int64_t released_ = 0;  // frames whose memory went back
};

}  // namespace vaecodec::core
