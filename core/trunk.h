#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/causal_cache.h"
#include "core/layers.h"
#include "core/reach.h"

namespace vaecodec::core {

// Note [Exact tiles]
// The Wan VAEs look at the whole frame only in their middle blocks (frame attention), which run at latent
// resolution. Everything at higher resolution - the decoder's up path after its middle, the encoder's down
// path before it: the trunk - is causal convolutions, per-pixel norms and per-pixel resamplers, so an output
// pixel depends only on the input pixels within a fixed distance of it: its reach. A tile that computes a
// margin around its interior as wide as that reach gets exactly the untiled values in its interior; the
// margin's own values are wrong near the cut (the convolutions saw zero padding there instead of the
// neighbour's pixels), and the error moves one pixel inward per 3x3 convolution, so the margin needed
// before a block is its own reach plus what the blocks after it need, mapped to its resolution. The trunk
// crops its activation to exactly that before every block (the margin shrinks layer by layer), and each
// tile keeps its own causal cache over those same extended areas: every chunk recomputes the same margins,
// so the reach does not grow through time, and tiles of any grid with chunks of any length give the untiled
// result. A cut at the frame's edge needs no margin: the zero padding there is the network's own.
// Per axis, for output pixels [a, b) of a block, its input must cover:
//   same resolution, margin m:                      [a - m, b + m)
//   2x up (nearest, then a 3x3 conv), margin m:     [floor(a/2) - 1 - m, ceil(b/2) + 1 + m)
//   2x down (zero row after, 3x3 stride 2), m:      [2a - m, 2b + 2 + m), both ends rounded to even
// (the stride's phase and the 2x2 averaging shortcuts of Wan2.2 keep their alignment), clipped to the frame.
// m counts the same-resolution pixels a block reads around its resampler (a Wan2.2 stage's residual blocks).

// Pixels [begin, end) along one axis.
struct Span {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const Span&) const = default;
};

// A rectangle of a frame: rows and columns.
struct Area {
  Span rows, cols;
  bool operator==(const Area&) const = default;
};

// The input span a block of `reach` needs for output span `out`, clipped to an input of `extent` pixels.
Span input_span(const Reach& reach, Span out, int64_t extent);
// The span a block of `reach` computes from input span `in` (its output covers it; near a cut only the part
// input_span asked for is right).
Span output_span(const Reach& reach, Span in);

// The blocks of a network's trunk (Note [Exact tiles]), in order, each with its reach; the blocks stay the
// model's.
class Trunk {
 public:
  // Adds `block` with its own reach; add_each adds every block of `sequence`, in order.
  void add(CausalModule* block);
  void add_each(const CausalSequence& sequence);
  // Whether every block is local (else tiles cannot run it at all).
  bool local() const;
  // Whether a block normalises over the whole frame (Reach::frame_norm): then tiles are not exact.
  bool frame_norms() const;
  // Output pixels per input pixel, as a power of two (decoder trunks: 8; encoder trunks: -8 means 1/8).
  int64_t scale() const;
  // The input area the trunk reads to compute `out` (output pixels) of a frame `height` x `width` input
  // pixels.
  Area input_area(Area out, int64_t height, int64_t width) const;
  // Runs the blocks over x (covering input_area(out, height, width)), cropping before each block to what the
  // rest needs; returns exactly `out`. `cache` is the tile's own.
  torch::Tensor run(const torch::Tensor& x, Area out, int64_t height, int64_t width,
                    CausalCache& cache) const;
  // The areas each block reads (input_area of the blocks from there on), and `out` last: for tests and the
  // planner's work estimate.
  std::vector<Area> areas(Area out, int64_t height, int64_t width) const;
  // The input extents (height, width) at each block, and the output's last.
  std::vector<std::pair<int64_t, int64_t>> extents(int64_t height, int64_t width) const;

 private:
  std::vector<CausalModule*> blocks_;
  std::vector<Reach> reaches_;
};

}  // namespace vaecodec::core
