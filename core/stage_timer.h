#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vaecodec::core {

// Note [Stage timing]
// A benchmark's breakdown of where a run's time and FLOPs go. The models wrap each top-level stage (a
// decoder's conv1, middle, every up-sampling block, head) in a StageScope; while timing is on, a scope
// records a CUDA event (or a host clock on the CPU) at both ends and the FLOPs counted in between. Nothing
// synchronises until report(), so the timed run is the run as usual; off, a scope costs one branch.
class StageTimer {
 public:
  struct Stage {
    std::string name;
    double ms = 0;
    double flops = 0;
    int64_t calls = 0;
  };

  // Clears what was recorded and turns timing on; cuda: the run is on the current CUDA device (events on its
  // current stream), otherwise a host clock.
  static void start(bool cuda);
  static std::vector<Stage>
  finish();  // turns timing off, waits for the GPU, returns the stages in first-seen order
  static bool enabled();
};

class StageScope {
 public:
  // The stage's name is prefix, or prefix.index when index >= 0; built only while timing is on.
  explicit StageScope(const char* prefix, int64_t index = -1);
  ~StageScope();
  StageScope(const StageScope&) = delete;
  StageScope& operator=(const StageScope&) = delete;

 private:
  int64_t record_ = -1;
};

// f() timed as the stage `name`: `h = timed_stage("decoder.conv1", [&] { return conv1_->forward(x, cache);
// });`
template <typename F>
auto timed_stage(const char* name, F&& f) {
  StageScope scope(name);
  return f();
}

}  // namespace vaecodec::core
