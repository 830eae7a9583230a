#pragma once

#include <csignal>
#include <iterator>

#include "core/error.h"

namespace vaecodec::io {

// Note [Interrupts]
// SIGINT, SIGTERM, SIGHUP and SIGPIPE only set a flag the first time (nothing else is safe in a signal
// handler). Every stage polls it: the queues between stages wake up every few milliseconds to look, and
// libavformat's interrupt callback lets a blocking read or write return AVERROR_EXIT. The stage that sees
// it throws Interrupted; unwinding closes the queues, joins the threads and removes the temporary output,
// and the command exits with 128 + the signal's number (130 for Ctrl-C).
// A second such signal, or SIGQUIT at any time, ends the process at once, as the user asked: the handler
// removes every temporary file (core::remove_temporary_files, Note [Atomic outputs]), restores the default
// action and raises the signal again, so the process dies of it without leaving a partial file behind.

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
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT};
  struct sigaction previous_[std::size(kSignals)]{};
};

bool interrupted();
void throw_if_interrupted();
// For tests: set or clear the flag as a SIGINT would.
void set_interrupted(bool value);

// libavformat's AVIOInterruptCB callback: non-zero once interrupted.
int ffmpeg_interrupt_callback(void* opaque);

// The exit status of a run stopped by the signal that set the flag: 128 + its number, by convention (130
// for SIGINT).
int interrupted_exit_code();

}  // namespace vaecodec::io
