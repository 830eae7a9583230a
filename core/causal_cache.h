#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace vaecodec::core {

// Note [Causal cache]
// Every layer of a causal VAE that looks back in time (a conv with temporal kernel 3, a temporal down- or
// up-sampler) keeps a little history between chunks: the last frames of its input, and whether it has seen
// frame 0 yet (the first frame is special in these models). The history belongs to a run, not to the model,
// so one model can serve several runs at once and a run can be dropped or restarted at will.
// Layers take their slot in call order: the model rewinds the cursor at the start of each chunk, and the
// n-th temporal layer called gets slot n every time, which holds because a chunk's call order is fixed.
class CausalCache {
 public:
  struct Slot {
    torch::Tensor history;  // the last input frames the layer needs, [B, C, k, H, W]; undefined before any
    bool started = false;   // frame 0 has passed through this layer
  };
  // Told of every slot a layer takes, before the layer has it (Note [Caches streamed slot by slot] in
  // core/split/cache_stream.h): the one user that moves histories while the model runs.
  class Watcher {
   public:
    virtual ~Watcher() = default;
    virtual void taking(CausalCache& cache, size_t index) = 0;
  };

  void rewind() { cursor_ = 0; }
  Slot& next() {
    if (cursor_ == slots_.size()) slots_.emplace_back();
    if (watcher_.watcher) watcher_.watcher->taking(*this, cursor_);
    return slots_[cursor_++];
  }
  Slot& slot(size_t index) { return slots_[index]; }  // for the watcher: no cursor moved, nothing told
  // The watcher stays with this object: a copy has none, and an assignment keeps the target's.
  void watch(Watcher* watcher) { watcher_.watcher = watcher; }
  size_t size() const { return slots_.size(); }
  int64_t bytes() const {
    int64_t n = 0;
    for (const auto& s : slots_)
      if (s.history.defined()) n += s.history.numel() * s.history.element_size();
    return n;
  }
  void clear() {
    slots_.clear();
    cursor_ = 0;
  }
  // An independent copy: every history copied, none shared (a branch of the run). A plain copy of the object
  // shares them, which is enough to restore a cache as it was: layers replace a slot's history, they never
  // write into it.
  CausalCache deep_copy() const {
    CausalCache copy = *this;
    for (auto& s : copy.slots_)
      if (s.history.defined()) s.history = s.history.clone();
    return copy;
  }
  const std::vector<Slot>& slots() const { return slots_; }

 private:
  struct WatcherRef {
    Watcher* watcher = nullptr;
    WatcherRef() = default;
    WatcherRef(const WatcherRef&) {}
    WatcherRef& operator=(const WatcherRef&) { return *this; }
  };
  std::vector<Slot> slots_;
  size_t cursor_ = 0;
  WatcherRef watcher_;
};

}  // namespace vaecodec::core
