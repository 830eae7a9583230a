#include "core/tiling.h"

#include <cmath>
#include <string>

#include <c10/cuda/CUDAGuard.h>

#include "core/device/memory_faults.h"
#include "core/error.h"

namespace vaecodec::core {
namespace {

// Raised-cosine weights of the tiles along one axis (Note [Tile blending]), normalized to sum to 1.
// origins and length in output pixels; extent is the axis's length.
std::vector<std::vector<double>> axis_weights(const std::vector<int64_t>& origins, int64_t length,
                                              int64_t extent) {
  const size_t n = origins.size();
  const double pi = std::acos(-1.0);
  std::vector<std::vector<double>> w(n, std::vector<double>(static_cast<size_t>(length), 1.0));
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) {  // ramp up over what the previous tile covers
      const int64_t shared = origins[i - 1] + length - origins[i];
      for (int64_t x = 0; x < std::min(shared, length); ++x)
        w[i][x] *= 0.5 - 0.5 * std::cos(pi * (static_cast<double>(x) + 0.5) / static_cast<double>(shared));
    }
    if (i + 1 < n) {  // ramp down over what the next tile covers
      const int64_t start = origins[i + 1] - origins[i];
      const int64_t shared = length - start;
      for (int64_t x = std::max<int64_t>(start, 0); x < length; ++x)
        w[i][x] *=
            0.5 + 0.5 * std::cos(pi * (static_cast<double>(x - start) + 0.5) / static_cast<double>(shared));
    }
  }
  std::vector<double> sum(static_cast<size_t>(extent), 0.0);
  for (size_t i = 0; i < n; ++i)
    for (int64_t x = 0; x < length; ++x) sum[origins[i] + x] += w[i][x];
  for (size_t i = 0; i < n; ++i)
    for (int64_t x = 0; x < length; ++x) w[i][x] /= sum[origins[i] + x];
  return w;
}

torch::ScalarType accumulation_dtype(torch::ScalarType dtype) {
  return dtype == torch::kDouble ? torch::kDouble : torch::kFloat;
}

}  // namespace

TileGrid resolve_grid(const TileGrid& grid, int64_t latent_height, int64_t latent_width) {
  if (grid.latent_height == 0 && grid.latent_width == 0) return TileGrid::whole(latent_height, latent_width);
  if (grid.latent_height != latent_height || grid.latent_width != latent_width)
    throw Error("the tile plan is for " + std::to_string(grid.latent_width) + "x" +
                std::to_string(grid.latent_height) + " latent pixels, the frames are " +
                std::to_string(latent_width) + "x" + std::to_string(latent_height));
  return grid;
}

std::vector<torch::Tensor> blend_weights(const TileGrid& grid, int64_t scale) {
  std::vector<int64_t> rows, cols;
  for (int64_t r = 0; r < grid.rows; ++r) rows.push_back(grid.row_origin(r) * scale);
  for (int64_t c = 0; c < grid.cols; ++c) cols.push_back(grid.col_origin(c) * scale);
  const auto wy = axis_weights(rows, grid.tile_height * scale, grid.latent_height * scale);
  const auto wx = axis_weights(cols, grid.tile_width * scale, grid.latent_width * scale);
  auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  std::vector<torch::Tensor> out;
  for (int64_t r = 0; r < grid.rows; ++r) {
    auto y = torch::tensor(wy[r], f64);
    for (int64_t c = 0; c < grid.cols; ++c) out.push_back(torch::outer(y, torch::tensor(wx[c], f64)));
  }
  return out;
}

TileBlend::TileBlend(const TileGrid& grid, int64_t scale, torch::Device device, torch::ScalarType model_dtype)
    : grid_(grid), scale_(scale), sum_dtype_(accumulation_dtype(model_dtype)) {
  for (const auto& w : blend_weights(grid_, scale_))
    weights_.push_back(w.to(device, sum_dtype_).view({1, 1, 1, w.size(0), w.size(1)}));
}

void TileBlend::add(size_t index, const torch::Tensor& out) {
  if (!sum_.defined()) {
    out_dtype_ = out.scalar_type();
    auto sizes = out.sizes().vec();
    sizes[3] = grid_.latent_height * scale_;
    sizes[4] = grid_.latent_width * scale_;
    sum_ = torch::zeros(sizes, out.options().device(weights_[index].device()).dtype(sum_dtype_));
  }
  if (out.size(2) == 0) return;
  const int64_t r = static_cast<int64_t>(index) / grid_.cols, c = static_cast<int64_t>(index) % grid_.cols;
  sum_.narrow(3, grid_.row_origin(r) * scale_, out.size(3))
      .narrow(4, grid_.col_origin(c) * scale_, out.size(4))
      .add_(out.to(sum_.device(), sum_dtype_) * weights_[index]);
}

torch::Tensor TileBlend::take() {
  torch::Tensor frame = sum_.to(out_dtype_);
  sum_ = torch::Tensor();
  return frame;
}

TileSet::TileSet(VaeModel& model, Device& device, TileGrid grid, Op op, bool offload)
    : model_(model), device_(device), grid_(grid), op_(op), offload_(offload) {
  tiles_.resize(static_cast<size_t>(grid_.count()));
  for (int64_t r = 0; r < grid_.rows; ++r)
    for (int64_t c = 0; c < grid_.cols; ++c) {
      Tile& t = tiles_[static_cast<size_t>(r * grid_.cols + c)];
      t.row = grid_.row_origin(r);
      t.col = grid_.col_origin(c);
    }
}

TileSet::~TileSet() {
  // Copies may still be in flight into host memory the tiles own.
  for (Tile& tile : tiles_) {
    if (tile.uploaded.isCreated()) tile.uploaded.synchronize();
    if (tile.downloaded.isCreated()) tile.downloaded.synchronize();
  }
}

// Note [Offloaded caches]
// With offload on a CUDA device, the caches of the tiles not running wait in pinned host memory, and their
// copies run on two side streams, one each way, so that they overlap the model: while tile i runs, tile i+1's
// cache goes up and tile i-1's comes down (the last tile of a chunk fetches the first one of the next chunk).
// Tile i+1's upload starts only once tile i-1's model call is done, so at most three tiles' caches are on the
// device at once (the planner counts three). A tile's upload also waits for its own previous download, and
// each slot's cache comes back into the same pinned buffer every time (host memory: one copy of the caches).
// All device memory comes from the compute stream's pool (a copy stream's pool would keep its freed blocks
// out of the model's reach): an upload allocates on the compute stream, and its copy waits for everything
// queued there so far (the `allocated` event, which also orders it after tile i-1's call). A cache going down
// keeps its device memory until the next tile's model call is queued; the compute stream then waits for that
// copy (done long before, unless the copies are slower than the model) and frees it, so freed memory never
// waits on another stream's events. Off CUDA, `offload` changes nothing: the caches are in host memory
// already.
void TileSet::upload(Tile& tile) {
  const torch::Device device = device_.torch_device();
  c10::cuda::CUDAStream up = device_.stream(Device::Lane::kCacheUpload);
  tile.cache.rewind();
  std::vector<std::pair<CausalCache::Slot*, torch::Tensor>> copies;
  for (size_t i = 0; i < tile.cache.size(); ++i) {
    CausalCache::Slot& slot = tile.cache.next();
    if (slot.history.defined() && slot.history.device() != device)
      copies.emplace_back(&slot, torch::empty_like(slot.history, slot.history.options().device(device)));
  }
  tile.cache.rewind();
  tile.allocated.record(device_.compute_stream());
  c10::cuda::CUDAStreamGuard guard(up);
  tile.allocated.block(up);
  if (tile.downloaded.isCreated()) tile.downloaded.block(up);
  for (auto& [slot, target] : copies) {
    target.copy_(slot->history, /*non_blocking=*/true);
    slot->history = target;
  }
  tile.uploaded.record(up);
  tile.uploading = true;
}

void TileSet::download(Tile& tile) {
  c10::cuda::CUDAStream down = device_.stream(Device::Lane::kCacheDownload);
  tile.computed.record(device_.compute_stream());
  c10::cuda::CUDAStreamGuard guard(down);
  tile.computed.block(down);
  tile.cache.rewind();
  for (size_t i = 0; i < tile.cache.size(); ++i) {
    CausalCache::Slot& slot = tile.cache.next();
    if (!slot.history.defined() || !slot.history.is_cuda()) continue;
    // The slot's host buffer from the last visit is free again: its upload finished before the model call
    // that this download waits for.
    if (tile.host.size() <= i) tile.host.resize(i + 1);
    torch::Tensor& host = tile.host[i];
    if (!host.defined() || host.sizes() != slot.history.sizes() || host.strides() != slot.history.strides() ||
        host.scalar_type() != slot.history.scalar_type())
      host = device_.host_like(slot.history);  // one block, strides kept
    host.copy_(slot.history, /*non_blocking=*/true);
    tile.leaving.push_back(slot.history);
    slot.history = host;
  }
  tile.cache.rewind();
  tile.downloaded.record(down);
  tile.uploading = false;
}

int64_t TileSet::cache_bytes() const {
  int64_t n = 0;
  for (const Tile& t : tiles_) n += t.cache.bytes();
  return n;
}

torch::Tensor TileSet::run(const torch::Tensor& x) {
  torch::InferenceMode guard;
  const torch::Device device = device_.torch_device();
  const torch::ScalarType dtype = model_.dtype();
  const bool encode = op_ == Op::kEncode;
  auto call = [&](const torch::Tensor& input, CausalCache& cache) {
    const bool pinned = input.device().is_cpu() && input.is_pinned();
    auto on_device = (encode ? input.to(device, dtype, /*non_blocking=*/pinned) : input.to(device, pinned))
                         .contiguous(model_.memory_format());
    before_model_call();
    return encode ? model_.encode(on_device, cache) : model_.decode(on_device, cache);
  };
  const int64_t f = model_.info().spatial_factor;
  const int64_t in_scale = encode ? f : 1, out_scale = encode ? 1 : f;
  if (!blend_) blend_ = std::make_unique<TileBlend>(grid_, out_scale, device, dtype);
  const bool overlap = offload_ && device.is_cuda();
  for (size_t i = 0; i < tiles_.size(); ++i) {
    Tile& tile = tiles_[i];
    const torch::Tensor crop = x.narrow(3, tile.row * in_scale, grid_.tile_height * in_scale)
                                   .narrow(4, tile.col * in_scale, grid_.tile_width * in_scale);
    torch::Tensor out;
    if (overlap) {
      if (!tile.uploading) upload(tile);
      tile.uploaded.block(device_.compute_stream());
      Tile& next = tiles_[(i + 1) % tiles_.size()];
      if (&next != &tile && !next.uploading) upload(next);
      out = call(crop, tile.cache);
      download(tile);
      // The tile before this one has been going down while this one ran: once it is down its device memory
      // returns to the compute stream's pool, before the next model call.
      if (leaving_ != nullptr) {
        leaving_->downloaded.block(device_.compute_stream());
        leaving_->leaving.clear();
      }
      leaving_ = &tile;
    } else {
      out = call(crop, tile.cache);  // off CUDA the caches stay where they are: in host memory already
    }
    blend_->add(i, out);
  }
  return blend_->take();
}

std::unique_ptr<TileSet> make_tile_set(VaeModel& model, Device& device, const TileGrid& grid, Op op,
                                       bool offload, int64_t latent_height, int64_t latent_width) {
  const TileGrid resolved = resolve_grid(grid, latent_height, latent_width);
  if (!resolved.tiled()) return nullptr;
  return std::make_unique<TileSet>(model, device, resolved, op, offload);
}

}  // namespace vaecodec::core
