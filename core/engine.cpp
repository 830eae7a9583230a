#include "core/engine.h"

#include <string>

#include "core/device/memory_faults.h"
#include "core/error.h"
#include "core/exact_tiles.h"
#include "core/tiling.h"

namespace vaecodec::core {
namespace {

torch::Tensor append(const torch::Tensor& pending, const torch::Tensor& more) {
  if (!pending.defined() || pending.size(2) == 0) return more;
  return torch::cat({pending, more}, 2);
}

torch::Tensor join(std::vector<torch::Tensor>& parts) {
  if (parts.empty()) return {};  // every frame went to ChunkOptions::emit
  if (parts.size() == 1) return parts.front();
  return torch::cat(parts, 2);
}

// A run's model must be on the run's device: the engine moves its inputs there and queues copies on its
// streams.
void check_placed(const VaeModel& model, const Device& device) {
  if (model.device() != device.torch_device())
    throw Error("the model is on " + model.device().str() + ", the run on " + device.torch_device().str());
}

// A band split: two or more bands, each cut into the grid's columns if it has several.
std::unique_ptr<BandSet> make_band_set(const ChunkOptions& chunks, Device& device, Op op,
                                       int64_t latent_height, int64_t latent_width) {
  if (chunks.bands.size() < 2) return nullptr;
  const TileGrid grid = resolve_grid(chunks.tiles, latent_height, latent_width);
  if (grid.tiled() && chunks.offload)
    throw Error(
        "a run split across devices keeps its columns' caches on the devices: it does not offload them");
  return std::make_unique<BandSet>(chunks.bands, device, op, grid);
}

// Tiles through time where the plan asks for them: exact parts, or SeedVR2's blended tiles, on a model whose
// trunks are local; with bands, exact tiles are shared out among their places.
std::unique_ptr<ExactTiles> make_exact_tiles(const ChunkOptions& chunks, VaeModel& model, Device& device,
                                             Op op, int64_t latent_height, int64_t latent_width) {
  if (!chunks.runs_through_time()) return nullptr;
  const TileGrid grid = resolve_grid(chunks.tiles, latent_height, latent_width);
  return std::make_unique<ExactTiles>(model, device, grid, op, chunks.latent_frames, chunks.host_window,
                                      ExactTiles::Hooks{chunks.progress, chunks.emit},
                                      chunks.bands);  // a split whose bands do not fit
}

}  // namespace

// Note [Chunks]
// Encode: the first chunk is frame 0 plus (latent_frames - 1) * temporal_factor frames, every later chunk
// latent_frames * temporal_factor frames; the last may be shorter but stays a multiple of the temporal
// factor. Decode: chunks of latent_frames latent frames. The models carry their history across chunks in the
// run's CausalCache, so the output does not depend on where the cuts fall.
EncodeRun::EncodeRun(VaeModel& model, Device& device, ChunkOptions chunks)
    : model_(model), device_(device), chunks_(chunks) {
  if (chunks_.latent_frames < 1) throw Error("chunk length must be at least 1 latent frame");
  check_placed(model, device);
}

EncodeRun::~EncodeRun() = default;

torch::Tensor EncodeRun::run_chunk(const torch::Tensor& frames) {
  torch::InferenceMode guard;
  if (bands_) return bands_->run(frames);
  if (tiles_) return tiles_->run(frames);
  auto x = frames.to(device_.torch_device(), model_.dtype(), /*non_blocking=*/frames.is_pinned())
               .contiguous(model_.memory_format());
  before_model_call();
  return model_.encode(x, cache_);
}

torch::Tensor EncodeRun::push(const torch::Tensor& frames) {
  if (frames.dim() != 5 || frames.size(1) != 3)
    throw Error("encode expects frames shaped [B, 3, T, H, W], got " + std::to_string(frames.dim()) + "-D");
  const int64_t f = model_.info().spatial_factor;
  if (frames.size(3) % f || frames.size(4) % f)
    throw Error("frame size " + std::to_string(frames.size(4)) + "x" + std::to_string(frames.size(3)) +
                " is not a multiple of " + std::to_string(f));
  if (frames_in_ == 0) {
    exact_ = make_exact_tiles(chunks_, model_, device_, Op::kEncode, frames.size(3) / f, frames.size(4) / f);
    if (!exact_)
      bands_ = make_band_set(chunks_, device_, Op::kEncode, frames.size(3) / f, frames.size(4) / f);
    if (!exact_ && !bands_)
      tiles_ = make_tile_set(model_, device_, chunks_.tiles, Op::kEncode, chunks_.offload, frames.size(3) / f,
                             frames.size(4) / f);
  }
  const int64_t tf = model_.info().temporal_factor;
  if (exact_) return push_window(frames);
  pending_ = append(pending_, frames);
  frames_in_ += frames.size(2);
  std::vector<torch::Tensor> out;
  while (true) {
    const bool first = frames_in_ == pending_.size(2);  // nothing run yet
    const int64_t need = first ? 1 + (chunks_.latent_frames - 1) * tf : chunks_.latent_frames * tf;
    if (pending_.size(2) < need) break;
    out.push_back(run_chunk(pending_.narrow(2, 0, need)));
    pending_ = pending_.narrow(2, need, pending_.size(2) - need);
  }
  if (out.empty()) return {};
  return join(out);
}

torch::Tensor EncodeRun::finish() {
  const int64_t tf = model_.info().temporal_factor;
  if (frames_in_ == 0) throw Error("nothing to encode: no frames");
  if ((frames_in_ - 1) % tf != 0)
    throw Error("encode needs 1 + " + std::to_string(tf) + "k frames, got " + std::to_string(frames_in_));
  if (exact_)
    return window_->empty() ? torch::Tensor() : exact_->run_window(window_->take(window_->size()), false);
  if (!pending_.defined() || pending_.size(2) == 0) return {};
  auto out = run_chunk(pending_);
  pending_ = torch::Tensor();
  return out;
}

// Exact tiles (Note [Tiles through time] in core/exact_tiles.h): frames wait until a window is full, its
// first tile running ahead over the chunks that have come (Note [A window's edges stream]).
torch::Tensor EncodeRun::push_window(const torch::Tensor& frames) {
  torch::InferenceMode guard;
  if (!window_) window_ = std::make_unique<Pieces>();
  window_->push(exact_->keep(frames));
  frames_in_ += frames.size(2);
  const int64_t tf = model_.info().temporal_factor;
  std::vector<torch::Tensor> out;
  while (true) {
    // The window's frames; 0: the rest of the clip.
    const int64_t need = chunks_.window == 0 ? 0
                         : windows_ == 0     ? 1 + tf * (chunks_.window - 1)
                                             : tf * chunks_.window;
    // A window runs once a frame past it has come: the last window is run by finish(), without `more`.
    if (need == 0 || window_->size() <= need) {
      exact_->advance(*window_, need);
      break;
    }
    out.push_back(exact_->run_window(window_->take(need), /*more=*/true));
    ++windows_;
  }
  if (out.empty()) return {};
  return join(out);
}

DecodeRun::DecodeRun(VaeModel& model, Device& device, ChunkOptions chunks)
    : model_(model), device_(device), chunks_(chunks) {
  if (chunks_.latent_frames < 1) throw Error("chunk length must be at least 1 latent frame");
  check_placed(model, device);
}

DecodeRun::~DecodeRun() = default;

torch::Tensor DecodeRun::run_chunk(const torch::Tensor& latents) {
  torch::InferenceMode guard;
  if (bands_) return bands_->run(latents);
  if (tiles_) return tiles_->run(latents);
  auto z = latents.to(device_.torch_device(), /*non_blocking=*/latents.is_pinned())
               .contiguous(model_.memory_format());
  before_model_call();
  return model_.decode(z, cache_);
}

torch::Tensor DecodeRun::push(const torch::Tensor& latents) {
  if (latents.dim() != 5 || latents.size(1) != model_.info().latent_channels)
    throw Error("decode expects latents shaped [B, " + std::to_string(model_.info().latent_channels) +
                ", T, h, w], got " + std::to_string(latents.dim()) + "-D with " +
                std::to_string(latents.dim() > 1 ? latents.size(1) : 0) + " channels");
  if (latents_in_ == 0) {
    // Note [Decoders that look ahead]: tiles and bands run their own chunks, which do not yet end the clip.
    if (model_.info().decode_lag > 0 &&
        (chunks_.runs_through_time() || chunks_.bands.size() >= 2 ||
         resolve_grid(chunks_.tiles, latents.size(3), latents.size(4)).tiled()))
      throw Error(model_.info().family +
                  ": its decoder looks ahead in time; decode tiles and bands are not implemented for it yet");
    exact_ = make_exact_tiles(chunks_, model_, device_, Op::kDecode, latents.size(3), latents.size(4));
    if (!exact_) bands_ = make_band_set(chunks_, device_, Op::kDecode, latents.size(3), latents.size(4));
    if (!exact_ && !bands_)
      tiles_ = make_tile_set(model_, device_, chunks_.tiles, Op::kDecode, chunks_.offload, latents.size(3),
                             latents.size(4));
  }
  if (exact_) return push_window(latents);
  pending_ = append(pending_, latents);
  latents_in_ += latents.size(2);
  std::vector<torch::Tensor> out;
  while (pending_.size(2) >= chunks_.latent_frames) {
    out.push_back(run_chunk(pending_.narrow(2, 0, chunks_.latent_frames)));
    pending_ = pending_.narrow(2, chunks_.latent_frames, pending_.size(2) - chunks_.latent_frames);
  }
  if (out.empty()) return {};
  return join(out);
}

torch::Tensor DecodeRun::finish() {
  if (latents_in_ == 0) throw Error("nothing to decode: no latent frames");
  if (exact_)
    return window_->empty() ? torch::Tensor() : exact_->run_window(window_->take(window_->size()), false);
  std::vector<torch::Tensor> out;
  if (pending_.defined() && pending_.size(2) > 0) out.push_back(run_chunk(pending_));
  pending_ = torch::Tensor();
  // What a decoder that looks ahead held back (Note [Decoders that look ahead]); the first push refused
  // tiles and bands for such a decoder.
  if (model_.info().decode_lag > 0) {
    torch::InferenceMode guard;
    if (auto held = model_.decode_end(cache_); held.defined() && held.size(2) > 0)
      out.push_back(std::move(held));
  }
  if (out.empty()) return {};
  return join(out);
}

torch::Tensor DecodeRun::push_window(const torch::Tensor& latents) {
  torch::InferenceMode guard;
  if (!window_) window_ = std::make_unique<Pieces>();
  window_->push(exact_->keep(latents));
  latents_in_ += latents.size(2);
  std::vector<torch::Tensor> out;
  while (chunks_.window > 0 && window_->size() > chunks_.window) {
    torch::Tensor frames = exact_->run_window(window_->take(chunks_.window), /*more=*/true);
    if (frames.defined()) out.push_back(std::move(frames));  // not when emitted
  }
  if (out.empty()) return {};
  return join(out);
}

torch::Tensor encode_video(VaeModel& model, const torch::Tensor& video, ChunkOptions chunks) {
  EncodeRun run(model, Device::of(model.device()), chunks);
  std::vector<torch::Tensor> parts;
  if (auto a = run.push(video); a.defined()) parts.push_back(a);
  if (auto b = run.finish(); b.defined()) parts.push_back(b);
  return join(parts);
}

torch::Tensor decode_latents(VaeModel& model, const torch::Tensor& latents, ChunkOptions chunks) {
  DecodeRun run(model, Device::of(model.device()), chunks);
  std::vector<torch::Tensor> parts;
  if (auto a = run.push(latents); a.defined()) parts.push_back(a);
  if (auto b = run.finish(); b.defined()) parts.push_back(b);
  return join(parts);
}

}  // namespace vaecodec::core
