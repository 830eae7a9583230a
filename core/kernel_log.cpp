#include "core/kernel_log.h"

#include <mutex>

#include <ATen/SDPBackend.h>
#include <ATen/ops/_fused_sdp_choice.h>

namespace vaecodec::core {
namespace {

struct LogState {
  std::mutex mutex;
  std::vector<KernelLog::Entry> entries;
};

LogState& state() {
  static LogState* s = new LogState;  // never destroyed: kernels may count during exit
  return *s;
}

const char* backend_name(int64_t backend) {
  switch (static_cast<at::SDPBackend>(backend)) {
    case at::SDPBackend::math:
      return "math (unfused)";
    case at::SDPBackend::flash_attention:
      return "flash";
    case at::SDPBackend::efficient_attention:
      return "memory-efficient";
    case at::SDPBackend::cudnn_attention:
      return "cuDNN";
    case at::SDPBackend::overrideable:
      return "overrideable";
    default:
      return "none";
  }
}

}  // namespace

void KernelLog::count(const char* kernel, const char* path) {
  if (!enabled()) return;
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (Entry& e : s.entries)
    if (e.kernel == kernel && e.path == path) {
      ++e.calls;
      return;
    }
  s.entries.push_back({kernel, path, 1});
}

std::vector<KernelLog::Entry> KernelLog::entries() {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.entries;
}

void KernelLog::reset() {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.entries.clear();
}

void log_attention_backend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  if (!KernelLog::enabled()) return;
  KernelLog::count("attention", backend_name(at::_fused_sdp_choice(q, k, v)));
}

}  // namespace vaecodec::core
