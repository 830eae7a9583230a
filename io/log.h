#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace vaecodec::io {

// A warning for the user: one line on stderr, whatever --quiet says (it silences progress, not problems).
// Written with one call, so that warnings of runs on several devices at once do not interleave.
inline void warn(const std::string& message) {
  std::cerr << ("vaecodec: warning: " + message + "\n") << std::flush;
}

// --verbose: what the engine applied (Note [What the engine applied] in core/kernel_log.h) and the full
// text of errors, besides their one line (Note [One-line errors] in app/errors.h). Process-wide, set once
// from the command line.
inline std::atomic<bool>& verbose_flag() {
  static std::atomic<bool> on{false};
  return on;
}
inline void set_verbose(bool on) {
  verbose_flag().store(on);
}
inline bool verbose() {
  return verbose_flag().load(std::memory_order_relaxed);
}

// A line for --verbose only, on stderr: "vaecodec: <topic>: <message>".
inline void verbose_note(const std::string& topic, const std::string& message) {
  if (verbose()) std::cerr << "vaecodec: " << topic << ": " << message << std::endl;
}

// Seconds since this process began, by the kernel's record of its start (so exec and loading LibTorch count),
// for --verbose's start-up lines; 0 where /proc cannot tell. Resolution: the kernel's clock tick (10 ms).
inline double process_seconds() {
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

// A --verbose line of the start-up's timeline: "vaecodec: start-up: 0.84 s: <what>".
inline void startup_note(const std::string& what) {
  if (!verbose()) return;
  char at[32];
  std::snprintf(at, sizeof(at), "%.2f s: ", process_seconds());
  verbose_note("start-up", at + what);
}

}  // namespace vaecodec::io
