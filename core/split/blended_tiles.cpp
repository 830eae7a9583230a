#include "core/split/blended_tiles.h"

#include <cmath>
#include <functional>
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

BlendedTiles::BlendedTiles(VaeModel& model, Device& device, TileGrid grid, Op op, bool offload, int64_t chunk)
    : ChunkedSplit(op, chunk, model.info().temporal_factor),
      model_(model),
      device_(device),
      grid_(grid),
      offload_(offload) {
  tiles_.resize(static_cast<size_t>(grid_.count()));
  for (int64_t r = 0; r < grid_.rows; ++r)
    for (int64_t c = 0; c < grid_.cols; ++c) {
      Tile& t = tiles_[static_cast<size_t>(r * grid_.cols + c)];
      t.row = grid_.row_origin(r);
      t.col = grid_.col_origin(c);
    }
}

BlendedTiles::~BlendedTiles() = default;

int64_t BlendedTiles::cache_bytes() const {
  int64_t n = 0;
  for (const Tile& t : tiles_) n += t.cache.bytes();
  return n;
}

torch::Tensor BlendedTiles::run_chunk(const torch::Tensor& x) {
  torch::InferenceMode guard;
  const torch::Device device = device_.torch_device();
  const torch::ScalarType dtype = model_.dtype();
  const bool encode = op_ == Op::kEncode;
  const int64_t f = model_.info().spatial_factor;
  const int64_t in_scale = encode ? f : 1;
  if (!blend_) blend_ = std::make_unique<TileBlend>(grid_, encode ? 1 : f, device, dtype);
  for (size_t i = 0; i < tiles_.size(); ++i) {
    const Tile& tile = tiles_[i];
    const torch::Tensor crop = x.narrow(3, tile.row * in_scale, grid_.tile_height * in_scale)
                                   .narrow(4, tile.col * in_scale, grid_.tile_width * in_scale);
    blend_->add(i, run_tile(i, [&](CausalCache& cache) {
                  const bool pinned = crop.device().is_cpu() && crop.is_pinned();
                  auto on_device =
                      (encode ? crop.to(device, dtype, /*non_blocking=*/pinned) : crop.to(device, pinned))
                          .contiguous(model_.memory_format());
                  before_model_call();
                  return encode ? model_.encode(on_device, cache) : model_.decode(on_device, cache);
                }));
  }
  return blend_->take();
}

// Note [Held-back frames of a split]
// A decoder that looks ahead (Note [Decoders that look ahead] in core/vae_model.h) keeps the last frames of
// every cache it runs with until the clip ends. Blended tiles end each tile's cache (decode_end, the cache on
// the device as for a chunk) and blend the tiles' held-back frames with the chunks' weights: they are the
// same rows and columns of the same tiles, later in time, so the tiled clip is the same for any chunking.
torch::Tensor BlendedTiles::end() {
  if (op_ != Op::kDecode || model_.info().decode_lag <= 0 || !blend_) return {};
  torch::InferenceMode guard;
  bool held = false;
  for (size_t i = 0; i < tiles_.size(); ++i) {
    torch::Tensor out = run_tile(i, [&](CausalCache& cache) {
      before_model_call();
      return model_.decode_end(cache);
    });
    if (!out.defined()) continue;  // every tile alike: nothing ran
    blend_->add(i, out);
    held = true;
  }
  if (!held) return {};
  torch::Tensor frames = blend_->take();
  return frames.size(2) > 0 ? frames : torch::Tensor();
}

torch::Tensor BlendedTiles::run_tile(size_t i, const std::function<torch::Tensor(CausalCache&)>& call) {
  Tile& tile = tiles_[i];
  if (!offload_ || !device_.torch_device().is_cuda())
    return call(tile.cache);  // off CUDA the caches stay where they are: in host memory already
  // Note [Offloaded caches]
  if (!tile.parking.uploading()) tile.parking.upload(tile.cache, device_);
  tile.parking.wait_uploaded(device_);
  Tile& next = tiles_[(i + 1) % tiles_.size()];
  if (&next != &tile && !next.parking.uploading()) next.parking.upload(next.cache, device_);
  torch::Tensor out = call(tile.cache);
  tile.parking.download(tile.cache, device_);
  // The tile before this one has been going down while this one ran: once it is down its device memory
  // returns to the compute stream's pool, before the next model call.
  if (leaving_ != nullptr) leaving_->parking.release(device_);
  leaving_ = &tile;
  return out;
}

}  // namespace vaecodec::core
