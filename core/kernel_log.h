#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace vaecodec::core {

// Note [What the engine applied]
// `--verbose` prints, once at the start of a run, what the engine set up: the device and its compute
// capability, the dtype and memory layout of the model, the library switches that decide the convolutions
// (cuDNN, its heuristics or timing, TF32), the attention backends LibTorch may choose from, and the
// allocator's settings; the plan follows as its own line. At the end of the run it prints which kernels ran.
// That last part is counted, not assumed: every one of our own kernels' entry points records whether it ran
// or left the work to the composite path (a layout or dtype it does not take), and every attention call
// records the backend LibTorch's dispatcher picks for its inputs (at::_fused_sdp_choice, the same choice
// scaled_dot_product_attention makes). So a line like "rms_norm_silu: own kernel 1 296 calls" is what
// happened, and a fallback that would cost speed shows up as such. Counting is off unless --verbose asks
// for it, and then costs a relaxed atomic add per call (attention: one dispatcher query per call).
class KernelLog {
 public:
  static void enable(bool on) { enabled_.store(on); }
  static bool enabled() { return enabled_.load(std::memory_order_relaxed); }
  // One call of `kernel` that took `path` ("own kernel", "composite", "flash", ...). Both are string
  // literals: the log keeps the pointers' texts.
  static void count(const char* kernel, const char* path);
  // (kernel, path, calls), in first-seen order.
  struct Entry {
    std::string kernel, path;
    int64_t calls = 0;
  };
  static std::vector<Entry> entries();
  static void reset();

 private:
  static inline std::atomic<bool> enabled_{false};
};

// Records the attention backend LibTorch picks for these inputs, when KernelLog is on.
void log_attention_backend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

}  // namespace vaecodec::core
