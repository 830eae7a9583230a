#pragma once

#include <vector>

#include <ATen/cuda/CUDAEvent.h>
#include <torch/torch.h>

#include "core/causal_cache.h"
#include "core/device/device.h"

namespace vaecodec::core {

// Note [Offloaded caches]
// A cache parked in host memory (blended tiles with offload, exact tiles between windows) goes down and comes
// back up on the device's two copy lanes, one each way, so that the copies overlap the model and the calling
// thread never waits for them. Blended tiles with offload keep only the running tiles' caches on the device:
// while tile i runs, tile i+1's cache goes up and tile i-1's comes down (the last tile of a chunk fetches the
// first one of the next chunk). Tile i+1's upload starts only once tile i-1's model call is done, so at most
// three tiles' caches are on the device at once (the planner counts three). A cache's upload also waits for
// its own previous download, and each slot's cache comes back into the same pinned buffer every time (host
// memory: one copy of the caches, each buffer of its slot's size: Device::pinned_exact_like). All device
// memory comes from the compute stream's pool (a copy stream's pool would keep its freed blocks out of the
// model's reach): an upload allocates on the compute stream, and its copy waits for everything queued there
// so far (the `allocated` event, which also orders it after tile i-1's call). A cache going down keeps its
// device memory until release(): blended tiles release it once the next tile's model call is queued, exact
// tiles at once (one tile's cache on the device at a time); the compute stream then waits for that copy (done
// long before, unless the copies are slower than the model) and frees it, so freed memory never waits on
// another stream's events. Off CUDA parking changes nothing: the caches are in host memory already.
//
// Exact tiles park in pageable host memory of the cache's own size, made at each download and freed once the
// cache is back up, as they did before the parking was shared: LibTorch's pinned host allocator rounds every
// block up to a power of two (ATen's CachingHostAllocator) and keeps it, and the caches exact tiles park are
// what a --host-memory budget counts (up to twice the planned host memory otherwise). A download to pageable
// memory returns when it is done, so the calling thread waits for the tile's model call there, as the
// synchronous copy before it did; the upload returns once its source is staged.

// Whether `host` can take `t` as it is (sizes, strides, dtype): a parked or streamed history's host buffer is
// kept from one trip down to the next while it can.
bool host_buffer_fits(const torch::Tensor& host, const torch::Tensor& t);

// One cache's parking: its pinned host buffers and the events of its copies. Every call is on the thread that
// runs the cache's model calls, whose current stream is `device`'s compute stream.
class CacheParking {
 public:
  // pinned: the host buffers are pinned and kept between visits (blended tiles' offload); otherwise pageable,
  // of the cache's own size, and freed once the cache is back on the device (exact tiles).
  explicit CacheParking(bool pinned = true) : pinned_(pinned) {}
  CacheParking(CacheParking&&) = default;
  CacheParking& operator=(CacheParking&&) = default;
  ~CacheParking();  // copies may still be in flight into host memory it owns
  // Queues the copy of `cache` to `device`, after the download it may still be waiting for and after
  // everything queued on the compute stream so far.
  void upload(CausalCache& cache, Device& device);
  // The compute stream waits until the cache is on the device.
  void wait_uploaded(Device& device);
  // Queues the copy of `cache` back to host memory, after the model call just queued for it.
  void download(CausalCache& cache, Device& device);
  // The compute stream waits until the cache is down, and its device memory returns to the compute
  // stream's pool.
  void release(Device& device);
  bool uploading() const { return uploading_; }  // an upload has been queued since the last download
  // A cache parked between uses (exact tiles between windows, the whole-frame part's between a window's
  // tiles): down at once with its device memory released (download and release), and up again before its
  // next model call (upload and wait_uploaded) where it was parked. Off CUDA nothing moves.
  void park(CausalCache& cache, Device& device);
  void unpark(CausalCache& cache, Device& device);

 private:
  bool pinned_ = true;
  std::vector<torch::Tensor> host_;     // per cache slot: its host buffer
  std::vector<torch::Tensor> leaving_;  // the device tensors of a download in flight
  bool uploading_ = false;
  bool parked_ = false;             // park() moved the cache to host memory; unpark() brings it back
  at::cuda::CUDAEvent allocated_;   // on the compute stream: the upload's device memory may be written
  at::cuda::CUDAEvent uploaded_;    // on the upload stream: the cache is on the device
  at::cuda::CUDAEvent computed_;    // on the compute stream: the cache's last model call is done
  at::cuda::CUDAEvent downloaded_;  // on the download stream: the cache is back in host memory
};

}  // namespace vaecodec::core
