#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <ATen/cuda/CUDAEvent.h>
#include <torch/torch.h>

#include "core/band_exchange.h"
#include "core/causal_cache.h"
#include "core/device/device.h"
#include "core/op.h"
#include "core/place.h"
#include "core/planner.h"
#include "core/split/blended_tiles.h"
#include "core/split/places.h"
#include "core/split/split.h"
#include "core/vae_model.h"

namespace vaecodec::core {

// The bands of a run (Note [Bands across devices]): one model call per band and column per chunk, each band
// on its place's worker (Note [Places]: a thread kept for the process, its device current and a stream of its
// own; LibTorch's inference mode on), and the bands' outputs joined into the frame on the run's device.
class Bands : public ChunkedSplit {
 public:
  // columns: the frame's grid in latent pixels, one row of tiles (TileGrid::whole: the bands are not cut).
  // Every place's model must be of the same family and weights (the caller's business) and on its place's
  // device.
  // chunk: latent frames per chunk.
  Bands(std::vector<BandPlace> places, Device& out_device, Op op, const TileGrid& columns, int64_t chunk);
  ~Bands() override;
  Bands(const Bands&) = delete;
  Bands& operator=(const Bands&) = delete;
  int64_t cache_bytes() const override;

 private:
  torch::Tensor run_chunk(const torch::Tensor& x) override;
  // Decode: the bands' held-back frames (Note [Held-back frames of a split] in blended_tiles.cpp).
  torch::Tensor end() override;
  // Every band's columns of `inputs` (by band, then column, on the bands' devices) through its model at once,
  // joined into the frame on the run's device; no inputs: every band ends its caches (end()).
  torch::Tensor run_bands(std::vector<std::vector<torch::Tensor>> inputs);
  struct Band {
    BandPlace place;
    BandRows rows;
    std::vector<CausalCache> caches;  // one per column
  };
  // Band i of the chunk in hand, on its place's worker inside its band (run_linked_bands).
  void run_band(size_t i);

  std::vector<Band> bands_;
  Device& out_device_;
  TileGrid columns_;
  std::unique_ptr<TileBlend> blend_;  // made at the first chunk when there are several columns

  // The chunk in hand: run() sets the inputs (each band's columns on its device) before the bands run, each
  // band's worker sets its outputs (under mutex_).
  std::mutex mutex_;
  std::vector<std::vector<torch::Tensor>> inputs_;   // by band, then column
  std::vector<std::vector<torch::Tensor>> outputs_;  // by band, then column
  // By band, CUDA bands only: run()'s input copies done, the band's outputs made (Note [Band streams]).
  std::vector<at::cuda::CUDAEvent> inputs_ready_, outputs_made_;
  std::unique_ptr<Places> places_;  // the bands' workers, made at the first chunk (Note [Band threads])
};

// What runs bands of one frame on several places shares (Bands; the whole-frame part of exact tiles across
// devices, Note [Whole-frame part in bands] in core/split/whole_frame_bands.h).
// Runs band(i) for i < bands on `workers`' place i, at once, each inside band i of one BandLink (BandScope,
// on the worker's device; LibTorch's inference mode on); a band that throws aborts the link, so the others
// stop at their next exchange. Returns, once all are done, the first band's own failure (not the others'
// report of it), or null.
std::exception_ptr run_linked_bands(Places& workers, size_t bands, const std::function<void(size_t)>& band);
// Peer access between every two GPUs of `places`, both ways, once and before any band runs, rather than by
// LibTorch's first copy between them while the other bands' threads allocate (Note [Copies between GPUs]).
void enable_peers(const std::vector<BandPlace>& places);

}  // namespace vaecodec::core
