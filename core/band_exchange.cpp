#include "core/band_exchange.h"

#include <algorithm>
#include <string>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>

#include "core/device/device.h"

namespace vaecodec::core {
namespace {

thread_local BandContext* tls_band = nullptr;

// Note [Copies between GPUs]
// A band that needs another GPU's tensor copies it itself, on its own stream, after an event: the sender's
// thread records `made` on its stream when it posts, the receiver's stream waits for that event and runs one
// cudaMemcpyPeerAsync of the dense tensor, and the sender's allocator is told that the receiver's stream uses
// the source (recordStream), so that the sender's later work cannot reuse that memory before the copy has
// read it. The sender's stream never waits for the receiver. LibTorch's own copy between devices (Tensor::to)
// would not do: it queues the copy on the *source* device's current stream, whatever thread asks, after a
// two-way barrier between both devices' streams. Asked by the receiving band's thread, that lands the copy
// after whatever the sending band has queued since it posted, often its next layer, and makes the receiver
// wait for that layer too: every exchange would then let one GPU run while the other waits, and a split on
// two GPUs was slower than one GPU alone (6.92 s against 2.16 s for 720p x17 on two H200s, 2026-11-23).
// With the bands on streams of their own (Note [Band streams]) it would also be wrong: it orders the copy
// after the receiving thread's current stream of the source GPU, not after the sending band's stream, and a
// split decode that used it gave NaN against the one-GPU run (two H200s, 2026-11-24).
// Everything posted is dense, so the copy is one plain memcpy, never a strided kernel reading another GPU.
// The first run on two H200s also failed with "an illegal memory access" in 2 of 3 runs, while the same
// exchanges passed the two-GPU tests, which run without the expandable segments the CLI turns on
// (Note [Expandable segments] in core/device/peers.cpp): a split run now uses LibTorch's plain caching
// allocator (Device::use_plain_allocator_for_peers), and peer access between the split's GPUs is enabled when
// the split is made (Bands, Device::enable_peer_access), not during the first copy while other threads
// allocate. With both, no run on two H200s has failed since (2026-11-24: the GPU tests and every split
// bench). The copy itself is Device::receive_from_peer.

std::mutex traffic_mutex;
std::map<std::string, int64_t> traffic;

// Posted tensor `t` of `from` on this band's device: `t` itself on the same device, else a copy, counted as
// traffic.
torch::Tensor received(const BandContext& c, const BandPost& from, const torch::Tensor& t) {
  if (t.device() == c.device) {
    // Another band of this GPU made it on its own stream (Note [Band streams]).
    if (t.is_cuda() && from.made && t.numel() > 0) {
      const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(c.device.index());
      from.made->block(stream);
      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream);
    }
    return t;
  }
  {
    std::lock_guard<std::mutex> lock(traffic_mutex);
    traffic[c.device.str()] += static_cast<int64_t>(t.nbytes());
  }
  if (!t.is_cuda() || !c.device.is_cuda() || t.numel() == 0) return t.to(c.device);
  return Device::of(c.device).receive_from_peer(t, from.made.get());
}

BandContext& band_or_throw(const char* what) {
  BandContext* c = current_band();
  if (!c) throw Error(std::string(what) + " outside a band of a split run");
  return *c;
}

// Posts dense copies of `mine` (the band never writes them again, so a copy another GPU makes later reads
// what was posted) with the event that says when this band's stream has made them.
const std::vector<BandPost>& exchange(BandContext& c, const std::vector<torch::Tensor>& mine) {
  BandPost post;
  for (const auto& t : mine) post.tensors.push_back(t.clone(at::MemoryFormat::Contiguous));
  if (c.device.is_cuda()) {
    post.made = std::make_shared<at::cuda::CUDAEvent>();
    post.made->record(c10::cuda::getCurrentCUDAStream(c.device.index()));
  }
  return c.link->exchange(c.band, c.step++, std::move(post));
}
}  // namespace

BandLink::BandLink(int64_t bands) : bands_(bands) {
  for (auto& p : posted_) p.resize(bands);
}

const std::vector<BandPost>& BandLink::exchange(int64_t band, int64_t step, BandPost mine) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (aborted_) throw BandAborted();
  posted_[step % 2][band] = std::move(mine);
  if (++arrived_ == bands_) {
    arrived_ = 0;
    completed_ = step;
    // Every band has reached this step, so every band is done reading the previous one's posts: let their
    // tensors go (they may hold whole activations alive).
    for (auto& p : posted_[(step + 1) % 2]) p = {};
    changed_.notify_all();
  } else {
    changed_.wait(lock, [&] { return aborted_ || completed_ >= step; });
    if (aborted_) throw BandAborted();
  }
  // Not changed before this band's next call: the next writes to this parity come two steps on.
  return posted_[step % 2];
}

void BandLink::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  aborted_ = true;
  changed_.notify_all();
}

BandContext* current_band() {
  return tls_band;
}

std::map<std::string, int64_t> band_traffic() {
  std::lock_guard<std::mutex> lock(traffic_mutex);
  return traffic;
}

void reset_band_traffic() {
  std::lock_guard<std::mutex> lock(traffic_mutex);
  traffic.clear();
}

BandScope::BandScope(BandLink& link, int64_t band, torch::Device device) : previous_(tls_band) {
  context_.link = &link;
  context_.band = band;
  context_.device = device;
  tls_band = &context_;
}

BandScope::~BandScope() {
  tls_band = previous_;
}

void fill_halo(const torch::Tensor& whole, int64_t top, int64_t bottom) {
  BandContext& c = band_or_throw("fill_halo");
  const int64_t rows = whole.size(3) - top - bottom;
  if (rows < std::max(top, bottom))
    throw Error("a band of " + std::to_string(rows) + " rows is narrower than its convolution's margin");
  // The band above reads this band's first `bottom` interior rows, the band below its last `top`: posted as
  // dense copies, so that a band on another GPU fetches them with one plain peer copy
  // (Note [Copies between GPUs]).
  const auto& posted = exchange(c, {whole.narrow(3, top, bottom), whole.narrow(3, top + rows - top, top)});
  if (top > 0) {
    auto above = whole.narrow(3, 0, top);
    if (c.band == 0) {
      above.zero_();
    } else {
      const BandPost& from = posted[c.band - 1];
      above.copy_(received(c, from, from.tensors[1]));
    }
  }
  if (bottom > 0) {
    auto below = whole.narrow(3, top + rows, bottom);
    if (c.band + 1 == c.bands()) {
      below.zero_();
    } else {
      const BandPost& from = posted[c.band + 1];
      below.copy_(received(c, from, from.tensors[0]));
    }
  }
}

torch::Tensor with_halo(const torch::Tensor& x, int64_t top, int64_t bottom) {
  auto sizes = x.sizes().vec();
  sizes[3] += top + bottom;
  auto whole = torch::empty(sizes, x.options().memory_format(x.suggest_memory_format()));
  whole.narrow(3, top, x.size(3)).copy_(x);
  fill_halo(whole, top, bottom);
  return whole;
}

std::vector<std::vector<torch::Tensor>> gather_bands(const std::vector<torch::Tensor>& mine) {
  BandContext& c = band_or_throw("gather_bands");
  const auto& posted = exchange(c, mine);
  std::vector<std::vector<torch::Tensor>> all(posted.size());
  for (size_t b = 0; b < posted.size(); ++b)
    for (const auto& t : posted[b].tensors) all[b].push_back(received(c, posted[b], t));
  return all;
}

std::vector<torch::Tensor> concat_bands(const std::vector<torch::Tensor>& mine, int64_t dim) {
  const auto all = gather_bands(mine);
  std::vector<torch::Tensor> out;
  for (size_t i = 0; i < mine.size(); ++i) {
    std::vector<torch::Tensor> parts;
    for (const auto& band : all) parts.push_back(band.at(i));
    out.push_back(torch::cat(parts, dim));
  }
  return out;
}

}  // namespace vaecodec::core
