#include "io/interrupt.h"

#include <atomic>
#include <iterator>

#include "core/atomic_file.h"

namespace vaecodec::io {
namespace {

std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the flag must be safe to set from a signal handler");

// Note [Interrupts]: the first request to stop sets the flag; a second one, or SIGQUIT, ends the process at
// once, without the temporary files.
extern "C" void on_signal(int signal) {
  int none = 0;
  if (signal != SIGQUIT && g_signal.compare_exchange_strong(none, signal)) return;
  core::remove_temporary_files();
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(signal, &action, nullptr);
  raise(signal);  // delivered when the handler returns (the signal is blocked while it runs)
}

}  // namespace

InterruptHandler::InterruptHandler() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  for (const int signal : kSignals) sigaddset(&action.sa_mask, signal);  // one handler at a time
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &action, &previous_[i]);
}

InterruptHandler::~InterruptHandler() {
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &previous_[i], nullptr);
}

bool interrupted() {
  return g_signal.load(std::memory_order_relaxed) != 0;
}

void throw_if_interrupted() {
  if (interrupted()) throw Interrupted();
}

void set_interrupted(bool value) {
  g_signal.store(value ? SIGINT : 0);
}

int ffmpeg_interrupt_callback(void*) {
  return interrupted() ? 1 : 0;
}

int interrupted_exit_code() {
  const int signal = g_signal.load();
  return 128 + (signal != 0 ? signal : SIGINT);
}

}  // namespace vaecodec::io
