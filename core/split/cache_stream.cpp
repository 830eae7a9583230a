#include "core/split/cache_stream.h"

#include <algorithm>
#include <vector>

#include <c10/cuda/CUDAGuard.h>

#include "core/split/parking.h"

namespace vaecodec::core {

CacheStream::CacheStream(CausalCache& cache, Device& device, int64_t resident_bytes)
    : cache_(cache), device_(device), resident_budget_(resident_bytes) {
  cache_.watch(this);
}

CacheStream::~CacheStream() {
  cache_.watch(nullptr);
  // Copies may still read or write memory this object or the cache owns.
  for (Entry& e : entries_) {
    if (e.up.isCreated()) e.up.synchronize();
    if (e.down.isCreated()) e.down.synchronize();
  }
}

void CacheStream::taking(CausalCache& /*cache: cache_, the one watched*/, size_t index) {
  while (entries_.size() <= index) entries_.emplace_back();
  if (has_current_ && current_ != index) done_with(current_);
  let_go(1);
  Entry& e = entries_[index];
  if (e.where == Where::kHost) bring_up(index);
  if (e.where == Where::kComing) {
    e.up.block(device_.compute_stream());
    e.where = Where::kInUse;
  }
  // The next layer's history comes up while this one runs (Note [Caches streamed slot by slot]).
  if (index + 1 < entries_.size() && entries_[index + 1].where == Where::kHost) bring_up(index + 1);
  current_ = index;
  has_current_ = true;
}

void CacheStream::called() {
  if (has_current_) done_with(current_);
  has_current_ = false;
  if (!chosen_) choose_resident();
  if (!entries_.empty() && entries_[0].where == Where::kHost) bring_up(0);
}

int64_t CacheStream::bytes_of(size_t index) {
  const torch::Tensor& h = cache_.slot(index).history;
  return h.defined() ? h.numel() * h.element_size() : 0;
}

void CacheStream::choose_resident() {
  chosen_ = true;
  if (resident_budget_ <= 0) return;
  std::vector<size_t> order;
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].where == Where::kHost || entries_[i].where == Where::kResident) order.push_back(i);
  auto channels = [&](size_t i) { return cache_.slot(i).history.size(1); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return channels(a) != channels(b) ? channels(a) < channels(b) : bytes_of(a) > bytes_of(b);
  });
  std::vector<bool> keep(entries_.size(), false);
  int64_t kept = 0;
  for (size_t i : order)
    if (kept + bytes_of(i) <= resident_budget_) {
      keep[i] = true;
      kept += bytes_of(i);
    }
  std::vector<size_t> leave, come;
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].where == Where::kResident && !keep[i]) leave.push_back(i);
    if (entries_[i].where == Where::kHost && keep[i]) come.push_back(i);
  }
  // One slot at a time: down (waited for) until the next one up fits, then up (waited for), its host buffer
  // freed.
  let_go(0);
  size_t next_leaving = 0;
  for (size_t i : come) {
    while (resident_used_ + bytes_of(i) > resident_budget_ && next_leaving < leave.size()) {
      const size_t x = leave[next_leaving++];
      resident_used_ -= bytes_of(x);
      send_down(x);
      let_go(0);
      entries_[x].down.synchronize();
    }
    if (resident_used_ + bytes_of(i) > resident_budget_) break;
    bring_up(i);
    entries_[i].up.synchronize();
    entries_[i].host = torch::Tensor();
    entries_[i].where = Where::kResident;
    resident_used_ += bytes_of(i);
  }
}

void CacheStream::done_with(size_t index) {
  Entry& e = entries_[index];
  CausalCache::Slot& slot = cache_.slot(index);
  if (e.where == Where::kResident || !slot.history.defined() || !slot.history.is_cuda()) return;
  if (e.where == Where::kUnseen && !chosen_ && resident_used_ + bytes_of(index) <= resident_budget_) {
    e.where = Where::kResident;  // the first histories made stay through the first call
    resident_used_ += bytes_of(index);
    return;
  }
  send_down(index);
}

void CacheStream::send_down(size_t index) {
  Entry& e = entries_[index];
  CausalCache::Slot& slot = cache_.slot(index);
  const torch::Tensor& history = slot.history;
  if (!host_buffer_fits(e.host, history)) e.host = device_.pinned_exact_like(history);
  // The layer's work on the history is queued on the compute stream; the copy waits for it. The host buffer
  // is free: its last upload finished before that layer began.
  at::cuda::CUDAEvent computed;
  computed.record(device_.compute_stream());
  c10::cuda::CUDAStream down = device_.stream(Device::Lane::kCacheDownload);
  computed.block(down);
  {
    c10::cuda::CUDAStreamGuard guard(down);
    e.host.copy_(history, /*non_blocking=*/true);
  }
  e.down.record(down);
  leaving_.push_back({history, index});
  slot.history = e.host;
  e.where = Where::kHost;
}

void CacheStream::bring_up(size_t index) {
  Entry& e = entries_[index];
  CausalCache::Slot& slot = cache_.slot(index);
  // Allocated on the compute stream, whose pool the model draws from; the copy waits until that memory is
  // free to write, and until the download that filled the host buffer is done.
  torch::Tensor target = torch::empty_like(e.host, e.host.options().device(device_.torch_device()));
  at::cuda::CUDAEvent allocated;
  allocated.record(device_.compute_stream());
  c10::cuda::CUDAStream up = device_.stream(Device::Lane::kCacheUpload);
  allocated.block(up);
  if (e.down.isCreated()) e.down.block(up);
  {
    c10::cuda::CUDAStreamGuard guard(up);
    target.copy_(e.host, /*non_blocking=*/true);
  }
  e.up.record(up);
  slot.history = target;
  e.where = Where::kComing;
}

void CacheStream::let_go(size_t keep) {
  while (leaving_.size() > keep) {
    // The compute stream waits for the copy before the allocator may hand its memory to the model again.
    entries_[leaving_.front().index].down.block(device_.compute_stream());
    leaving_.pop_front();
  }
}

}  // namespace vaecodec::core
