#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <mutex>
#include <optional>
#include <string>

namespace vaecodec::io {

// How a Progress reports. The defaults suit the CLI: stderr, terminal mode when stderr is a terminal.
struct ProgressOptions {
  bool quiet = false;           // print nothing at all
  std::ostream* out = nullptr;  // nullptr: std::cerr
  // Whether `out` is a terminal. Unset: isatty(STDERR_FILENO) when writing to std::cerr, false otherwise.
  std::optional<bool> is_terminal;
  double terminal_interval_s = 0.1;  // terminal mode: at most one redraw per interval
  double min_interval_s = 5.0;       // plain mode: at most one line per interval
  // Seconds on a monotonic clock (tests pass a fake one). Empty: std::chrono::steady_clock.
  std::function<double()> clock;
  // Told the frames done at every update(), quiet or not (a batch's own progress line sums its runs').
  std::function<void(int64_t done)> listener;
};

// Reports progress of long work in frames: done / total, frames per second and the estimated time left.
//   terminal  one line redrawn in place with '\r' (padded with spaces over a longer previous line), at most
//             every terminal_interval_s:  "encode: 120/481 frames (25%), 23.4 fps, ETA 0:15"
//   plain     the same text as a line of its own, at most every min_interval_s (logs, pipes)
// finish() prints the last line, "encode: done, 481 frames in 0:20 (23.4 fps)", ending the terminal line.
// The rate is the average since construction; a total <= 0 means unknown (no percentage, no ETA).
// Times print as M:SS, or H:MM:SS from an hour on. update() and finish() may be called from any thread.
class Progress {
 public:
  Progress(std::string label, int64_t total, ProgressOptions options = {});
  // Without finish() (an exception unwinding, say), ends a half-drawn terminal line so that the next message
  // starts on a line of its own, and prints nothing else.
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `done` frames are finished in all (not since the last call); fewer than before counts as no change.
  // Prints if the interval has passed.
  void update(int64_t done);
  // Prints the final line; later calls (and update()) do nothing.
  void finish();
  // Prints `line` on a line of its own, whatever `quiet` says: in terminal mode the progress line is wiped
  // first and drawn again at the next update, so that messages of other threads do not run into it.
  void message(const std::string& line);
  // Names what is counted from the next line on (a batch's line names its current input and k/N).
  void set_label(std::string label);

 private:
  double now() const;
  std::string status_line(double elapsed) const;
  void emit(const std::string& line, bool final);

  std::string label_;
  int64_t total_;
  ProgressOptions options_;
  std::ostream* out_;
  bool terminal_;
  std::mutex mutex_;
  double start_ = 0;
  double last_print_ = 0;
  int64_t done_ = 0;
  size_t drawn_width_ = 0;  // terminal mode: length of the line now on screen (0: none)
  bool finished_ = false;
};

}  // namespace vaecodec::io
