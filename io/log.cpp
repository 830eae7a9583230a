#include "io/log.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace vaecodec::io {

double process_seconds() {
  std::ifstream stat("/proc/self/stat"), uptime("/proc/uptime");
  std::string line;
  double up = 0;
  if (!std::getline(stat, line) || !(uptime >> up)) return 0;
  const size_t close = line.rfind(')');  // the command's name may hold spaces
  if (close == std::string::npos) return 0;
  std::istringstream fields(line.substr(close + 2));
  std::string field;
  for (int i = 3; i < 22 && fields >> field; ++i) {  // field 22: the start, in ticks after boot
  }
  unsigned long long start = 0;
  if (!(fields >> start)) return 0;
  return up - static_cast<double>(start) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

void startup_note(const std::string& what) {
  if (!verbose()) return;
  char at[32];
  std::snprintf(at, sizeof(at), "%.2f s: ", process_seconds());
  verbose_note("start-up", at + what);
}

}  // namespace vaecodec::io
