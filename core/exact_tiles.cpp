#include "core/exact_tiles.h"

#include <algorithm>
#include <future>
#include <string>

#include <c10/cuda/CUDAStream.h>

#include "core/device/memory_faults.h"
#include "core/error.h"

namespace vaecodec::core {
namespace {

torch::Tensor crop(const torch::Tensor& x, int64_t frame, int64_t frames, const Area& area) {
  return x.narrow(2, frame, frames)
      .narrow(3, area.rows.begin, area.rows.size())
      .narrow(4, area.cols.begin, area.cols.size());
}

// Chunk lengths over `n` units, `first` for the first and `later` after.
std::vector<int64_t> chunk_lengths(int64_t n, int64_t first, int64_t later) {
  std::vector<int64_t> out;
  for (int64_t done = 0; done < n;) {
    const int64_t len = std::min(n - done, out.empty() ? first : later);
    out.push_back(len);
    done += len;
  }
  return out;
}

}  // namespace

void Pieces::push(torch::Tensor t) {
  if (t.size(2) == 0) return;
  size_ += t.size(2);
  pieces_.push_back(std::move(t));
}

torch::Tensor Pieces::slice(int64_t at, int64_t len) const {
  if (at < 0 || len < 0 || at + len > size_) throw Error("a slice past the frames at hand");
  std::vector<torch::Tensor> parts;
  for (const torch::Tensor& p : pieces_) {
    const int64_t n = p.size(2);
    if (at >= n) {
      at -= n;
      continue;
    }
    const int64_t take = std::min(len, n - at);
    parts.push_back(p.narrow(2, at, take));
    len -= take;
    at = 0;
    if (len == 0) break;
  }
  return parts.size() == 1 ? parts.front() : torch::cat(parts, 2);
}

Pieces Pieces::take(int64_t n) {
  Pieces head;
  std::vector<torch::Tensor> rest;
  for (torch::Tensor& p : pieces_) {
    const int64_t k = std::min(n, p.size(2));
    if (k > 0) head.push(p.narrow(2, 0, k));
    if (k < p.size(2)) rest.push_back(p.narrow(2, k, p.size(2) - k));
    n -= k;
  }
  pieces_ = std::move(rest);
  size_ -= head.size();
  return head;
}

ExactTiles::ExactTiles(VaeModel& model, Device& device, const TileGrid& grid, Direction direction,
                       int64_t chunk, bool host_window, std::function<void(int64_t)> progress)
    : model_(model),
      device_(device),
      grid_(grid),
      direction_(direction),
      chunk_(chunk),
      host_window_(host_window),
      progress_(std::move(progress)) {
  if (!model.exact_tiles()) throw Error(model.info().family + " cannot run exact tiles");
  if (chunk_ < 1) throw Error("chunk length must be at least 1 latent frame");
  const bool encode = direction == Direction::kEncode;
  for (int64_t r = 0; r < grid_.rows; ++r)
    for (int64_t c = 0; c < grid_.cols; ++c) {
      Tile t;
      const auto [r0, r1] = grid_.part_rows(r);
      const auto [c0, c1] = grid_.part_cols(c);
      t.interior = {{r0, r1}, {c0, c1}};
      t.input = model_.tile_input(encode, t.interior, grid_.latent_height, grid_.latent_width);
      tiles_.push_back(std::move(t));
    }
}

ExactTiles::~ExactTiles() = default;

// Note [Windows in host memory]
// A window kept in host memory is stored time-major, [B, T, C, H, W] (returned as a [B, C, T, H, W] view), so
// that a chunk of it is one dense block: an encode chunk goes up in one copy from pinned memory and each tile
// crops it on the device (a crop of host memory would be gathered by the CPU, with the GPU waiting, once per
// tile and chunk). A decode tile writes its frames for the whole window into one tensor on the device, which
// comes down in one copy when the tile is done and is placed into the window's frames by a worker thread
// while the next tile runs.
torch::Tensor ExactTiles::keep(const torch::Tensor& x) const {
  const torch::ScalarType dtype =
      direction_ == Direction::kEncode ? model_.dtype() : x.scalar_type();  // latents stay as they are
  if (host_window_ && direction_ == Direction::kEncode) {
    const torch::Tensor time_major = x.to(dtype).permute({0, 2, 1, 3, 4});
    torch::Tensor host = device_.torch_device().is_cuda()
                             ? device_.host_like(time_major.contiguous())
                             : torch::empty(time_major.sizes(), time_major.options().device(torch::kCPU));
    host.copy_(time_major);
    return host.permute({0, 2, 1, 3, 4});
  }
  return x.to(device_.torch_device(), dtype);
}

torch::Tensor ExactTiles::to_model(const torch::Tensor& x, bool convert_dtype) const {
  const bool pinned = x.device().is_cpu() && x.is_pinned();
  auto y = convert_dtype ? x.to(device_.torch_device(), model_.dtype(), pinned)
                         : x.to(device_.torch_device(), pinned);
  return y.contiguous(model_.memory_format());
}

// Caches go to host memory only between windows (Note [Tiles through time]): a plain copy each way.
void ExactTiles::park(Tile& tile) {
  if (!device_.torch_device().is_cuda()) return;
  tile.cache.rewind();
  for (size_t i = 0; i < tile.cache.size(); ++i) {
    CausalCache::Slot& slot = tile.cache.next();
    if (slot.history.defined()) slot.history = slot.history.to(torch::kCPU);
  }
  tile.cache.rewind();
  tile.parked = true;
}

void ExactTiles::unpark(Tile& tile) {
  if (!tile.parked) return;
  tile.cache.rewind();
  for (size_t i = 0; i < tile.cache.size(); ++i) {
    CausalCache::Slot& slot = tile.cache.next();
    if (slot.history.defined())
      slot.history = slot.history.to(device_.torch_device()).contiguous(slot.history.suggest_memory_format());
  }
  tile.cache.rewind();
  tile.parked = false;
}

torch::Tensor ExactTiles::run_window(const Pieces& x, bool more) {
  torch::InferenceMode guard;
  torch::Tensor out = direction_ == Direction::kDecode ? decode_window(x, more) : encode_window(x, more);
  frames_done_ += direction_ == Direction::kDecode ? out.size(2) : x.size();
  started_ = true;
  return out;
}

void ExactTiles::report(int64_t step, int64_t steps, int64_t frames) const {
  if (progress_) progress_(frames_done_ + frames * step / std::max<int64_t>(steps, 1));
}

torch::Tensor ExactTiles::decode_window(const Pieces& z, bool more) {
  const int64_t n = z.size(), f = model_.info().spatial_factor, tf = model_.info().temporal_factor;
  const std::vector<int64_t> chunks = chunk_lengths(n, chunk_, chunk_);
  // The whole-frame part over the window, into one tensor of features.
  torch::Tensor features;
  for (int64_t c = 0, at = 0; c < static_cast<int64_t>(chunks.size()); at += chunks[c++]) {
    before_model_call();
    torch::Tensor part = model_.decode_features(to_model(z.slice(at, chunks[c]), false), whole_);
    if (!features.defined()) {
      auto sizes = part.sizes().vec();
      sizes[2] = n;
      features = torch::empty(sizes, CausalConv3d::layout_of(part));
    }
    features.narrow(2, at, chunks[c]).copy_(part);
  }
  // The window's frames: 1 + tf (n - 1) on the first window, tf n after.
  const int64_t frames = started_ ? tf * n : 1 + tf * (n - 1);
  // On the CPU a host window changes nothing but takes the same path (so that tests run it).
  const bool host = host_window_;
  const bool cuda = device_.torch_device().is_cuda();
  torch::Tensor out;
  std::vector<std::future<void>> placing;  // tiles' frames going into `out` (Note [Windows in host memory])
  const int64_t steps = static_cast<int64_t>(tiles_.size() * chunks.size());
  int64_t step = 0;
  for (Tile& tile : tiles_) {
    unpark(tile);
    const Area pixels{{tile.interior.rows.begin * f, tile.interior.rows.end * f},
                      {tile.interior.cols.begin * f, tile.interior.cols.end * f}};
    torch::Tensor tile_frames;  // host window: the tile's frames of the whole window, on the device
    for (int64_t c = 0, at = 0, frame = 0; c < static_cast<int64_t>(chunks.size()); at += chunks[c++]) {
      before_model_call();
      const torch::Tensor input =
          crop(features, at, chunks[c], tile.input).contiguous(model_.memory_format());
      torch::Tensor y =
          model_.decode_tile(input, tile.cache, tile.interior, grid_.latent_height, grid_.latent_width);
      if (!out.defined()) {
        const auto options = host ? y.options().device(torch::kCPU).pinned_memory(cuda) : y.options();
        out = torch::empty({y.size(0), y.size(1), frames, grid_.latent_height * f, grid_.latent_width * f},
                           options.memory_format(torch::MemoryFormat::Contiguous));
      }
      if (host && !tile_frames.defined())
        tile_frames = torch::empty({y.size(0), y.size(1), frames, y.size(3), y.size(4)}, y.options());
      if (host)
        tile_frames.narrow(2, frame, y.size(2)).copy_(y);
      else
        crop(out, frame, y.size(2), pixels).copy_(y);
      frame += y.size(2);
      report(++step, steps, frames);
    }
    if (host) {
      torch::Tensor down = cuda ? device_.host_like(tile_frames) : torch::empty_like(tile_frames);
      down.copy_(tile_frames, /*non_blocking=*/cuda);
      if (cuda)
        c10::cuda::getCurrentCUDAStream(device_.torch_device().index()).synchronize();  // the copy above
      placing.push_back(std::async(std::launch::async, [&out, down, pixels, frames] {
        torch::InferenceMode guard;  // `out` was made under it
        crop(out, 0, frames, pixels).copy_(down);
      }));
    }
    if (more)
      park(tile);
    else
      tile.cache.clear();
  }
  for (auto& p : placing) p.get();
  return out;
}

torch::Tensor ExactTiles::encode_window(const Pieces& x, bool more) {
  const int64_t tf = model_.info().temporal_factor;
  const int64_t t = x.size();
  const std::vector<int64_t> chunks =
      chunk_lengths(t, started_ ? tf * chunk_ : 1 + tf * (chunk_ - 1), tf * chunk_);
  const int64_t latent = started_ ? t / tf : 1 + (t - 1) / tf;
  torch::Tensor features;
  const int64_t steps = static_cast<int64_t>(tiles_.size() * chunks.size());
  int64_t step = 0;
  for (Tile& tile : tiles_) {
    unpark(tile);
    for (int64_t c = 0, at = 0, done = 0; c < static_cast<int64_t>(chunks.size()); at += chunks[c++]) {
      before_model_call();
      torch::Tensor frames = x.slice(at, chunks[c]);
      if (frames.device() != device_.torch_device()) {  // Note [Windows in host memory]
        const torch::Tensor time_major = frames.permute({0, 2, 1, 3, 4}).contiguous();
        frames = time_major.to(device_.torch_device(), /*non_blocking=*/time_major.is_pinned())
                     .permute({0, 2, 1, 3, 4});
      }
      const torch::Tensor input = to_model(crop(frames, 0, chunks[c], tile.input), true);
      torch::Tensor y =
          model_.encode_tile(input, tile.cache, tile.interior, grid_.latent_height, grid_.latent_width);
      if (!features.defined())
        features = torch::empty({y.size(0), y.size(1), latent, grid_.latent_height, grid_.latent_width},
                                CausalConv3d::layout_of(y));
      crop(features, done, y.size(2), tile.interior).copy_(y);
      done += y.size(2);
      report(++step, steps, t);
    }
    if (more)
      park(tile);
    else
      tile.cache.clear();
  }
  // The whole-frame part over the window's features.
  std::vector<torch::Tensor> latents;
  for (int64_t c = 0, at = 0; at < latent; ++c) {
    const int64_t len = std::min(chunk_, latent - at);
    before_model_call();
    latents.push_back(
        model_.encode_features(features.narrow(2, at, len).contiguous(model_.memory_format()), whole_));
    at += len;
  }
  return latents.size() == 1 ? latents.front() : torch::cat(latents, 2);
}

}  // namespace vaecodec::core
