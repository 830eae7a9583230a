#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/cuda/CUDAEvent.h>
#include <torch/torch.h>

#include "core/causal_cache.h"
#include "core/device/device.h"
#include "core/planner.h"
#include "core/tiling.h"
#include "core/vae_model.h"

namespace vaecodec::core {

struct BandWorker;  // a thread of the band pool (band_split.cpp)

// Note [Bands across devices]
// One clip can run on several devices at once, exactly: each device owns a horizontal band of every frame
// (whole latent rows, so that the band's edges fall on whole pixels at every resolution inside the model)
// and runs the whole model over it with its own causal cache. Three kinds of layer look past a band's edge,
// and each gets what it needs from the other bands while the band runs:
//   - a convolution with a spatial kernel (and the resamplers' padded ones) reads `top` rows above and
//     `bottom` rows below each output row's band: before it runs, each band copies those rows from its
//     neighbours' inputs into a margin of its own input (fill_halo), and zeros where the frame ends, which is
//     the models' own zero padding. For a kernel k, stride s and top padding p, top = p and bottom = k - s -
//     p;
//   - attention over a frame's pixels gathers the keys and values of every band (its queries stay its own);
//   - SeedVR2's per-frame GroupNorm combines every band's mean and variance of each group and frame.
// Every other layer works per pixel or within 2x2 blocks that never straddle a band's edge. So each band's
// output is the one-device output's rows, up to the rounding of the GroupNorm's combined statistics and of
// the attention's sums, which a band adds in another order.
// The bands run in lockstep only at these exchanges: a band posts what its neighbours need and waits until
// every band has posted (BandLink), then copies what it needs onto its own device and goes on. On CUDA no
// thread waits for the GPU there: a copy from another device is queued on that device's stream after the work
// that made its source, and the band's own stream waits for the copy, so the GPUs run ahead of the threads.
// A band too large for its device is cut into columns, the same columns in every band: each band runs column
// c of its rows with column c's own causal cache, every band on the same column at once, so that column c of
// the split is one-device column tile c cut into bands, and the columns are blended as tiles are (Note [Tile
// blending] in core/tiling.h). The split then equals the one-device run tiled in those columns, as exactly
// as an untiled split equals the untiled run.

// One band's place: its own model (bands never share a model object: the layers keep per-call caches) on its
// device. Several bands may share a device.
struct BandPlace {
  VaeModel* model = nullptr;
  Device* device = nullptr;
};

// The latent rows [first, first + count) of each of `bands` bands of a frame `latent_height` rows high,
// top to bottom: near-equal, the taller ones first. Throws Error when there are fewer rows than bands.
struct BandRows {
  int64_t first = 0, count = 0;
};
std::vector<BandRows> band_rows(int64_t latent_height, int64_t bands);

// What one device of a split run must hold: `whole`'s run for the tallest of `bands` bands, plus a latent
// row above and below for the halo (more than the halo needs at every resolution). Its plan is the plan of
// every device of the split.
PlanRequest band_plan_request(const PlanRequest& whole, int64_t bands);
// The plan of every device of that split: band_plan_request's run under `options`, untiled where it fits;
// else, where `options` allow tiles, in the fewest columns that fit (a given options.tile: columns of its
// width), never rows of tiles nor offloaded caches. plan.tiles is the grid of the whole frame. Throws what
// plan_run throws for the last plan tried when none fits.
Plan plan_band_run(const PlanRequest& whole, int64_t bands, PlannerOptions options);

// What a band posts at an exchange: dense tensors on its device and, on CUDA, an event its stream recorded
// after making them (Note [Copies between GPUs]).
struct BandPost {
  std::vector<torch::Tensor> tensors;
  std::shared_ptr<at::cuda::CUDAEvent> made;
};

// The meeting point of the bands of one split run.
class BandLink {
 public:
  explicit BandLink(int64_t bands);
  // Posts `mine` as band `band`'s contribution to exchange number `step` (each band counts its own from 0)
  // and waits for every band's; returns them all, indexed by band, as the posters' tensors (on their
  // devices). They stay valid until the band calls again. Throws Error when another band failed.
  const std::vector<BandPost>& exchange(int64_t band, int64_t step, BandPost mine);
  // Called by a band that failed: every band waiting now or later throws instead.
  void abort();
  int64_t bands() const { return bands_; }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int64_t bands_;
  int64_t arrived_ = 0;
  int64_t completed_ = -1;  // the last step every band has posted
  bool aborted_ = false;
  std::vector<BandPost> posted_[2];  // by step parity, then band
};

// Inside one band's model call (the calling thread's, set by BandScope); nullptr elsewhere.
struct BandContext {
  BandLink* link = nullptr;
  int64_t band = 0;
  int64_t step = 0;
  torch::Device device = torch::kCPU;
  int64_t bands() const { return link->bands(); }
};
BandContext* current_band();
inline bool in_band() {
  return current_band() != nullptr;
}

// Makes the calling thread band `band` of `link`, on `device`, until destroyed.
class BandScope {
 public:
  BandScope(BandLink& link, int64_t band, torch::Device device);
  ~BandScope();
  BandScope(const BandScope&) = delete;
  BandScope& operator=(const BandScope&) = delete;

 private:
  BandContext context_;
  BandContext* previous_;
};

// --- the exchanges, for layers; each must be called by every band at the same point of the model.
// Fills whole's first `top` and last `bottom` rows (dim 3) with the rows of the bands above and below that
// adjoin its interior (zeros beyond the frame). The interior must be at least max(top, bottom) rows.
void fill_halo(const torch::Tensor& whole, int64_t top, int64_t bottom);
// x with those rows added: a new tensor laid out like x.
torch::Tensor with_halo(const torch::Tensor& x, int64_t top, int64_t bottom);
// Each of `mine`'s tensors concatenated over every band along `dim`, in band order, on this band's device.
std::vector<torch::Tensor> concat_bands(const std::vector<torch::Tensor>& mine, int64_t dim);
// Every band's `mine`, indexed by band, each copied to this band's device.
std::vector<std::vector<torch::Tensor>> gather_bands(const std::vector<torch::Tensor>& mine);

// Bytes each device has received from other bands' devices at the exchanges (halo rows, attention keys and
// values, norm statistics) since the last reset, by device ("cuda:1"); bands sharing a device do not count.
std::map<std::string, int64_t> band_traffic();
void reset_band_traffic();

// The bands of a run (Note [Bands across devices]): one model call per band and column per chunk, each band
// on its own thread (made with the set and kept for the run, its device current and LibTorch's inference mode
// on), and the bands' outputs joined into the frame on the run's device.
class BandSet {
 public:
  enum class Direction { kEncode, kDecode };
  // columns: the frame's grid in latent pixels, one row of tiles (TileGrid::whole: the bands are not cut).
  // Every place's model must be of the same family and weights (the caller's business) and on its place's
  // device.
  BandSet(std::vector<BandPlace> places, Device& out_device, Direction direction, const TileGrid& columns);
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
  Direction direction_;
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
