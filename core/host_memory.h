#pragma once

#include <cstdint>
#include <string>

namespace vaecodec::core {

// The memory this process may use on its host: physical memory, or less where a cgroup limit says so
// (containers, Slurm jobs). 0 when it cannot be told.
int64_t host_memory_bytes();

// Throws vaecodec::Error naming both numbers when `needed_bytes` (a plan's estimated peak, for a run on the
// CPU) exceeds host_memory_bytes(): such a run would swap for hours or be killed, so it is refused before it
// starts (Note [Limits] in core/planner.h). `what` says which run, e.g. "decode of 8192x8192".
void check_host_memory(int64_t needed_bytes, const std::string& what);

}  // namespace vaecodec::core
