#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "core/device/device.h"
#include "core/trunk.h"

// What the two halves of ExactTiles (exact_tiles.cpp, its decode; exact_tiles_encode.cpp, its encode) share.
namespace vaecodec::core {

// Frames [frame, frame + frames) of x ([B, C, T, H, W]) within `area` (rows, columns).
torch::Tensor crop(const torch::Tensor& x, int64_t frame, int64_t frames, const Area& area);

// Chunk lengths over `n` units, `first` for the first and `later` after.
std::vector<int64_t> chunk_lengths(int64_t n, int64_t first, int64_t later);

// A tile's output gathered on `device` (a window's frames or features), in host memory once this returns, for
// a worker to put in place: copied into pinned memory on a GPU (its current stream waited for), itself on
// the CPU.
torch::Tensor to_host_now(const torch::Tensor& t, const Device& device);

}  // namespace vaecodec::core
