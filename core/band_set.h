#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
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
#include "core/tiling.h"
#include "core/vae_model.h"

namespace vaecodec::core {

struct BandWorker;  // a thread of the band pool (band_set.cpp)

// The bands of a run (Note [Bands across devices]): one model call per band and column per chunk, each band
// on its own thread (made with the set and kept for the run, its device current and LibTorch's inference mode
// on), and the bands' outputs joined into the frame on the run's device.
class BandSet {
 public:
  // columns: the frame's grid in latent pixels, one row of tiles (TileGrid::whole: the bands are not cut).
  // Every place's model must be of the same family and weights (the caller's business) and on its place's
  // device.
  BandSet(std::vector<BandPlace> places, Device& out_device, Op op, const TileGrid& columns);
  ~BandSet();
  BandSet(const BandSet&) = delete;
  BandSet& operator=(const BandSet&) = delete;
  // x: one chunk of the whole frame, [B, C, t, H, W] (pixels for encode, latents for decode), any device.
  torch::Tensor run(const torch::Tensor& x);
  int64_t cache_bytes() const;

 private:
  struct Band {
    BandPlace place;
    BandRows rows;
    std::vector<CausalCache> caches;  // one per column
  };
  // Band i's thread: runs band i of each chunk handed over by run() until the set is destroyed.
  void serve(size_t i);
  void run_band(size_t i, BandLink& link);

  std::vector<Band> bands_;
  Device& out_device_;
  Op op_;
  TileGrid columns_;
  std::unique_ptr<TileBlend> blend_;  // made at the first chunk when there are several columns

  // The chunk in hand, guarded by mutex_: run() sets it (each band's columns on its device) and bumps
  // `chunk_`, each thread runs its band once per bump and counts itself in `finished_`.
  std::mutex mutex_;
  std::condition_variable start_, finished_all_;
  int64_t chunk_ = 0;
  size_t finished_ = 0;
  bool stopping_ = false;
  std::vector<std::vector<torch::Tensor>> inputs_;  // the chunk's, by band, then column
  BandLink* link_ = nullptr;
  std::vector<std::vector<torch::Tensor>> outputs_;  // by band, then column
  // By band, CUDA bands only: run()'s input copies done, the band's outputs made (Note [Band streams]).
  std::vector<at::cuda::CUDAEvent> inputs_ready_, outputs_made_;
  std::vector<std::exception_ptr> errors_;
  // The threads serving the bands, from the process's pool (Note [Band threads]); last: given work once the
  // state above exists.
  std::vector<BandWorker*> workers_;
};

}  // namespace vaecodec::core
