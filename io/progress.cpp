#include "io/progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

namespace vaecodec::io {
namespace {

// M:SS, or H:MM:SS from an hour on; rounded to the second.
std::string duration_text(double seconds) {
  const long long total = std::llround(std::max(0.0, seconds));
  const long long hours = total / 3600;
  const long long minutes = (total / 60) % 60;
  const long long secs = total % 60;
  char buffer[48];
  if (hours > 0) {
    std::snprintf(buffer, sizeof(buffer), "%lld:%02lld:%02lld", hours, minutes, secs);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%lld:%02lld", minutes, secs);
  }
  return buffer;
}

std::string fps_text(double fps) {
  char buffer[48];
  std::snprintf(buffer, sizeof(buffer), "%.1f", fps);
  return buffer;
}

}  // namespace

Progress::Progress(std::string label, int64_t total, ProgressOptions options)
    : label_(std::move(label)), total_(total), options_(std::move(options)) {
  out_ = options_.out ? options_.out : &std::cerr;
  if (options_.is_terminal) {
    terminal_ = *options_.is_terminal;
  } else {
    terminal_ = options_.out == nullptr && ::isatty(STDERR_FILENO) == 1;
  }
  start_ = now();
  last_print_ = start_;
}

Progress::~Progress() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!finished_ && terminal_ && drawn_width_ > 0) {
    *out_ << "\n";
    out_->flush();
  }
}

double Progress::now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string Progress::status_line(double elapsed) const {
  const double fps = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0.0;
  std::ostringstream line;
  line << label_ << ": " << done_;
  if (total_ > 0) {
    line << "/" << total_ << " frames (" << done_ * 100 / total_ << "%)";
  } else {
    line << " frames";
  }
  line << ", " << fps_text(fps) << " fps";
  if (total_ > 0) {
    const int64_t left = std::max<int64_t>(0, total_ - done_);
    line << ", ETA " << (fps > 0 ? duration_text(static_cast<double>(left) / fps) : std::string("--:--"));
  }
  return line.str();
}

void Progress::emit(const std::string& line, bool final) {
  if (terminal_) {
    // Spaces cover what is left of a longer line drawn before.
    const size_t pad = drawn_width_ > line.size() ? drawn_width_ - line.size() : 0;
    *out_ << "\r" << line << std::string(pad, ' ');
    drawn_width_ = line.size();
    if (final) {
      *out_ << "\n";
      drawn_width_ = 0;
    }
  } else {
    *out_ << line << "\n";
  }
  out_->flush();
}

void Progress::update(int64_t done) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  done = std::max(done, done_);  // two reporters (the engine, the writer): the count never goes back
  done_ = done;
  if (options_.listener) options_.listener(done);
  if (options_.quiet) return;
  const double t = now();
  const double interval = terminal_ ? options_.terminal_interval_s : options_.min_interval_s;
  if (t - last_print_ < interval) return;
  last_print_ = t;
  emit(status_line(t - start_), /*final=*/false);
}

void Progress::message(const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (terminal_ && drawn_width_ > 0) {
    *out_ << "\r" << std::string(drawn_width_, ' ') << "\r";
    drawn_width_ = 0;
    last_print_ = 0;  // redraw at the next update
  }
  *out_ << line << "\n";
  out_->flush();
}

void Progress::set_label(std::string label) {
  std::lock_guard<std::mutex> lock(mutex_);
  label_ = std::move(label);
}

void Progress::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  finished_ = true;
  if (options_.quiet) return;
  const double elapsed = now() - start_;
  const double fps = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0.0;
  std::ostringstream line;
  line << label_ << ": done, " << done_ << " frames in " << duration_text(elapsed) << " (" << fps_text(fps)
       << " fps)";
  emit(line.str(), /*final=*/true);
}

}  // namespace vaecodec::io
