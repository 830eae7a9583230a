#include "core/split/parking.h"

#include <utility>

#include <c10/cuda/CUDAGuard.h>

namespace vaecodec::core {

bool host_buffer_fits(const torch::Tensor& host, const torch::Tensor& t) {
  return host.defined() && host.sizes() == t.sizes() && host.strides() == t.strides() &&
         host.scalar_type() == t.scalar_type();
}

CacheParking::~CacheParking() {
  if (uploaded_.isCreated()) uploaded_.synchronize();
  if (downloaded_.isCreated()) downloaded_.synchronize();
}

void CacheParking::upload(CausalCache& cache, Device& device) {
  const torch::Device where = device.torch_device();
  c10::cuda::CUDAStream up = device.stream(Device::Lane::kCacheUpload);
  cache.rewind();
  std::vector<std::pair<CausalCache::Slot*, torch::Tensor>> copies;
  for (size_t i = 0; i < cache.size(); ++i) {
    CausalCache::Slot& slot = cache.next();
    if (slot.history.defined() && slot.history.device() != where)
      copies.emplace_back(&slot, torch::empty_like(slot.history, slot.history.options().device(where)));
  }
  cache.rewind();
  allocated_.record(device.compute_stream());
  c10::cuda::CUDAStreamGuard guard(up);
  allocated_.block(up);
  if (downloaded_.isCreated()) downloaded_.block(up);
  for (auto& [slot, target] : copies) {
    target.copy_(slot->history, /*non_blocking=*/true);
    slot->history = target;
  }
  uploaded_.record(up);
  uploading_ = true;
  if (!pinned_) host_.clear();  // a pageable source is staged by the time its copy returns
}

void CacheParking::wait_uploaded(Device& device) {
  uploaded_.block(device.compute_stream());
}

void CacheParking::download(CausalCache& cache, Device& device) {
  c10::cuda::CUDAStream down = device.stream(Device::Lane::kCacheDownload);
  computed_.record(device.compute_stream());
  c10::cuda::CUDAStreamGuard guard(down);
  computed_.block(down);
  cache.rewind();
  for (size_t i = 0; i < cache.size(); ++i) {
    CausalCache::Slot& slot = cache.next();
    if (!slot.history.defined() || !slot.history.is_cuda()) continue;
    // The slot's host buffer from the last visit is free again: its upload finished before the model call
    // that this download waits for.
    if (host_.size() <= i) host_.resize(i + 1);
    torch::Tensor& host = host_[i];
    if (!host_buffer_fits(host, slot.history))
      host = pinned_ ? device.pinned_exact_like(slot.history)  // one block of its size, strides kept
                     : torch::empty_strided(slot.history.sizes(), slot.history.strides(),
                                            slot.history.options().device(torch::kCPU));
    host.copy_(slot.history, /*non_blocking=*/true);
    leaving_.push_back(slot.history);
    slot.history = host;
  }
  cache.rewind();
  downloaded_.record(down);
  uploading_ = false;
}

void CacheParking::release(Device& device) {
  downloaded_.block(device.compute_stream());
  leaving_.clear();
}

void CacheParking::park(CausalCache& cache, Device& device) {
  if (!device.torch_device().is_cuda()) return;
  download(cache, device);
  release(device);
  parked_ = true;
}

void CacheParking::unpark(CausalCache& cache, Device& device) {
  if (!parked_) return;
  upload(cache, device);
  wait_uploaded(device);
  parked_ = false;
}

}  // namespace vaecodec::core
