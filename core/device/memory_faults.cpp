#include "core/device/memory_faults.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

#include <c10/util/Exception.h>

#include "core/sizes.h"

namespace vaecodec::core {
namespace {

struct Hook {
  std::vector<int64_t> fail_at;  // the model calls that fail
  std::optional<int64_t> free_bytes;
  std::atomic<int64_t> calls{0};
  std::atomic<bool> fired{false};
};

// VAECODEC_TEST_OOM, parsed once; a malformed value is an error at the first model call, not ignored.
Hook& hook() {
  static Hook* h = [] {
    // Owned until parsed: a malformed value throws, and then nothing is kept (a sanitizer's leak report).
    auto parsed = std::make_unique<Hook>();
    const char* text = std::getenv("VAECODEC_TEST_OOM");
    if (text == nullptr || *text == '\0') return parsed.release();
    const std::string spec = text;
    size_t start = 0;
    while (start <= spec.size()) {
      const size_t comma = std::min(spec.find(',', start), spec.size());
      const std::string item = spec.substr(start, comma - start);
      const size_t eq = item.find('=');
      const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
      char* end = nullptr;
      const long long call = key == "call" ? std::strtoll(value.c_str(), &end, 10) : 0;
      if (key == "call" && !value.empty() && call > 0 && *end == '\0') {
        parsed->fail_at.push_back(call);
      } else if (key == "free" && !value.empty()) {
        parsed->free_bytes = parse_size(value);
      } else {
        throw Error("VAECODEC_TEST_OOM='" + spec +
                    "': expected call=N[,call=M...][,free=SIZE], e.g. call=3,free=2G");
      }
      start = comma + 1;
    }
    return parsed.release();
  }();
  return *h;
}

}  // namespace

bool is_out_of_memory(const std::exception& e) {
  if (dynamic_cast<const OutOfMemory*>(&e) != nullptr) return true;
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr) return true;
  if (dynamic_cast<const c10::Error*>(&e) == nullptr) return false;
  // CUDA and cuDNN report some failed allocations as plain errors.
  const std::string_view what = e.what();
  for (const std::string_view sign :
       {"out of memory", "CUDNN_STATUS_ALLOC_FAILED", "cudaErrorMemoryAllocation"})
    if (what.find(sign) != std::string_view::npos) return true;
  return false;
}

void before_model_call() {
  Hook& h = hook();
  if (h.fail_at.empty()) return;
  const int64_t call = h.calls.fetch_add(1) + 1;
  if (std::find(h.fail_at.begin(), h.fail_at.end(), call) != h.fail_at.end()) {
    h.fired = true;
    throw OutOfMemory("out of memory at model call " + std::to_string(call) + " (VAECODEC_TEST_OOM)");
  }
}

std::optional<int64_t> injected_free_bytes() {
  const Hook& h = hook();
  if (h.fired && h.free_bytes) return h.free_bytes;
  return std::nullopt;
}

}  // namespace vaecodec::core
