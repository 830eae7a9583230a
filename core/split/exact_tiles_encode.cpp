#include "core/split/exact_tiles.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/cuda/CUDAEvent.h>
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
  // Note [Windows in host memory]; packed frames unpacked here (Note [Frames kept packed]).
  const torch::Tensor frames = x.frames_on(at, len, where, model_.dtype());
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
// where nothing else fits). Then each chunk a tile writes goes down as soon as it is made, in the dtype the
// tile writes it (so that blending adds the same numbers it adds on the device), and a worker thread puts it
// into the window's features once its copy is done, while the device runs the next chunk; one chunk is put
// at a time, in the order the chunks were made (blended tiles add into what they share, always in the tiles'
// order). The window's features are stored time-major, so that each chunk of the whole-frame part goes up
// in one dense copy. The device holds no more than the chunk; host memory the window's features and two
// chunks on their way (the planner counts them). The result is the device run's. (A tile's features used to
// gather on the device for the whole window and come down at its end: at 4K in 16 GB two such tiles in
// float32 took 2.7 GB of host memory and one of them 1.35 GB of the device's.)
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
  std::unique_ptr<Task> putting;  // host features: the last chunk, going into place
  auto place = [&](const Tile& tile, const torch::Tensor& y, int64_t at) {
    std::lock_guard<std::mutex> lock(placing);
    if (!features.defined()) make(y);
    if (!host_features_) {
      put(crop(features, at, y.size(2), tile.interior), y);
      return;
    }
    torch::Tensor down = y;  // on the CPU: the chunk itself
    std::shared_ptr<at::cuda::CUDAEvent> copied;
    if (y.is_cuda()) {
      down = torch::empty(y.sizes(), y.options().device(torch::kCPU).pinned_memory(true));
      down.copy_(y, /*non_blocking=*/true);
      copied = std::make_shared<at::cuda::CUDAEvent>();
      copied->record(c10::cuda::getCurrentCUDAStream(y.device().index()));
    }
    if (putting) putting->get();  // one chunk placed at a time, in order
    putting = std::make_unique<Task>(torch::kCPU, [this, &features, down, copied, at, area = tile.interior] {
      torch::InferenceMode guard;  // `features` was made under it
      if (copied) copied->synchronize();
      put(crop(features, at, down.size(2), area), down);
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
  // Crop tiles wrote latents (Note [Crop tiles]); else the whole-frame part over the window's features, in
  // bands across the places.
  torch::Tensor latents = crop_ ? features : whole_->encode(features, chunk_, device_);
  // Its uploads read the features' pinned buffer, and the tiles' the window's frames, which go back to the
  // process's pool for any later use when they die (Note [Pinned buffers kept for the next run] in
  // core/device/device.cpp).
  if (host_window_ && cuda) c10::cuda::getCurrentCUDAStream(device_.torch_device().index()).synchronize();
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
