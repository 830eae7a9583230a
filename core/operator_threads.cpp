#include "core/operator_threads.h"

#include <dlfcn.h>

namespace vaecodec::core {
namespace {

// OpenMP's per-thread setter, from the runtime LibTorch loaded (libgomp for its CPU builds); null where
// LibTorch runs its operators on another pool. Looked up rather than linked: the engine's own OpenMP is
// GCC's alone, and a clang build must still reach LibTorch's runtime.
using SetThreads = void (*)(int);
SetThreads openmp_setter() {
  static const auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  return set;
}

}  // namespace

bool operator_threads_settable() {
  return openmp_setter() != nullptr;
}

void set_operator_threads(int threads) {
  if (threads <= 0) return;
  if (SetThreads set = openmp_setter()) set(threads);  // this thread's count alone
}

}  // namespace vaecodec::core
