#pragma once

#include <atomic>
#include <iostream>
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
double process_seconds();

// A --verbose line of the start-up's timeline: "vaecodec: start-up: 0.84 s: <what>".
void startup_note(const std::string& what);

}  // namespace vaecodec::io
