#include "io/interrupt.h"

#include <atomic>

namespace vaecodec::io {
namespace {

std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the flag must be safe to set from a signal handler");

extern "C" void on_signal(int signal) {
  g_signal.store(signal);
  std::signal(signal, SIG_DFL);
}

}  // namespace

InterruptHandler::InterruptHandler() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_int_);
  sigaction(SIGTERM, &action, &previous_term_);
}

InterruptHandler::~InterruptHandler() {
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
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

}  // namespace vaecodec::io
