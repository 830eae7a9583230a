#include "core/split/exact_tiles.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <string>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "core/device/memory_faults.h"
#include "core/error.h"
#include "core/split/blended_tiles.h"
#include "core/split/exact_tiles_parts.h"

namespace vaecodec::core {

torch::Tensor crop(const torch::Tensor& x, int64_t frame, int64_t frames, const Area& area) {
  return x.narrow(2, frame, frames)
      .narrow(3, area.rows.begin, area.rows.size())
      .narrow(4, area.cols.begin, area.cols.size());
}

torch::Tensor to_host_now(const torch::Tensor& t, const Device& device) {
  if (!device.is_cuda()) return t;
  torch::Tensor host = device.host_like(t);
  host.copy_(t, /*non_blocking=*/true);
  c10::cuda::getCurrentCUDAStream(device.index()).synchronize();  // the copy above
  return host;
}

std::vector<int64_t> chunk_lengths(int64_t n, int64_t first, int64_t later) {
  std::vector<int64_t> out;
  for (int64_t done = 0; done < n;) {
    const int64_t len = std::min(n - done, out.empty() ? first : later);
    out.push_back(len);
    done += len;
  }
  return out;
}

namespace {

// Output frames a decode has settled once `latents` latent frames have come (Note [Decoders that look ahead]
// in core/vae_model.h): every one once the clip has ended, else all but the model's lag.
int64_t settled_frames(const ModelInfo& info, int64_t latents, bool ended) {
  if (latents == 0) return 0;
  const int64_t all = 1 + info.temporal_factor * (latents - 1);
  return ended ? all : std::max<int64_t>(all - info.decode_lag, 0);
}

}  // namespace

ExactTiles::ExactTiles(VaeModel& model, Device& device, const TileGrid& grid, Op op, int64_t chunk,
                       int64_t window, WindowStore store, Hooks hooks, std::vector<BandPlace> places)
    : model_(model),
      device_(device),
      grid_(grid),
      op_(op),
      crop_(grid.crop(op == Op::kEncode)),
      chunk_(chunk),
      window_(window),
      host_window_(store != WindowStore::kDevice),
      host_features_(store == WindowStore::kHostFeatures && !grid.exact && !crop_),
      places_(std::move(places)),
      hooks_(std::move(hooks)) {
  if (grid_.exact ? !model.exact_tiles() : !model.tiles_through_time())
    throw Error(model.info().family + " cannot run " + (grid_.exact ? "exact tiles" : "tiles through time"));
  if (!grid_.through_time) throw Error("blended tiles that do not run through time are BlendedTiles'");
  if (crop_ && grid_.exact) throw Error("exact tiles are not crop tiles");
  if (chunk_ < 1) throw Error("chunk length must be at least 1 latent frame");
  if (places_.size() < 2) places_ = {{&model_, &device_}};
  // Note [A window held in 8 bits]: tiles that blend only; exact tiles keep the model's dtype.
  eight_bit_ = op == Op::kDecode && hooks_.emit && hooks_.emit_8bit && places_.size() == 1 && host_window_ &&
               !grid_.exact;
  // Blended tiles add into the frames they share: one place, one tile at a time.
  if (places_.size() > 1 && !grid_.exact) throw Error("blended tiles through time run on one device");
  check_places(places_, "tile place");
  if (places_.size() > 1) {  // Note [Places]
    std::vector<torch::Device> devices;
    for (const BandPlace& place : places_) devices.push_back(place.device->torch_device());
    workers_ = std::make_unique<Places>(std::move(devices));
  }
  if (!crop_)  // crop tiles have no whole-frame part (Note [Crop tiles])
    whole_ = std::make_unique<WholeFrameBands>(places_, workers_.get(), grid_.latent_height);
  const bool encode = op == Op::kEncode;
  const int64_t f = model_.info().spatial_factor;
  const int64_t scale = encode ? 1 : f;  // the output's pixels per latent pixel
  const std::vector<torch::Tensor> weights =
      grid_.exact ? std::vector<torch::Tensor>{} : blend_weights(grid_, scale);
  const torch::ScalarType sum_dtype = model_.dtype() == torch::kDouble ? torch::kDouble : torch::kFloat;
  for (int64_t r = 0; r < grid_.rows; ++r)
    for (int64_t c = 0; c < grid_.cols; ++c) {
      Tile t;
      const auto [r0, r1] = grid_.tile_rows(r);
      const auto [c0, c1] = grid_.tile_cols(c);
      const auto [k0, k1] = grid_.computed_rows(r);
      const auto [l0, l1] = grid_.computed_cols(c);
      t.interior = {{r0, r1}, {c0, c1}};
      t.computed = {{k0, k1}, {l0, l1}};
      // Note [Crop tiles]: the model reads the crop itself.
      t.input = !crop_   ? model_.tile_input(encode, t.computed, grid_.latent_height, grid_.latent_width)
                : encode ? Area{{k0 * f, k1 * f}, {l0 * f, l1 * f}}
                         : t.computed;
      t.place = places_.front();  // shared out below, by work
      if (!weights.empty()) {
        const torch::Tensor& w = weights[tiles_.size()];
        t.weight = w.to(t.place.device->torch_device(), sum_dtype).view({1, 1, 1, w.size(0), w.size(1)});
      }
      tiles_.push_back(std::move(t));
    }
  if (places_.size() > 1) {  // exact tiles only: nothing is blended, no weight on a place's device
    std::vector<double> works;
    for (const Tile& t : tiles_)
      works.push_back(static_cast<double>(t.computed.rows.size() * t.computed.cols.size()) *
                      model_.tile_work(encode, t.computed, grid_.latent_height, grid_.latent_width));
    const std::vector<size_t> where = places_by_work(works, places_.size());
    for (size_t i = 0; i < tiles_.size(); ++i) tiles_[i].place = places_[where[i]];
  }
}

std::vector<size_t> places_by_work(const std::vector<double>& works, size_t places) {
  std::vector<size_t> order(works.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return works[a] > works[b]; });
  std::vector<double> load(std::max<size_t>(places, 1), 0.0);
  std::vector<size_t> where(works.size(), 0);
  for (const size_t job : order) {
    const size_t least = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    where[job] = least;
    load[least] += works[job];
  }
  return where;
}

torch::Tensor ExactTiles::written(const Tile& tile, const torch::Tensor& y, int64_t scale) const {
  const torch::Tensor inside = y.narrow(3, (tile.interior.rows.begin - tile.computed.rows.begin) * scale,
                                        tile.interior.rows.size() * scale)
                                   .narrow(4, (tile.interior.cols.begin - tile.computed.cols.begin) * scale,
                                           tile.interior.cols.size() * scale);
  if (!tile.weight.defined()) return inside;
  return inside.to(tile.weight.scalar_type()) * tile.weight;  // in float32 (float64 models: float64)
}

Area ExactTiles::pixels_of(const Tile& tile) const {
  const int64_t f = model_.info().spatial_factor;
  return {{tile.interior.rows.begin * f, tile.interior.rows.end * f},
          {tile.interior.cols.begin * f, tile.interior.cols.end * f}};
}

void ExactTiles::put(const torch::Tensor& region, const torch::Tensor& values) const {
  if (grid_.exact)
    region.copy_(values);
  else
    region.add_(values.to(region.device()));  // computed in the wider of the two dtypes
}

ExactTiles::~ExactTiles() = default;

int64_t ExactTiles::cache_bytes() const {
  int64_t n = whole_ ? whole_->cache_bytes() : 0;
  for (const Tile& t : tiles_) n += t.cache.bytes();
  return n;
}

torch::Tensor ExactTiles::push(const torch::Tensor& x) {
  torch::InferenceMode guard;
  pending_.push(keep(x));
  std::vector<torch::Tensor> out;
  if (op_ == Op::kDecode) {
    while (window_ > 0 && pending_.size() > window_) {
      torch::Tensor frames = run_window(pending_.take(window_), /*more=*/true);
      if (frames.defined()) out.push_back(std::move(frames));  // not when emitted
    }
    return join_frames(out);
  }
  return run_encode_windows();
}

torch::Tensor ExactTiles::push_packed(std::shared_ptr<const PackedFrames> x) {
  if (op_ != Op::kEncode || !host_window_) throw Error("packed frames for a split that does not keep them");
  torch::InferenceMode guard;
  pending_.push(std::move(x));
  return run_encode_windows();
}

torch::Tensor ExactTiles::run_encode_windows() {
  std::vector<torch::Tensor> out;
  const int64_t tf = model_.info().temporal_factor;
  while (true) {
    // The window's frames; 0: the rest of the clip.
    const int64_t need = window_ == 0 ? 0 : windows_ == 0 ? 1 + tf * (window_ - 1) : tf * window_;
    // A window runs once a frame past it has come: the last window is run by finish(), without `more`.
    if (need == 0 || pending_.size() <= need) {
      advance(pending_, need);
      break;
    }
    out.push_back(run_window(pending_.take(need), /*more=*/true));
    ++windows_;
  }
  return join_frames(out);
}

torch::Tensor ExactTiles::finish() {
  return pending_.empty() ? torch::Tensor() : run_window(pending_.take(pending_.size()), false);
}

// Note [Windows in host memory]
// A window kept in host memory is stored time-major, [B, T, C, H, W] (returned as a [B, C, T, H, W] view), so
// that a chunk of it is one dense block: an encode chunk goes up in one copy from pinned memory and each tile
// crops it on the device (a crop of host memory would be gathered by the CPU, with the GPU waiting, once per
// tile and chunk). An encode's frames that came packed stay so, and each tile unpacks its chunk on the
// device (Note [Frames kept packed] in core/packed_frames.h). A decode tile writes its frames for the whole
// window into one tensor on the device, which comes down in one copy when the tile is done and is placed into
// the window's frames by a worker thread while the next tile runs; a tile done before the one before it is
// placed waits for it, so that host memory holds the window's frames and two tiles' frames at most (the
// planner counts them). Blended tiles, which add where they overlap, and a window held in 8 bits (one tile's
// 8-bit frames at a time: Note [A window held in 8 bits] in core/split/eight_bit_window.h) come down only
// once the tile before is placed, so that they are placed in the tiles' order.
torch::Tensor ExactTiles::keep(const torch::Tensor& x) const {
  const torch::ScalarType dtype =
      op_ == Op::kEncode ? model_.dtype() : x.scalar_type();  // latents stay as they are
  if (host_window_ && op_ == Op::kEncode) {
    const torch::Tensor time_major = x.to(dtype).permute({0, 2, 1, 3, 4});
    // Each chunk in page-locked memory of its own size: a 4K chunk of four frames in bf16 is 190 MiB, which
    // LibTorch's pinned allocator would round up to 256 (1.1 GiB more over 81 frames).
    torch::Tensor host = device_.torch_device().is_cuda()
                             ? device_.pinned_exact_like(time_major.contiguous())
                             : torch::empty(time_major.sizes(), time_major.options().device(torch::kCPU));
    host.copy_(time_major);
    return host.permute({0, 2, 1, 3, 4});
  }
  return x.to(device_.torch_device(), dtype);
}

// Caches go to host memory only between windows (Note [Tiles through time]), on the copy lanes (Note
// [Offloaded caches]); a cache's device memory is released as soon as its download is queued, so one tile's
// cache is on the device at a time.
void ExactTiles::park(Tile& tile) {
  tile.parking.park(tile.cache, *tile.place.device);
}

void ExactTiles::unpark(Tile& tile) {
  tile.parking.unpark(tile.cache, *tile.place.device);
}

torch::Tensor ExactTiles::run_window(const Pieces& x, bool more) {
  torch::InferenceMode guard;
  const bool decode = op_ == Op::kDecode;
  if (decode) {  // Note [Held-back frames of exact tiles]
    window_frames_ = settled_frames(model_.info(), latents_ + x.size(), /*ended=*/!more) -
                     settled_frames(model_.info(), latents_, false);
    latents_ += x.size();
  } else {
    window_frames_ = x.size();
  }
  step_ = 0;
  torch::Tensor out = decode ? decode_window(x, more) : encode_window(x, more);
  frames_done_ += window_frames_;
  started_ = true;
  return out;
}

void ExactTiles::count_step(bool report) {
  std::lock_guard<std::mutex> lock(step_mutex_);  // in order, whichever place's thread counts
  ++step_;
  if (report && hooks_.progress)
    hooks_.progress(frames_done_ + window_frames_ * step_ / std::max<int64_t>(steps_, 1));
}

void ExactTiles::on_places(const std::function<void(const std::vector<Tile*>&)>& run) {
  // The work queued on the run's device so far (the window's features) is done before other threads read
  // it; each place waits for its own work (and its copies to and from the run's device) before it returns.
  if (device_.torch_device().is_cuda())
    c10::cuda::getCurrentCUDAStream(device_.torch_device().index()).synchronize();
  std::vector<std::vector<Tile*>> mine(places_.size());
  for (size_t p = 0; p < places_.size(); ++p)
    for (Tile& tile : tiles_)
      if (tile.place.model == places_[p].model) mine[p].push_back(&tile);
  workers_->run([&](size_t p) {
    const torch::Device where = places_[p].device->torch_device();
    torch::InferenceMode inference;
    run(mine[p]);
    if (where.is_cuda()) {
      c10::cuda::getCurrentCUDAStream(where.index()).synchronize();
      if (device_.torch_device().is_cuda())
        c10::cuda::getCurrentCUDAStream(device_.torch_device().index()).synchronize();
    }
  });
}

// Note [Held-back frames of exact tiles]
// A decoder that looks ahead (Note [Decoders that look ahead] in core/vae_model.h) holds frames back in every
// cache it runs with: the whole-frame part settles fewer features than the window's latents (none at all
// from a short first window) and each tile's trunk fewer frames than those features make. What is held back
// stays in the caches, parked between windows with the rest of them, and comes out in the next window: a
// window's frames are those settled by its last latent less those settled before it, ModelInfo::decode_lag
// behind a causal decoder's (settled_frames), and every tile settles as many. The window that ends the clip
// ends the caches: the whole-frame part's held-back features join the window's features and go through the
// tiles' trunks as theirs, and then each tile ends its trunk (decode_tile_end), one step more per tile, whose
// frames are written, staged or emitted as a chunk's. So a window's frames are complete and in order when it
// is done (the last tile's frames go to emit as it settles them), the clip's frames appear once each, and
// the result is the same for any window and chunk.

// Note [A window's features in host memory]
// A decode window's features (the whole-frame part's output, the tiles' input: 512 channels at latent
// resolution for SeedVR2, 2.6 GiB for 4K x81 in bf16) wait on the device unless the plan keeps them in host
// memory with the window's frames (Plan::host_features: tiles through time that are not exact, SeedVR2's,
// where nothing else fits). Then they are written there chunk by chunk as the whole-frame part makes them,
// and each tile's chunk of them is gathered in host memory into page-locked memory and goes up alone,
// without stopping the host: the device holds neither the window's frames nor its features, and every
// feature goes up about once (the tiles' margins add their share). That is what lets a 4K clip decode in
// 8 GB. Each gather still costs time the copies alone do not show (Note [Features in host memory,
// measured] in core/exact_plan.cpp), so the planner takes it only where the features do not fit beside a
// tile. The exact tiles' families keep their features on the device; their budgets did not need this. An
// encode's features (its tiles' output) go to host memory too: Note [An encode window's features in host
// memory] in core/split/exact_tiles_encode.cpp.

// Note [The whole-frame cache ends with the clip]
// A decode window runs its whole-frame part first and its tiles after it. In the clip's last window (the
// only one when the window is the whole clip, as most plans have it) nothing reads the whole-frame part's
// caches again, so they go before the tiles run: their memory (the latent-resolution layers' history, about
// 20 KB per latent pixel for SeedVR2's decoder in bf16, 2.5 GiB at 4K) is not on the device beside a
// tile's. Windows with more to come keep them for the next window: tiles through time with tile-local norms
// (SeedVR2's, not exact) park them in host memory while the tiles run, as each tile's cache is parked, and
// bring them back before the next window's whole-frame part. Their latent layers are 512 channels wide, the
// largest term of a 4K plan in 8 GB; exact tiles' families keep theirs on the device, where they are smaller
// beside the tiles' caches and the copies would cost their short windows more than the memory buys. The
// planner counts the whole-frame cache where the device holds it and the copies where it is parked (Note
// [Decode tiles through time, measured] in core/exact_plan.cpp).
torch::Tensor ExactTiles::decode_window(const Pieces& z, bool more) {
  const int64_t n = z.size(), f = model_.info().spatial_factor;
  const bool ends = !more && model_.info().decode_lag > 0;
  // The whole-frame part over the window, into one tensor of features (Note [Held-back frames of exact
  // tiles]: fewer than n until the clip ends, then more), in bands across the places (Note [Whole-frame part
  // in bands]).
  torch::Tensor features;
  if (crop_) {
    features = z.slice(0, n);  // crop tiles read the window's latents (Note [Crop tiles])
  } else {
    std::vector<torch::Tensor> latents;
    for (int64_t at = 0; at < n; at += chunk_) latents.push_back(z.slice(at, std::min(chunk_, n - at)));
    using After = WholeFrameBands::After;  // Note [The whole-frame cache ends with the clip]
    const After after = !more ? After::kDrop : grid_.exact ? After::kKeep : After::kPark;
    // Note [A window's features in host memory]
    features = whole_->decode(latents, ends, n, device_, after, host_features_);
  }
  const int64_t settled = features.defined() ? features.size(2) : 0;
  if (settled == 0 && !ends) {  // nothing settled yet: the tiles start in a later window
    if (window_frames_ > 0)
      throw Error(model_.info().family + ": " + std::to_string(window_frames_) +
                  " frames are due from a window whose whole-frame part settled none");
    return {};
  }
  const std::vector<int64_t> chunks = chunk_lengths(settled, chunk_, chunk_);
  // The window's frames; on the CPU a host window changes nothing but takes the same path (so that tests
  // run it).
  const bool cuda = device_.torch_device().is_cuda();
  const auto options = torch::TensorOptions().dtype(model_.dtype());
  const std::vector<int64_t> sizes{z.slice(0, 1).size(0), 3, window_frames_, grid_.latent_height * f,
                                   grid_.latent_width * f};
  const auto where =
      host_window_ ? options.device(torch::kCPU).pinned_memory(cuda) : options.device(device_.torch_device());
  // Blended tiles add into the frames (Note [Norms of tiles through time]).
  torch::Tensor out;
  if (eight_bit_) {  // Note [A window held in 8 bits]
    std::vector<Area> areas;
    for (const Tile& t : tiles_) areas.push_back(pixels_of(t));
    eight_ = std::make_unique<EightBitWindow>(sizes, model_.dtype(), std::move(areas), /*blended=*/true);
  } else {
    out = torch::empty(sizes, where);
    if (!grid_.exact) out.zero_();
  }
  steps_ = static_cast<int64_t>(tiles_.size() * (chunks.size() + (ends ? 1 : 0)));
  if (places_.size() == 1) {
    std::vector<Tile*> all;
    for (Tile& tile : tiles_) all.push_back(&tile);
    decode_tiles(all, features, chunks, out, more, static_cast<bool>(hooks_.emit));
    eight_.reset();  // all of it emitted
    return hooks_.emit || window_frames_ == 0 ? torch::Tensor() : out;
  }
  on_places([&](const std::vector<Tile*>& mine) {  // Note [Exact tiles across devices]
    if (mine.empty()) return;
    const torch::Device where = mine.front()->place.device->torch_device();
    const bool here = !features.defined() || where == features.device() || features.device().is_cpu();
    decode_tiles(mine, here ? features : features.to(where), chunks, out, more, false);
  });
  if (!hooks_.emit) return window_frames_ == 0 ? torch::Tensor() : out;
  emit(out);
  return {};
}

void ExactTiles::emit(const torch::Tensor& frames) const {
  if (frames.size(2) == 0) return;  // a chunk that settled none (Note [Held-back frames of exact tiles])
  const bool eight = frames.scalar_type() == torch::kUInt8;  // Note [A window held in 8 bits]
  if (!frames.device().is_cpu() || !device_.torch_device().is_cuda()) {
    hooks_.emit(eight ? EightBitWindow::expand(frames) : frames);
    return;
  }
  constexpr int64_t kFramesPerUpload = 4;
  for (int64_t at = 0; at < frames.size(2); at += kFramesPerUpload) {
    const int64_t n = std::min(kFramesPerUpload, frames.size(2) - at);
    const torch::Tensor up =
        frames.narrow(2, at, n).to(device_.torch_device(), /*non_blocking=*/frames.is_pinned());
    hooks_.emit(eight ? EightBitWindow::expand(up) : up);
  }
}

void ExactTiles::decode_tiles(const std::vector<Tile*>& mine, const torch::Tensor& features,
                              const std::vector<int64_t>& chunks, torch::Tensor& out, bool more,
                              bool emit_last) {
  const int64_t f = model_.info().spatial_factor;
  const bool host = host_window_;
  const bool ends = !more && model_.info().decode_lag > 0;  // Note [Held-back frames of exact tiles]
  EightBitWindow* eight = eight_.get();                     // Note [A window held in 8 bits]
  const int64_t frames = window_frames_;
  // Tiles' frames going into the window (Note [Windows in host memory]); blended ones one at a time.
  std::vector<std::unique_ptr<Task>> placing;
  auto placed = [&] {  // waits for every placing
    for (auto& p : placing) p->get();
    placing.clear();
  };
  for (Tile* tile : mine) {
    unpark(*tile);
    Device& device = *tile->place.device;
    const size_t index = static_cast<size_t>(tile - tiles_.data());
    const Area pixels = pixels_of(*tile);
    // The last tile hands each chunk's frames over as it finishes them (Note [A window's edges stream]);
    // in host memory, once the other tiles' frames are in place.
    const bool emitting = emit_last && tile == mine.back();
    if (emitting) placed();
    // The tile's frames of the window wait on its device (none: nothing to stage).
    const bool stage = host && !emitting && frames > 0;
    const torch::ScalarType dtype = eight ? model_.dtype() : out.scalar_type();
    torch::Tensor tile_frames;
    int64_t frame = 0;
    auto take = [&](const torch::Tensor& model_out) {  // a chunk's frames (or the end's), where they go
      const torch::Tensor y = written(*tile, model_out, f);
      if (frame + y.size(2) > frames)
        throw Error(model_.info().family + ": a tile made more frames than its window's " +
                    std::to_string(frames));
      if (stage && !tile_frames.defined())
        tile_frames =
            torch::empty({y.size(0), y.size(1), frames, y.size(3), y.size(4)}, y.options().dtype(dtype));
      if (stage)
        tile_frames.narrow(2, frame, y.size(2)).copy_(y);
      else if (eight)
        eight->place(eight->bring_down(index, frame, y, device));
      else
        put(crop(out, frame, y.size(2), pixels), y);
      if (emitting && eight) {
        emit(eight->frames(frame, y.size(2)));
        eight->release(frame + y.size(2));  // on the device now (Note [A window held in 8 bits])
      } else if (emitting) {
        emit(out.narrow(2, frame, y.size(2)));
      }
      frame += y.size(2);
      count_step();
    };
    for (int64_t c = 0, at = 0; c < static_cast<int64_t>(chunks.size()); at += chunks[c++]) {
      before_model_call();
      // Features in host memory are gathered there and go up as the tile's input alone, without stopping the
      // host (Note [A window's features in host memory]).
      const torch::Tensor input = to_place(crop(features, at, chunks[c], tile->input), tile->place, false);
      VaeModel& model = *tile->place.model;
      take(crop_ ? model.decode(input, tile->cache)
                 : model.decode_tile(input, tile->cache, tile->computed, grid_.latent_height,
                                     grid_.latent_width));
    }
    if (ends) {  // what the tile's trunk held back (Note [Held-back frames of exact tiles])
      before_model_call();
      torch::Tensor held = crop_ ? tile->place.model->decode_end(tile->cache)
                                 : tile->place.model->decode_tile_end(
                                       tile->cache, tile->computed, grid_.latent_height, grid_.latent_width);
      if (held.defined())
        take(held);
      else
        count_step();
    }
    if (frame != frames)
      throw Error(model_.info().family + ": a tile made " + std::to_string(frame) +
                  " frames of its window's " + std::to_string(frames));
    if (stage) {
      // Blended tiles add into the pixels they share: in the tiles' order, so that a pixel three or more
      // tiles cover sums the same way every run (the one before was placed while this one ran); an 8-bit
      // window blends, and holds one tile's frames in host memory at a time so.
      if (!grid_.exact) placed();
      std::function<void()> place;
      if (eight) {
        auto down = std::make_shared<EightBitWindow::Down>(eight->bring_down(index, 0, tile_frames, device));
        place = [eight, down] { eight->place(*down); };
      } else {
        const torch::Tensor down = to_host_now(tile_frames, device);
        place = [this, &out, down, pixels] { put(crop(out, 0, out.size(2), pixels), down); };
      }
      tile_frames = torch::Tensor();
      placing.push_back(std::make_unique<Task>(torch::kCPU, [place = std::move(place)] {
        torch::InferenceMode guard;  // the window was made under it
        place();
      }));
      // One tile's frames wait to be placed while the next tile runs, no more: host memory holds the window
      // and two tiles' frames, however slowly the CPU places them (Note [Windows in host memory]).
      while (placing.size() > 1) {
        placing.front()->get();
        placing.erase(placing.begin());
      }
    }
    if (more)
      park(*tile);
    else
      tile->cache.clear();
  }
  placed();
}

}  // namespace vaecodec::core
