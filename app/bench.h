#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>

#include "app/memory_options.h"
#include "app/overwrite.h"
#include "core/engine.h"
#include "core/planner.h"
#include "core/vae_model.h"

// `vaecodec bench`: its options and what its timings share (app/cmd_bench.cpp: one device;
// app/bench_devices.cpp: several devices at once, or one clip split across them).

namespace vaecodec::app {

struct BenchOptions {
  std::string weights;
  bool random = false;
  std::string model;  // empty: the default family with --random, detected with --weights
  std::string size = "1280x720";
  int64_t frames = 81;
  std::string op = "decode";
  std::string device = "auto";  // as the run commands: cuda when available, else the CPU
  std::string devices;          // --devices: time every one at once (Note [Benchmark over devices])
  bool split = false;           // with --devices: one clip split across them (Note [Bands across devices])
  std::string dtype = "auto";   // as the run commands: bf16 on CUDA, fp32 on the CPU
  int64_t chunk = 1;
  int runs = 3;
  int warmup = 1;
  bool accuracy = false;
  bool autotune = true;
  std::string autotune_choice;  // --autotune on|off; empty: autotune's default (on; --no-autotune: off)
  OverwriteOptions overwrite;   // -y, -n for --trace
  std::string conv = "auto";    // Note [Run choices] in core/run_choices.h
  bool json = false;
  bool verbose = false;
  std::string layout = "auto";   // auto, channels-last or contiguous (Note [Channels-last])
  bool profile = false;          // time and FLOPs per stage (Note [Stage timing])
  bool compare_untiled = false;  // tiled plans: also run untiled and report the difference
  std::string trace;             // a Chrome trace of one extra run (kernels with their operators and shapes)
  bool clip_on_host = false;     // clip and result in host memory (Note [A clip in host memory])
  MemoryOptions memory;
};

// The benchmark's input for `model` and the plan it runs under: on `device`, or in host memory with
// --clip-on-host (bench holds the whole clip).
struct BenchClip {
  torch::Tensor video, latents;
  core::PlannerOptions planner;
  int64_t resident = 0;  // bytes bench holds on the device besides the run
  bool on_host = false;  // --clip-on-host: run_op streams it
  core::Plan plan;
};

// The dtype a run takes, as --dtype names it ("auto" resolved for `device`).
std::string dtype_text(const BenchOptions& o, torch::Device device);
// --layout's activation layout: unset for auto.
std::optional<bool> channels_last_option(const std::string& layout);
void synchronize(const torch::Device& device);
// One operation over the whole clip, in the plan's (or the options') chunks and tiles, as the tool runs it; a
// clip in host memory goes in a chunk at a time and its result comes back to host memory as it is made.
torch::Tensor run_op(core::VaeModel& model, const std::string& op, const torch::Tensor& video,
                     const torch::Tensor& latents, const core::ChunkOptions& chunks, bool streamed = false);
torch::Tensor run_op(core::VaeModel& model, const std::string& op, const torch::Tensor& video,
                     const torch::Tensor& latents, const core::Plan& plan, bool streamed = false);
// The middle of the timed runs (the upper one of an even count).
double median_of(std::vector<double> seconds);
// The same plan untiled, for the tiles' accuracy.
core::Plan untiled(core::Plan plan);
int64_t bytes_of(const torch::Tensor& t);
// PSNR of `got` against `reference`, both in [-1, 1] (clamped).
double psnr(const torch::Tensor& got, const torch::Tensor& reference);
// The model bench runs: --weights, or --random's family with random weights, on `device` in `dtype` with
// --conv, --dtype fp8 and --autotune's choices.
std::shared_ptr<core::VaeModel> make_model(const BenchOptions& o, torch::Device device,
                                           torch::ScalarType dtype);
// The clip on `device` for `model`, and its plan.
BenchClip make_bench_clip(const BenchOptions& o, const core::VaeModel& model, torch::Device device,
                          torch::ScalarType dtype);

// One run under LibTorch's Kineto profiler, saved as a Chrome trace: every kernel with the operator that
// launched it and that operator's input shapes (scripts/dev/trace_summary.py sums them up), and every
// allocation of the caching allocator with the running total (scripts/dev/trace_memory.py: what is alive
// at the peak, by the operator that made it). Untimed: the profiler's own cost would show in the medians.
template <typename Run>
void write_trace(const std::string& path, Run&& run) {
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  const prof::ProfilerConfig config(prof::ProfilerState::KINETO, /*report_input_shapes=*/true,
                                    /*profile_memory=*/true);
  const std::set<ActivityType> activities{ActivityType::CPU, ActivityType::CUDA};
  prof::prepareProfiler(config, activities);
  prof::enableProfiler(config, activities);
  try {
    run();
  } catch (...) {
    prof::disableProfiler();
    throw;
  }
  prof::disableProfiler()->save(path);
}

// --devices: the clip on every device at once against the first alone (Note [Benchmark over devices]).
void bench_devices(const BenchOptions& o);
// --devices --split: one clip split across the devices in bands against the first alone.
void bench_split(const BenchOptions& o);

}  // namespace vaecodec::app
