#pragma once

#include <atomic>
#include <cstdint>

namespace vaecodec::core {

// Counts the multiply-adds of the convolutions, projections and attention a run performs (2 FLOPs each), so a
// benchmark can report the model's FLOPs and the achieved rate. Off unless a benchmark turns it on; the
// layers add to it from the shapes they see, which costs nothing measurable.
class FlopCounter {
 public:
  static void enable(bool on) { enabled_.store(on); }
  static bool enabled() { return enabled_.load(std::memory_order_relaxed); }
  static void add(double flops) {
    if (enabled()) total_.fetch_add(static_cast<int64_t>(flops), std::memory_order_relaxed);
  }
  static int64_t total() { return total_.load(); }
  static void reset() { total_.store(0); }

 private:
  static inline std::atomic<bool> enabled_{false};
  static inline std::atomic<int64_t> total_{0};
};

}  // namespace vaecodec::core
