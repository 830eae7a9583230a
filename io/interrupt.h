#pragma once

#include <csignal>

#include "core/error.h"

namespace vaecodec::io {

// Note [Interrupts]
// SIGINT and SIGTERM only set a flag (nothing else is safe in a signal handler). Every stage polls it: the
// queues between stages wake up every few milliseconds to look, and libavformat's interrupt callback lets
// a blocking read or write return AVERROR_EXIT. The stage that sees it throws Interrupted; unwinding closes
// the queues, joins the threads and removes the temporary output, and the command exits with 130.
// The handler restores the default action, so a second Ctrl-C kills the process at once.

// What a stage throws when it sees the flag.
class Interrupted : public Error {
 public:
  Interrupted() : Error("interrupted") {}
};

// Installs the handlers for its lifetime (the previous ones come back afterwards).
class InterruptHandler {
 public:
  InterruptHandler();
  ~InterruptHandler();
  InterruptHandler(const InterruptHandler&) = delete;
  InterruptHandler& operator=(const InterruptHandler&) = delete;

 private:
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

bool interrupted();
void throw_if_interrupted();
// For tests: set or clear the flag as a signal would.
void set_interrupted(bool value);

// libavformat's AVIOInterruptCB callback: non-zero once interrupted.
int ffmpeg_interrupt_callback(void* opaque);

// The exit status of a process stopped by SIGINT, by convention.
constexpr int kInterruptedExitCode = 130;

}  // namespace vaecodec::io
