#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "core/packed_frames.h"

namespace vaecodec::core {

// Frames or latents along time, in the pieces they came in: a window's input without one copy of it all.
// An encode's pieces may be packed frames (Note [Frames kept packed] in core/packed_frames.h).
class Pieces {
 public:
  void push(torch::Tensor t);
  void push(std::shared_ptr<const PackedFrames> packed);
  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // [at, at + len) along time as one tensor: a view where it lies in one piece, else a new tensor joined
  // at every call (an encode's tiles slice each chunk once apiece, so its callers push whole chunks,
  // encode_chunk_frames in core/chunk_options.h: the file pipeline's feeder and bench do). Tensors only.
  torch::Tensor slice(int64_t at, int64_t len) const;
  // Frames [at, at + len) on `device` in `dtype`, unpacked there where they came packed; a chunk in host
  // memory goes up in one dense copy (Note [Windows in host memory] in core/split/exact_tiles.cpp).
  torch::Tensor frames_on(int64_t at, int64_t len, torch::Device device, torch::ScalarType dtype) const;
  // Removes the first n and returns them.
  Pieces take(int64_t n);

 private:
  struct Piece {
    torch::Tensor tensor;                        // its frames, or undefined where packed
    std::shared_ptr<const PackedFrames> packed;  // [at, at + len) of these
    int64_t at = 0, len = 0;
  };
  // The pieces over [at, at + len), each cut to its share.
  std::vector<Piece> over(int64_t at, int64_t len) const;
  std::vector<Piece> pieces_;
  int64_t size_ = 0;
};

}  // namespace vaecodec::core
