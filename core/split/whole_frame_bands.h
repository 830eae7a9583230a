#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include <torch/torch.h>

#include "core/causal_cache.h"
#include "core/device/device.h"
#include "core/place.h"
#include "core/planner.h"
#include "core/split/parking.h"
#include "core/split/places.h"
#include "core/vae_model.h"

namespace vaecodec::core {

// Note [Whole-frame part in bands]
// Exact tiles shared out among devices (Note [Exact tiles across devices] in core/split/exact_tiles.h) run
// the model's whole-frame part (VaeModel::decode_features and decode_features_end before a window's tiles,
// encode_features after them: the layers at latent resolution, with the middle's attention) as a band split
// runs the whole model (Note [Bands across devices] in core/band_exchange.h): each place owns a band of
// whole latent rows (band_rows; with fewer rows than places, one row each and the last places idle) and its
// own whole-frame cache for those rows, and runs its rows of every chunk of the window on its worker, inside
// one BandLink for the window, so its layers exchange halo rows and gather the attention's keys and values
// in step with the other bands. Each band's features go into their rows of the window's features on the
// run's device as each chunk is done (decode), or each band reads its rows of the gathered features and its
// latents are joined there (encode). So every band's output is the one-device whole-frame part's rows, and
// no device holds more whole-frame cache than the one-device run held. With one place the part runs on the
// calling thread over the whole frame, with no band context at all, as it always did.

// x on `place`'s device as its model takes it: its memory format, and its dtype where `convert_dtype`; a
// copy from page-locked host memory does not block, and paged host memory bound for a GPU (a crop of a
// window's features kept there: Note [A window's features in host memory] in core/split/exact_tiles.cpp) is
// gathered into page-locked memory first, so that neither does its copy.
torch::Tensor to_place(const torch::Tensor& x, const BandPlace& place, bool convert_dtype);

// A window's features at latent resolution along time, written chunk by chunk (a band's rows at a time,
// from any thread) and grown where more come than the window has latent frames (a look-ahead decoder's
// held-back ones, at the end of the clip: Note [Held-back frames of exact tiles] in exact_tiles.cpp).
class WindowFeatures {
 public:
  // frames: the window's latent frames (the least length kept); device: where the features are.
  WindowFeatures(int64_t frames, torch::Device device) : frames_(frames), device_(device) {}
  // Writes `part` ([B, C, t, rows, w], any device) at frames [at, at + t) and rows [row, row + rows) of a
  // frame `height` latent rows high.
  void write(const torch::Tensor& part, int64_t at, int64_t row, int64_t height);
  // The frames written, [B, C, n, h, w]; undefined when none were.
  torch::Tensor take();

 private:
  std::mutex mutex_;
  int64_t frames_;
  torch::Device device_;
  torch::Tensor features_;
  int64_t written_ = 0;  // the frames up to the last one written
};

// The whole-frame part of the exact tiles of one run, in bands across their places (Note [Whole-frame part in
// bands]).
class WholeFrameBands {
 public:
  // places: the tiles' places (one: the run's own); workers: their workers, one per place in that order
  // (null with one place); latent_height: the frame's latent rows, cut into the bands.
  WholeFrameBands(const std::vector<BandPlace>& places, Places* workers, int64_t latent_height);
  size_t size() const { return bands_.size(); }
  int64_t cache_bytes() const;
  // What becomes of the caches once a decode window's whole-frame part is done (Note [The whole-frame cache
  // ends with the clip] in core/split/exact_tiles.cpp): kept on the device, parked in host memory until the
  // next window, or dropped (the clip's last window).
  enum class After { kKeep, kPark, kDrop };
  // Decode: each of `chunks` (the window's latents chunk by chunk, [B, z, n, h, w], any device) through
  // decode_features, and decode_features_end after them when `ends`; the window's features on `out`, or in
  // host memory where `host` (undefined when none were settled). frames: the window's latent frames.
  torch::Tensor decode(const std::vector<torch::Tensor>& chunks, bool ends, int64_t frames, Device& out,
                       After after = After::kKeep, bool host = false);
  // Encode: `features` (the window's, [B, C, n, h, w]) through encode_features in chunks of `chunk` frames;
  // the window's latents on `out`.
  torch::Tensor encode(const torch::Tensor& features, int64_t chunk, Device& out);

 private:
  struct Band {
    BandPlace place;
    BandRows rows;
    CausalCache cache;                       // the whole-frame part's, for these rows
    CacheParking parking{/*pinned=*/false};  // its copies to host memory between windows
  };
  // work(band, i) for every band: on the calling thread with one place, else each band on its place's
  // worker in one BandLink; `out`'s work queued so far is done before, and each band's (with its copies to
  // `out`) when it returns.
  void run(const std::function<void(Band&, size_t)>& work, Device& out);

  std::vector<Band> bands_;
  Places* workers_;
  int64_t height_;
};

}  // namespace vaecodec::core
