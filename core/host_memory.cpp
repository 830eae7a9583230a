#include "core/host_memory.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "core/error.h"
#include "core/sizes.h"

namespace vaecodec::core {
namespace {

// A cgroup's memory limit file holds a byte count, or "max" (v2) / a huge number (v1) for none.
int64_t cgroup_limit(const char* path) {
  std::ifstream in(path);
  long long value = 0;
  if (!(in >> value) || value <= 0) return 0;
  return static_cast<int64_t>(value);
}

}  // namespace

int64_t host_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  int64_t bytes = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
  for (const char* limit : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const int64_t cap = cgroup_limit(limit);
    if (cap > 0 && (bytes == 0 || cap < bytes)) bytes = cap;
  }
  return bytes;
}

void check_host_memory(int64_t needed_bytes, const std::string& what) {
  const int64_t host = host_memory_bytes();
  if (host <= 0 || needed_bytes <= host) return;
  throw Error(what + " on the CPU needs about " + format_size(needed_bytes) + " by its plan, more than the " +
              format_size(host) + " of memory this host has; run it on a GPU, or give --vram to plan tiles " +
              "within a budget");
}

}  // namespace vaecodec::core
