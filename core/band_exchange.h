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

#include "core/band_traffic.h"
#include "core/error.h"

// What a layer asks of the other bands of a split run (Note [Bands across devices]): the layers and model
// blocks include this alone; the bands themselves are run by core/split/bands.h.

namespace vaecodec::core {

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
//   - SeedVR2's per-frame GroupNorm combines every band's statistics of each group and frame (Note [SeedVR2
//     GroupNorm in bands] in core/models/seedvr2/seedvr2_blocks.cpp).
// Every other layer works per pixel or within 2x2 blocks that never straddle a band's edge. So each band's
// output is the one-device output's rows, up to the rounding of the GroupNorm's combined statistics and of
// the attention's sums, which a band adds in another order.
// The bands run in lockstep only at these exchanges: a band posts what its neighbours need and waits until
// every band has posted (BandLink), then copies what it needs onto its own device and goes on. On CUDA no
// thread waits for the GPU there: a copy from another device is queued on that device's stream after the work
// that made its source, and the band's own stream waits for the copy, so the GPUs run ahead of the threads.
// A band too large for its device is cut into columns, the same columns in every band: each band runs column
// c of its rows with column c's own causal cache, every band on the same column at once, so that column c of
// the split is one-device column tile c cut into bands, and the columns are blended as tiles are
// (Note [Tile blending] in core/split/blended_tiles.h). The split then equals the one-device run tiled in
// those columns, as exactly as an untiled split equals the untiled run.

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

// The bytes the exchanges moved between devices: core/band_traffic.h.

// What a band throws when another band failed: the other band's error is the one reported.
class BandAborted : public Error {
 public:
  BandAborted() : Error("another band of the split run failed") {}
};

}  // namespace vaecodec::core
