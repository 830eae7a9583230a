#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>

#include "io/interrupt.h"

namespace vaecodec::io {

// The link between two pipeline stages: a FIFO of at most `capacity` items, so that a fast producer waits
// for a slow consumer and memory stays bounded whatever the video's length.
// close(): the producer is done; the consumer drains what is left, then pop() gives nullopt.
// cancel(): a stage failed; both sides are released at once (push() returns false, pop() nullopt) and the
// items are dropped. Waits poll the interrupt flag (Note [Interrupts]) and throw Interrupted.
template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity > 0 ? capacity : 1) {}

  bool push(T item) {
    std::unique_lock<std::mutex> lock(mutex_);
    wait(lock, not_full_, [&] { return cancelled_ || items_.size() < capacity_; });
    if (cancelled_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  std::optional<T> pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    wait(lock, not_empty_, [&] { return cancelled_ || closed_ || !items_.empty(); });
    return take(lock);
  }

  // Never waits: an item if one is ready.
  std::optional<T> try_pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    return take(lock);
  }

  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    not_empty_.notify_all();
  }

  void cancel() {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelled_ = true;
    items_.clear();
    not_empty_.notify_all();
    not_full_.notify_all();
  }

 private:
  template <typename Ready>
  void wait(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, Ready ready) {
    while (!ready()) {
      cv.wait_for(lock, kPoll);
      if (interrupted()) throw Interrupted();
    }
  }

  std::optional<T> take(std::unique_lock<std::mutex>&) {
    if (cancelled_ || items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  static constexpr std::chrono::milliseconds kPoll{50};
  const size_t capacity_;
  std::mutex mutex_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::deque<T> items_;
  bool closed_ = false;
  bool cancelled_ = false;
};

}  // namespace vaecodec::io
