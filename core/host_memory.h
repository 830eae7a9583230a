#pragma once

#include <cstdint>
#include <string>

namespace vaecodec::core {

// The memory this process may use on its host: physical memory, or less where a cgroup limit says so
// (containers, Slurm jobs). 0 when it cannot be told. VAECODEC_TEST_HOST_MEMORY (bytes) stands in for it in
// tests, so that a host of any size can be made too small for a run.
int64_t host_memory_bytes();

// Note [Host memory budget]
// A GPU run keeps some of its state in host memory: the window's frames where the plan keeps them there,
// the caches of exact tiles between windows, blended tiles' offloaded caches, and the process itself. The
// planner budgets those (MemoryEstimate::host) against --host-memory, or else against what the host has
// available when the run starts: MemAvailable from /proc/meminfo (or the cgroup's limit less its usage,
// where lower), less a margin of a tenth or 1 GiB, whichever is more. VAECODEC_TEST_MEM_AVAILABLE (bytes)
// stands in for the reading in tests.
// The memory available for a run now (before the margin); 0 when it cannot be told.
int64_t host_available_bytes();
// host_available_bytes() less the margin, at least 0.
int64_t host_budget_bytes();
// The peak resident memory of this process so far (getrusage's ru_maxrss).
int64_t host_peak_bytes();
// A peak that can start over (Linux: /proc/self/clear_refs resets VmHWM, which /proc/self/status reports), so
// that a benchmark measures its runs and not the input it prepared first. reset_host_window_peak() says
// whether it could; host_window_peak_bytes() is VmHWM since then (0 where unknown); host_rss_bytes() is the
// resident memory now (VmRSS; 0 where unknown).
bool reset_host_window_peak();
int64_t host_window_peak_bytes();
int64_t host_rss_bytes();

// Throws vaecodec::Error naming both numbers when `needed_bytes` (a plan's estimated peak, for a run on the
// CPU) exceeds host_memory_bytes(): such a run would swap for hours or be killed, so it is refused before it
// starts (Note [Limits] in core/planner.h). `what` says which run, e.g. "decode of 8192x8192"; `vram_option`
// is the budget's option as the front end names it (Note [Option spellings] in core/option_spelling.h).
void check_host_memory(int64_t needed_bytes, const std::string& what, const std::string& vram_option);

}  // namespace vaecodec::core
