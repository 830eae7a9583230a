#include "core/split/exact_tiles.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <c10/cuda/CUDAStream.h>

#include "core/chunk_options.h"
#include "core/device/memory_faults.h"
#include "core/layers.h"
#include "core/split/exact_tiles_parts.h"

// ExactTiles' encode: a window's tiles through its chunks, then its whole-frame part (the decode is in
// exact_tiles.cpp).
namespace vaecodec::core {

int64_t ExactTiles::first_chunk_frames() const {
  return encode_chunk_frames(model_.info().temporal_factor, chunk_, /*first=*/!started_);
}

int64_t ExactTiles::later_chunk_frames() const {
  return encode_chunk_frames(model_.info().temporal_factor, chunk_, /*first=*/false);
}

void ExactTiles::advance(const Pieces& x, int64_t limit) {
  if (op_ != Op::kEncode || places_.size() > 1) return;
  torch::InferenceMode guard;
  const int64_t available = limit > 0 ? std::min(x.size(), limit) : x.size();
  Tile& tile = tiles_.front();
  while (true) {
    const int64_t len = lead_.features.empty() ? first_chunk_frames() : later_chunk_frames();
    if (lead_.frames + len > available) return;
    if (lead_.features.empty()) unpark(tile);
    lead_.features.push_back(encode_chunk(tile, x, lead_.frames, len));
    lead_.frames += len;
    // Counted as encode_window counts a tile's chunk (the window's chunks are not all known yet).
    if (hooks_.progress) hooks_.progress(frames_done_ + lead_.frames / static_cast<int64_t>(tiles_.size()));
  }
}

torch::Tensor ExactTiles::encode_chunk(Tile& tile, const Pieces& x, int64_t at, int64_t len) {
  before_model_call();
  const torch::Device where = tile.place.device->torch_device();
  torch::Tensor frames = x.slice(at, len);
  if (frames.device() != where) {  // Note [Windows in host memory]
    const torch::Tensor time_major = frames.permute({0, 2, 1, 3, 4}).contiguous();
    frames = time_major.to(where, /*non_blocking=*/time_major.is_pinned()).permute({0, 2, 1, 3, 4});
  }
  const torch::Tensor input = to_place(crop(frames, 0, len, tile.input), tile.place, true);
  VaeModel& model = *tile.place.model;
  return written(
      tile,
      crop_ ? model.encode(input, tile.cache)  // Note [Crop tiles]
            : model.encode_tile(input, tile.cache, tile.computed, grid_.latent_height, grid_.latent_width),
      1);
}

// Note [An encode window's features in host memory]
// An encode window's features (the tiles' output, the whole-frame part's input: 512 channels at latent
// resolution for SeedVR2, 2.6 GiB for 4K x81 in bf16, most of an 8 GB plan) wait on the device unless the
// plan keeps them in host memory (Plan::host_features: tiles through time that are not exact, SeedVR2's,
// where nothing else fits). Then each tile's features for the window gather on the device as it runs, in the
// dtype the tile writes them (so that blending adds the same numbers it adds on the device), go down in one
// copy when the tile is done, and are put into the window's features by a worker thread while the next tile
// runs (one at a time: blended tiles add into what they share). The window's features are stored time-major,
// so that each chunk of the whole-frame part goes up in one dense copy. The device holds one tile's features;
// host memory the window's and two tiles' (the planner counts both). The result is the device run's.
torch::Tensor ExactTiles::encode_window(const Pieces& x, bool more) {
  const int64_t tf = model_.info().temporal_factor;
  const int64_t t = x.size();
  const std::vector<int64_t> chunks = chunk_lengths(t, first_chunk_frames(), later_chunk_frames());
  const int64_t latent = started_ ? t / tf : 1 + (t - 1) / tf;
  const bool cuda = device_.torch_device().is_cuda();
  torch::Tensor features;
  std::mutex placing;  // places' threads put their tiles' features into `features`
  auto make = [&](const torch::Tensor& y) {
    // Blended tiles add into the features in the model's dtype (Note [Norms of tiles through time]).
    if (host_features_) {  // Note [An encode window's features in host memory]: dense time-major
      const std::vector<int64_t> time_major{y.size(0), latent, y.size(1), grid_.latent_height,
                                            grid_.latent_width};
      const auto meta = torch::TensorOptions().dtype(model_.dtype()).device(torch::kMeta);
      features = device_.pinned_exact_like(torch::empty(time_major, meta)).permute({0, 2, 1, 3, 4});
    } else {
      const std::vector<int64_t> sizes{y.size(0), y.size(1), latent, grid_.latent_height, grid_.latent_width};
      features = torch::empty(
          sizes, CausalConv3d::layout_of(y).device(device_.torch_device()).dtype(model_.dtype()));
    }
    if (!grid_.exact) features.zero_();
  };
  torch::Tensor staged;           // host features: the running tile's, on the device
  std::unique_ptr<Task> putting;  // host features: the last tile's, going into place
  auto place = [&](const Tile& tile, const torch::Tensor& y, int64_t at) {
    std::lock_guard<std::mutex> lock(placing);
    if (!features.defined()) make(y);
    if (!host_features_) {
      put(crop(features, at, y.size(2), tile.interior), y);
      return;
    }
    if (at == 0) staged = torch::empty({y.size(0), y.size(1), latent, y.size(3), y.size(4)}, y.options());
    staged.narrow(2, at, y.size(2)).copy_(y);
    if (at + y.size(2) < latent) return;
    const torch::Tensor down = to_host_now(staged, device_);
    staged = torch::Tensor();
    if (putting) putting->get();  // one tile's features placed at a time
    putting = std::make_unique<Task>(torch::kCPU, [this, &features, down, area = tile.interior] {
      torch::InferenceMode guard;  // `features` was made under it
      put(crop(features, 0, down.size(2), area), down);
    });
  };
  steps_ = static_cast<int64_t>(tiles_.size() * chunks.size());
  if (places_.size() == 1) {
    std::vector<Tile*> all;
    for (Tile& tile : tiles_) all.push_back(&tile);
    encode_tiles(all, x, chunks, more, place);
  } else {
    on_places([&](const std::vector<Tile*>& mine) { encode_tiles(mine, x, chunks, more, place); });
  }
  if (putting) putting->get();
  if (crop_) return features;  // crop tiles wrote latents (Note [Crop tiles])
  // The whole-frame part over the window's features, in bands across the places.
  torch::Tensor latents = whole_->encode(features, chunk_, device_);
  // Its uploads read the features' pinned buffer, which goes back to the process's pool for any later use
  // when the features die (Note [Pinned buffers kept for the next run] in core/device/device.cpp).
  if (host_features_ && cuda) c10::cuda::getCurrentCUDAStream(device_.torch_device().index()).synchronize();
  return latents;
}

void ExactTiles::encode_tiles(const std::vector<Tile*>& mine, const Pieces& x,
                              const std::vector<int64_t>& chunks, bool more,
                              const std::function<void(const Tile&, const torch::Tensor&, int64_t)>& place) {
  Lead lead;  // the first tile's chunks, run ahead (Note [A window's edges stream])
  if (!mine.empty() && mine.front() == &tiles_.front()) {
    lead = std::move(lead_);
    lead_ = {};
  }
  for (Tile* tile : mine) {
    int64_t c = 0, at = 0, done = 0;
    if (tile == &tiles_.front() && !lead.features.empty()) {
      for (const torch::Tensor& y : lead.features) {
        place(*tile, y, done);
        done += y.size(2);
        at += chunks[c++];
        count_step(/*report=*/false);  // told when it ran
      }
    } else {
      unpark(*tile);
    }
    for (; c < static_cast<int64_t>(chunks.size()); at += chunks[c++]) {
      const torch::Tensor y = encode_chunk(*tile, x, at, chunks[c]);
      place(*tile, y, done);
      done += y.size(2);
      count_step();
    }
    if (more)
      park(*tile);
    else
      tile->cache.clear();
  }
}

}  // namespace vaecodec::core
