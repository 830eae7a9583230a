#include "core/tiling.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace vaecodec::core {
namespace {

torch::Tensor append(const torch::Tensor& pending, const torch::Tensor& more) {
  if (!pending.defined() || pending.size(2) == 0) return more;
  return torch::cat({pending, more}, 2);
}

torch::Tensor join(std::vector<torch::Tensor>& parts) {
  if (parts.empty()) return {};
  if (parts.size() == 1) return parts.front();
  return torch::cat(parts, 2);
}

// Raised-cosine weights of the tiles along one axis (Note [Tile blending]), normalized to sum to 1.
// origins and length in output pixels; extent is the axis's length.
std::vector<std::vector<double>> axis_weights(const std::vector<int64_t>& origins, int64_t length, int64_t extent) {
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
        w[i][x] *= 0.5 + 0.5 * std::cos(pi * (static_cast<double>(x - start) + 0.5) / static_cast<double>(shared));
    }
  }
  std::vector<double> sum(static_cast<size_t>(extent), 0.0);
  for (size_t i = 0; i < n; ++i)
    for (int64_t x = 0; x < length; ++x) sum[origins[i] + x] += w[i][x];
  for (size_t i = 0; i < n; ++i)
    for (int64_t x = 0; x < length; ++x) w[i][x] /= sum[origins[i] + x];
  return w;
}

// Moves a cache's history to `device` (pinned host memory when leaving a CUDA device, so the copies overlap).
void move_cache(CausalCache& cache, torch::Device device) {
  cache.rewind();
  for (size_t i = 0; i < cache.size(); ++i) {
    CausalCache::Slot& slot = cache.next();
    if (!slot.history.defined() || slot.history.device() == device) continue;
    if (device.is_cpu()) {
      torch::Tensor host = torch::empty(slot.history.sizes(),
                                        slot.history.options().device(torch::kCPU).pinned_memory(true));
      host.copy_(slot.history, /*non_blocking=*/true);
      slot.history = host;
    } else {
      slot.history = slot.history.to(device, /*non_blocking=*/true);
    }
  }
  cache.rewind();
}

torch::ScalarType accumulation_dtype(torch::ScalarType dtype) {
  return dtype == torch::kDouble ? torch::kDouble : torch::kFloat;
}

TileGrid resolve(const TileGrid& grid, int64_t latent_height, int64_t latent_width) {
  if (grid.latent_height == 0 && grid.latent_width == 0) return TileGrid::whole(latent_height, latent_width);
  if (grid.latent_height != latent_height || grid.latent_width != latent_width)
    throw Error("the tile plan is for " + std::to_string(grid.latent_width) + "x" +
                std::to_string(grid.latent_height) + " latent pixels, the frames are " +
                std::to_string(latent_width) + "x" + std::to_string(latent_height));
  return grid;
}

}  // namespace

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

TileSet::TileSet(VaeModel& model, TileGrid grid, Direction direction, bool offload)
    : model_(model), grid_(grid), direction_(direction), offload_(offload) {
  tiles_.resize(static_cast<size_t>(grid_.count()));
  for (int64_t r = 0; r < grid_.rows; ++r)
    for (int64_t c = 0; c < grid_.cols; ++c) {
      Tile& t = tiles_[static_cast<size_t>(r * grid_.cols + c)];
      t.row = grid_.row_origin(r);
      t.col = grid_.col_origin(c);
    }
}

int64_t TileSet::cache_bytes() const {
  int64_t n = 0;
  for (const Tile& t : tiles_) n += t.cache.bytes();
  return n;
}

torch::Tensor TileSet::run(const torch::Tensor& x) {
  torch::InferenceMode guard;
  const torch::Device device = model_.device();
  const torch::ScalarType dtype = model_.dtype();
  const bool encode = direction_ == Direction::kEncode;
  auto call = [&](const torch::Tensor& input, CausalCache& cache) {
    const bool pinned = input.device().is_cpu() && input.is_pinned();
    auto on_device = encode ? input.to(device, dtype, /*non_blocking=*/pinned) : input.to(device, pinned);
    return encode ? model_.encode(on_device, cache) : model_.decode(on_device, cache);
  };
  const int64_t f = model_.info().spatial_factor;
  const int64_t in_scale = encode ? f : 1, out_scale = encode ? 1 : f;
  if (!tiles_.front().weight.defined()) {
    const auto weights = blend_weights(grid_, out_scale);
    for (size_t i = 0; i < tiles_.size(); ++i)
      tiles_[i].weight = weights[i].to(device, accumulation_dtype(dtype)).view(
          {1, 1, 1, weights[i].size(0), weights[i].size(1)});
  }
  torch::Tensor sum;
  for (Tile& tile : tiles_) {
    const torch::Tensor crop = x.narrow(3, tile.row * in_scale, grid_.tile_height * in_scale)
                                   .narrow(4, tile.col * in_scale, grid_.tile_width * in_scale)
                                   .contiguous();
    if (offload_) move_cache(tile.cache, device);
    const torch::Tensor out = call(crop, tile.cache);
    if (offload_) move_cache(tile.cache, torch::kCPU);
    if (!sum.defined()) {
      auto sizes = out.sizes().vec();
      sizes[3] = grid_.latent_height * out_scale;
      sizes[4] = grid_.latent_width * out_scale;
      sum = torch::zeros(sizes, out.options().dtype(accumulation_dtype(dtype)));
    }
    if (out.size(2) == 0) continue;
    sum.narrow(3, tile.row * out_scale, out.size(3))
        .narrow(4, tile.col * out_scale, out.size(4))
        .add_(out.to(sum.scalar_type()) * tile.weight);
  }
  return sum.to(dtype);
}

TiledEncodeRun::TiledEncodeRun(VaeModel& model, ChunkOptions chunks, TileGrid tiles, bool offload)
    : model_(model), chunks_(chunks), grid_(tiles), offload_(offload) {
  if (chunks_.latent_frames < 1) throw Error("chunk length must be at least 1 latent frame");
}

torch::Tensor TiledEncodeRun::push(const torch::Tensor& frames) {
  if (frames.dim() != 5 || frames.size(1) != 3)
    throw Error("encode expects frames shaped [B, 3, T, H, W], got " + std::to_string(frames.dim()) + "-D");
  const int64_t f = model_.info().spatial_factor;
  if (frames.size(3) % f || frames.size(4) % f)
    throw Error("frame size " + std::to_string(frames.size(4)) + "x" + std::to_string(frames.size(3)) +
                " is not a multiple of " + std::to_string(f));
  if (!whole_ && !tiles_) {
    grid_ = resolve(grid_, frames.size(3) / f, frames.size(4) / f);
    if (grid_.tiled())
      tiles_ = std::make_unique<TileSet>(model_, grid_, TileSet::Direction::kEncode, offload_);
    else
      whole_ = std::make_unique<EncodeRun>(model_, chunks_);
  }
  frames_in_ += frames.size(2);
  if (whole_) return whole_->push(frames);
  pending_ = append(pending_, frames);
  const int64_t tf = model_.info().temporal_factor;
  std::vector<torch::Tensor> out;
  while (true) {
    const bool first = frames_in_ == pending_.size(2);  // nothing run yet (Note [Chunks])
    const int64_t need = first ? 1 + (chunks_.latent_frames - 1) * tf : chunks_.latent_frames * tf;
    if (pending_.size(2) < need) break;
    out.push_back(tiles_->run(pending_.narrow(2, 0, need)));
    pending_ = pending_.narrow(2, need, pending_.size(2) - need);
  }
  return join(out);
}

torch::Tensor TiledEncodeRun::finish() {
  if (whole_) return whole_->finish();
  const int64_t tf = model_.info().temporal_factor;
  if (frames_in_ == 0) throw Error("nothing to encode: no frames");
  if ((frames_in_ - 1) % tf != 0)
    throw Error("encode needs 1 + " + std::to_string(tf) + "k frames, got " + std::to_string(frames_in_));
  if (!pending_.defined() || pending_.size(2) == 0) return {};
  auto out = tiles_->run(pending_);
  pending_ = torch::Tensor();
  return out;
}

TiledDecodeRun::TiledDecodeRun(VaeModel& model, ChunkOptions chunks, TileGrid tiles, bool offload)
    : model_(model), chunks_(chunks), grid_(tiles), offload_(offload) {
  if (chunks_.latent_frames < 1) throw Error("chunk length must be at least 1 latent frame");
}

torch::Tensor TiledDecodeRun::push(const torch::Tensor& latents) {
  if (latents.dim() != 5 || latents.size(1) != model_.info().latent_channels)
    throw Error("decode expects latents shaped [B, " + std::to_string(model_.info().latent_channels) +
                ", T, h, w], got " + std::to_string(latents.dim()) + "-D with " +
                std::to_string(latents.dim() > 1 ? latents.size(1) : 0) + " channels");
  if (!whole_ && !tiles_) {
    grid_ = resolve(grid_, latents.size(3), latents.size(4));
    if (grid_.tiled())
      tiles_ = std::make_unique<TileSet>(model_, grid_, TileSet::Direction::kDecode, offload_);
    else
      whole_ = std::make_unique<DecodeRun>(model_, chunks_);
  }
  if (whole_) return whole_->push(latents);
  pending_ = append(pending_, latents);
  latents_in_ += latents.size(2);
  std::vector<torch::Tensor> out;
  const int64_t n = chunks_.latent_frames;
  while (pending_.size(2) >= n) {
    out.push_back(tiles_->run(pending_.narrow(2, 0, n)));
    pending_ = pending_.narrow(2, n, pending_.size(2) - n);
  }
  return join(out);
}

torch::Tensor TiledDecodeRun::finish() {
  if (whole_) return whole_->finish();
  if (latents_in_ == 0) throw Error("nothing to decode: no latent frames");
  if (!pending_.defined() || pending_.size(2) == 0) return {};
  auto out = tiles_->run(pending_);
  pending_ = torch::Tensor();
  return out;
}

torch::Tensor encode_video_tiled(VaeModel& model, const torch::Tensor& video, ChunkOptions chunks,
                                 const TileGrid& tiles, bool offload) {
  TiledEncodeRun run(model, chunks, tiles, offload);
  std::vector<torch::Tensor> parts;
  if (auto a = run.push(video); a.defined()) parts.push_back(a);
  if (auto b = run.finish(); b.defined()) parts.push_back(b);
  return join(parts);
}

torch::Tensor decode_latents_tiled(VaeModel& model, const torch::Tensor& latents, ChunkOptions chunks,
                                   const TileGrid& tiles, bool offload) {
  TiledDecodeRun run(model, chunks, tiles, offload);
  std::vector<torch::Tensor> parts;
  if (auto a = run.push(latents); a.defined()) parts.push_back(a);
  if (auto b = run.finish(); b.defined()) parts.push_back(b);
  return join(parts);
}

}  // namespace vaecodec::core
