#pragma once

#include <exception>
#include <stdexcept>
#include <string>

namespace vaecodec::app {

// Note [One-line errors]
// Every failure reaches the user as one line: what failed and, where it helps, what to do. vaecodec's own
// errors are written so. LibTorch's are not: its checks carry multi-line paragraphs, and an internal
// assertion reads "... INTERNAL ASSERT FAILED at "/path/x.cpp":123, please report a bug to PyTorch. ...",
// which names neither the file being processed nor anything the user can change. They are cut to their
// first line, an internal assertion becomes "LibTorch stopped on an internal check (detail)", running out of
// memory says how to need less, and the run's caller prefixes the input it was processing.

// The message of the exception `error` as one line, without "vaecodec: error: ".
std::string error_line(const std::exception_ptr& error);
// With --verbose (io/log.h), prints the full text of `error` (LibTorch's paragraph, its backtrace when it has
// one) as "vaecodec: full error: ...", unless it is the one line already.
void print_full_error(const std::exception_ptr& error);
// Whether `error` is LibTorch's (its message names no file: the caller adds the one it was processing).
bool from_libtorch(const std::exception_ptr& error);

// A run stopped by SIGINT, SIGTERM or the like (Note [Interrupts] in io/interrupt.h), its temporary outputs
// removed: main() prints "vaecodec: " + what() (what was not written) and exits with code() (128 + the
// signal's number).
class RunInterrupted : public std::runtime_error {
 public:
  RunInterrupted(const std::string& line, int code) : std::runtime_error(line), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

}  // namespace vaecodec::app
