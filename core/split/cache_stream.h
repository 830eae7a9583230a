#pragma once

#include <cstdint>
#include <deque>

#include <ATen/cuda/CUDAEvent.h>
#include <torch/torch.h>

#include "core/causal_cache.h"
#include "core/device/device.h"

namespace vaecodec::core {

// Note [Caches streamed slot by slot]
// SeedVR2's tiles are not exact (its GroupNorm takes statistics over the whole frame), so the only run whose
// result is the published function's is the whole frame's - and at 1080p its causal caches (17 GiB in bf16)
// and its activations (14 GiB for one latent frame) together pass a 24 GB card. The caches are needed one
// layer at a time, though: a layer reads its slot's history at the start of its call and leaves the new one
// at the end. So a whole-frame run may keep part of its cache in host memory and bring each slot up just
// before its layer, on the device's upload lane while the layer before runs, and take it back down on the
// download lane once the layer after has begun (the slot's new history is final when the next slot is taken,
// since a chunk's layers take their slots in order and each finishes its own first). The first histories
// made, up to `resident_bytes`, stay on the device through the first call; every other one waits in a pinned
// host buffer of its own size (Device::pinned_exact_like), made on its first trip down and kept for the run.
// After the first call the resident ones are chosen again, now that every slot is known: those of fewest
// channels first. A layer's copies grow with its input's channels and its work with their square, so the
// full-resolution layers' slots (128 channels decoding 1080p: 1 GB a slot, 20 ms over the H200's host link,
// beside about 16 ms of convolution)
// cost most to move beside their work and the 512-channel ones at latent resolution least - and a decoder
// makes those first. The exchange runs one slot at a time (down, then up, waiting for each), so that neither
// memory holds more than its plan and one slot. On the device at
// once, besides the resident ones: the slot going down, the slot in use and the slot coming up
// (MemoryCalibration::stream_window_elements, what the planner counts); a download's device memory returns
// to the model only when the compute stream has waited for that copy, one slot later, so the model rarely
// waits. Every chunk moves the streamed histories down and up once, at the host link's rate beside the
// model: the plan's cost counts them (Note [Plan cost]), and a larger budget keeps more resident.
// Correctness does not hang on the order: a history a layer leaves after its slot went down is simply kept
// on the device, and one found in host memory is brought up before its layer has it. Off CUDA nothing
// moves (the caches are in host memory already), so the CPU runs the same plan as the untiled one.
class CacheStream : public CausalCache::Watcher {
 public:
  // Watches `cache` (whose model calls run on `device`'s compute stream, a GPU: off CUDA there is nothing to
  // stream, and Whole makes none) until destroyed.
  CacheStream(CausalCache& cache, Device& device, int64_t resident_bytes);
  ~CacheStream() override;
  CacheStream(const CacheStream&) = delete;
  CacheStream& operator=(const CacheStream&) = delete;

  void taking(CausalCache& cache, size_t index) override;
  // After each model call: the last slot taken goes down, and the next call's first slot starts coming up.
  void called();

 private:
  enum class Where { kUnseen, kResident, kHost, kComing, kInUse };
  struct Entry {
    Where where = Where::kUnseen;
    torch::Tensor host;            // the pinned buffer of a streamed history
    at::cuda::CUDAEvent up, down;  // its last copy each way
  };
  struct Leaving {
    torch::Tensor history;  // device memory a download still reads
    size_t index;
  };
  void done_with(size_t index);  // the slot's layer has finished with it: down, unless it stays
  void send_down(size_t index);  // its history to its host buffer, on the download lane
  void bring_up(size_t index);
  void let_go(size_t keep);  // frees all but the last `keep` downloads' device memory
  void choose_resident();    // after the first call: the slots that stay, fewest channels first
  int64_t bytes_of(size_t index);

  CausalCache& cache_;
  Device& device_;
  int64_t resident_budget_, resident_used_ = 0;
  std::deque<Entry> entries_;  // per slot; a deque keeps the events in place as it grows
  std::deque<Leaving> leaving_;
  size_t current_ = 0;
  bool has_current_ = false;
  bool chosen_ = false;
};

}  // namespace vaecodec::core
