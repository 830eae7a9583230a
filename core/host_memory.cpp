#include "core/host_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>

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
  if (const char* test = std::getenv("VAECODEC_TEST_HOST_MEMORY")) return std::atoll(test);
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  int64_t bytes = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
  for (const char* limit : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const int64_t cap = cgroup_limit(limit);
    if (cap > 0 && (bytes == 0 || cap < bytes)) bytes = cap;
  }
  return bytes;
}

int64_t host_available_bytes() {
  if (const char* test = std::getenv("VAECODEC_TEST_MEM_AVAILABLE")) return std::atoll(test);
  int64_t available = 0;
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    long long kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") available = static_cast<int64_t>(kib) * 1024;
  }
  // Inside a cgroup with a limit: what is left of it.
  const int64_t limit = cgroup_limit("/sys/fs/cgroup/memory.max");
  const int64_t used = cgroup_limit("/sys/fs/cgroup/memory.current");
  if (limit > 0 && used > 0 && limit > used && (available == 0 || limit - used < available))
    available = limit - used;
  return available;
}

int64_t host_budget_bytes() {
  const int64_t available = host_available_bytes();
  if (available <= 0) return 0;
  const int64_t margin = std::max<int64_t>(available / 10, int64_t{1} << 30);
  return std::max<int64_t>(available - margin, 1);
}

int64_t host_peak_bytes() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

namespace {

// A "Name:   123 kB" line of /proc/self/status, in bytes; 0 where absent.
int64_t status_bytes(const std::string& name) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(name + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(name.size() + 1));
    int64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

}  // namespace

bool reset_host_window_peak() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";  // resets the peak resident set size to the present one
  clear.flush();
  return static_cast<bool>(clear) && status_bytes("VmHWM") > 0;
}

int64_t host_window_peak_bytes() {
  return status_bytes("VmHWM");
}

int64_t host_rss_bytes() {
  return status_bytes("VmRSS");
}

void check_host_memory(int64_t needed_bytes, const std::string& what, const std::string& vram_option) {
  const int64_t host = host_memory_bytes();
  if (host <= 0 || needed_bytes <= host) return;
  throw Error(what + " on the CPU needs about " + format_size(needed_bytes) + " by its plan, more than the " +
              format_size(host) + " of memory this host has; run it on a GPU, or give " + vram_option +
              " to plan tiles " + "within a budget");
}

}  // namespace vaecodec::core
