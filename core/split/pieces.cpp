#include "core/split/pieces.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace vaecodec::core {

void Pieces::push(torch::Tensor t) {
  if (t.size(2) == 0) return;
  size_ += t.size(2);
  const int64_t len = t.size(2);
  pieces_.push_back({std::move(t), nullptr, 0, len});
}

void Pieces::push(std::shared_ptr<const PackedFrames> packed) {
  const int64_t len = packed->frames();
  if (len == 0) return;
  size_ += len;
  pieces_.push_back({torch::Tensor(), std::move(packed), 0, len});
}

std::vector<Pieces::Piece> Pieces::over(int64_t at, int64_t len) const {
  if (at < 0 || len < 0 || at + len > size_) throw Error("a slice past the frames at hand");
  std::vector<Piece> parts;
  for (const Piece& p : pieces_) {
    if (at >= p.len) {
      at -= p.len;
      continue;
    }
    const int64_t take = std::min(len, p.len - at);
    Piece part = p;
    if (part.tensor.defined()) part.tensor = part.tensor.narrow(2, at, take);
    part.at += at;
    part.len = take;
    parts.push_back(std::move(part));
    len -= take;
    at = 0;
    if (len == 0) break;
  }
  return parts;
}

torch::Tensor Pieces::slice(int64_t at, int64_t len) const {
  std::vector<torch::Tensor> parts;
  for (const Piece& p : over(at, len)) {
    if (!p.tensor.defined()) throw Error("packed frames sliced as a tensor");
    parts.push_back(p.tensor);
  }
  return parts.size() == 1 ? parts.front() : torch::cat(parts, 2);
}

torch::Tensor Pieces::frames_on(int64_t at, int64_t len, torch::Device device,
                                torch::ScalarType dtype) const {
  std::vector<torch::Tensor> parts;
  for (const Piece& p : over(at, len)) {
    if (p.packed) {
      parts.push_back(p.packed->unpack(p.at, p.len, device, dtype));
      continue;
    }
    torch::Tensor frames = p.tensor;
    if (frames.device() != device) {  // Note [Windows in host memory] in core/split/exact_tiles.cpp
      const torch::Tensor time_major = frames.permute({0, 2, 1, 3, 4}).contiguous();
      frames = time_major.to(device, /*non_blocking=*/time_major.is_pinned()).permute({0, 2, 1, 3, 4});
    }
    parts.push_back(frames.to(dtype));
  }
  return parts.size() == 1 ? parts.front() : torch::cat(parts, 2);
}

Pieces Pieces::take(int64_t n) {
  Pieces head;
  std::vector<Piece> rest;
  for (Piece& p : pieces_) {
    const int64_t k = std::min(n, p.len);
    if (k > 0) {
      Piece first = p;
      if (first.tensor.defined()) first.tensor = first.tensor.narrow(2, 0, k);
      first.len = k;
      head.size_ += k;
      head.pieces_.push_back(std::move(first));
    }
    if (k < p.len) {
      Piece second = std::move(p);
      if (second.tensor.defined()) second.tensor = second.tensor.narrow(2, k, second.len - k);
      second.at += k;
      second.len -= k;
      rest.push_back(std::move(second));
    }
    n -= k;
  }
  pieces_ = std::move(rest);
  size_ -= head.size();
  return head;
}

}  // namespace vaecodec::core
