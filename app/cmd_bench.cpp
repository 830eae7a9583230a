#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <iomanip>
#include <iostream>
#include <latch>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/devices.h"
#include "app/memory_options.h"
#include "app/overwrite.h"
#include "app/run_options.h"
#include "core/band_split.h"
#include "core/device/device.h"
#include "core/engine.h"
#include "core/engine_report.h"
#include "core/error.h"
#include "core/flops.h"
#include "core/json_text.h"
#include "core/kernels/conv3d.h"
#include "core/models/registry.h"
#include "core/planner.h"
#include "core/stage_timer.h"
#include "core/vae_model.h"
#include "io/log.h"

namespace vaecodec::app {
namespace {

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
  std::string conv = "auto";    // Note [Own convolutions] in core/kernels/conv3d.h
  bool json = false;
  bool verbose = false;
  std::string layout = "auto";   // auto, channels-last or contiguous (Note [Channels-last])
  bool profile = false;          // time and FLOPs per stage (Note [Stage timing])
  bool compare_untiled = false;  // tiled plans: also run untiled and report the difference
  std::string trace;             // a Chrome trace of one extra run (kernels with their operators and shapes)
  MemoryOptions memory;
};

// The dtype a run takes, as --dtype names it ("auto" resolved for `device`).
std::string dtype_text(const BenchOptions& o, torch::Device device) {
  return o.dtype == "fp8" ? "fp8" : dtype_name(resolve_dtype(o.dtype, device));
}

std::optional<bool> channels_last_option(const std::string& layout) {
  if (layout == "auto") return std::nullopt;
  if (layout == "channels-last") return true;
  if (layout == "contiguous") return false;
  throw UsageError("--layout: expected auto, channels-last or contiguous, got '" + layout + "'");
}

// One run under LibTorch's Kineto profiler, saved as a Chrome trace: every kernel with the operator that
// launched it and that operator's input shapes (scripts/dev/trace_summary.py sums them up). Untimed: the
// profiler's own cost would show in the medians.
template <typename Run>
void write_trace(const std::string& path, Run&& run) {
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  const prof::ProfilerConfig config(prof::ProfilerState::KINETO, /*report_input_shapes=*/true);
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

void synchronize(const torch::Device& device) {
  core::Device::of(device).synchronize();
}

// One operation over the whole clip, in the plan's chunks and tiles, as the tool runs it.
torch::Tensor run_op(core::VaeModel& model, const std::string& op, const torch::Tensor& video,
                     const torch::Tensor& latents, const core::ChunkOptions& chunks) {
  if (op == "encode") return core::encode_video(model, video, chunks);
  if (op == "decode") return core::decode_latents(model, latents, chunks);
  return core::decode_latents(model, core::encode_video(model, video, chunks), chunks);
}

torch::Tensor run_op(core::VaeModel& model, const std::string& op, const torch::Tensor& video,
                     const torch::Tensor& latents, const core::Plan& plan) {
  return run_op(model, op, video, latents, core::ChunkOptions::of(plan));
}

// The middle of the timed runs (the upper one of an even count).
double median_of(std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

// The same run untiled, for the tiles' accuracy.
core::Plan untiled(core::Plan plan) {
  plan.tiles = core::TileGrid::whole(plan.tiles.latent_height, plan.tiles.latent_width);
  plan.offload = false;
  return plan;
}

int64_t bytes_of(const torch::Tensor& t) {
  return static_cast<int64_t>(t.numel() * t.element_size());
}

double psnr(const torch::Tensor& got, const torch::Tensor& reference) {
  const double mse = (got.clamp(-1, 1) - reference.clamp(-1, 1)).div(2).pow(2).mean().item<double>();
  return 10 * std::log10(1.0 / std::max(mse, 1e-20));
}

std::shared_ptr<core::VaeModel> make_model(const BenchOptions& o, torch::Device device,
                                           torch::ScalarType dtype) {
  // --model names the family of --random; with --weights it overrides detection when given.
  const core::ModelOptions options{o.model, device, dtype, nullptr, channels_last_option(o.layout)};
  apply_fp8_option(o.dtype, {device}, o.conv);  // Note [FP8 convolutions]
  std::shared_ptr<core::VaeModel> model;
  if (!o.weights.empty()) {
    model = core::build_model(core::load_checkpoint(o.weights), options);
  } else {
    const auto& family = o.model.empty() ? core::default_model_family() : core::find_model_family(o.model);
    model = family.build(family.released_config);
    core::randomize_parameters(*model, /*seed=*/0);
    core::place_model(*model, options);
  }
  check_fp8_family(o.dtype, model->info().family);
  return model;
}

// The benchmark's input on `device` for `model` and the plan it runs under (bench holds the whole clip).
struct BenchClip {
  torch::Tensor video, latents;
  core::PlannerOptions planner;
  int64_t resident = 0;  // bytes bench holds besides the run
  core::Plan plan;
};

BenchClip make_bench_clip(const BenchOptions& o, const core::VaeModel& model, torch::Device device,
                          torch::ScalarType dtype) {
  const auto [width, height] = parse_frame_size(o.size);
  const auto& info = model.info();
  const int64_t f = info.spatial_factor, tf = info.temporal_factor;
  if (width % f || height % f) throw UsageError("--size must be a multiple of " + std::to_string(f));
  if ((o.frames - 1) % tf) throw UsageError("--frames must be 1 + " + std::to_string(tf) + "k");

  // Smooth random content in [-1, 1] (never zeros: they would flatter the timings).
  BenchClip clip;
  torch::manual_seed(1);
  auto coarse = torch::rand({1, 3, o.frames, height / f, width / f}) * 2 - 1;
  clip.video =
      torch::nn::functional::interpolate(coarse, torch::nn::functional::InterpolateFuncOptions()
                                                     .size(std::vector<int64_t>{o.frames, height, width})
                                                     .mode(torch::kTrilinear)
                                                     .align_corners(false))
          .add_(torch::randn({1, 3, o.frames, height, width}) * 0.05)
          .clamp_(-1, 1)
          .to(device);
  clip.latents =
      torch::randn({1, info.latent_channels, 1 + (o.frames - 1) / tf, height / f, width / f}).to(device);
  // Bench holds the whole clip on the device, and the whole result twice (the last run's is still in `out`
  // while the next one is made): the plan leaves room for them.
  const core::Op op = core::parse_op(o.op);
  const int64_t element = static_cast<int64_t>(c10::elementSize(dtype));
  int64_t resident = op == core::Op::kDecode ? bytes_of(clip.latents) : bytes_of(clip.video);
  if (op != core::Op::kEncode) resident += 2 * 3 * o.frames * width * height * element;
  if (op != core::Op::kDecode) resident += 2 * bytes_of(clip.latents) / 4 * element;  // the latents it makes
  clip.resident = resident;
  clip.planner = o.memory.planner;
  clip.planner.reserved_bytes = resident;
  clip.plan = core::plan_run(core::PlanRequest::of(info, model.parameter_count(), op, width, height, dtype),
                             clip.planner);
  return clip;
}

// Note [Benchmark over devices]
// `bench --devices` measures what a batch over devices (Note [Batches over devices] in app/device_batch.h)
// can gain: the clip on the first device alone, then on every device at once, one model and one thread each,
// the threads meeting at a gate after their warm-up so that the timed runs overlap. It reports each device's
// median and peak memory, and the devices' frames per second summed against the first device's alone (a
// batch of equal clips on N devices can reach at most N times; shared PCIe, host memory and CPU threads are
// what keeps it lower).
struct DeviceTiming {
  torch::Device device = torch::kCPU;
  std::string gpu;
  std::vector<double> seconds;
  double median = 0;
  int64_t peak_allocated = 0, peak_reserved = 0;
  core::Plan plan;
};

// Builds the model and the clip on `device`, warms up, waits at `gate` (when given) and times o.runs runs.
DeviceTiming time_on_device(const BenchOptions& o, torch::Device device, std::latch* gate) {
  bool arrived = false;
  try {
    c10::cuda::OptionalCUDAGuard guard;
    if (device.is_cuda()) guard.set_device(device);
    const auto dtype = resolve_dtype(o.dtype, device);
    auto model = make_model(o, device, dtype);
    if (device.is_cuda()) core::Device::set_autotune(o.autotune);  // after the model's prepare()
    const BenchClip clip = make_bench_clip(o, *model, device, dtype);
    core::Device& where = core::Device::of(device);
    where.cap_memory(clip.planner.budget_bytes);
    for (int i = 0; i < o.warmup; ++i) run_op(*model, o.op, clip.video, clip.latents, clip.plan);
    where.synchronize();
    where.reset_peak_statistics();
    if (gate) gate->arrive_and_wait();
    arrived = true;
    DeviceTiming t;
    t.device = device;
    t.gpu = where.name();
    t.plan = clip.plan;
    for (int i = 0; i < o.runs; ++i) {
      const auto start = std::chrono::steady_clock::now();
      torch::Tensor out = run_op(*model, o.op, clip.video, clip.latents, clip.plan);
      where.synchronize();
      t.seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    t.median = median_of(t.seconds);
    t.peak_allocated = where.peak_allocated_bytes();
    t.peak_reserved = where.peak_reserved_bytes();
    return t;
  } catch (...) {
    if (gate && !arrived) gate->count_down();  // the others time without it rather than wait for ever
    throw;
  }
}

// The checks `bench --devices` makes before any work, with or without --split (`what` names which in the
// refusal of the one-device options); the devices --devices names.
std::vector<torch::Device> bench_device_list(const BenchOptions& o, const std::string& what) {
  if (o.accuracy || o.profile || o.compare_untiled || (!o.trace.empty() && !o.split))
    throw UsageError(what +
                     "; run --accuracy, --profile and --compare-untiled on one device (--device), and "
                     "--trace on one device or with --split");
  if (o.weights.empty() && !o.random) throw UsageError("bench needs --weights FILE or --random");
  if (o.op != "encode" && o.op != "decode" && o.op != "roundtrip")
    throw UsageError("--op: expected encode, decode or roundtrip, got '" + o.op + "'");
  parse_frame_size(o.size);
  const int64_t count = visible_cuda_devices();
  std::vector<torch::Device> devices = parse_devices(o.devices, count);
  check_device_agrees(o.device, devices, count);
  return devices;
}

void bench_devices(const BenchOptions& o) {
  const std::vector<torch::Device> devices = bench_device_list(o, "--devices times the devices together");

  const DeviceTiming alone = time_on_device(o, devices.front(), nullptr);
  std::vector<DeviceTiming> together(devices.size());
  std::vector<std::exception_ptr> errors(devices.size());
  std::latch gate(static_cast<std::ptrdiff_t>(devices.size()));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < devices.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        together[i] = time_on_device(o, devices[i], &gate);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  for (std::thread& thread : threads) thread.join();
  for (size_t i = 0; i < devices.size(); ++i)
    if (errors[i]) {
      try {
        std::rethrow_exception(errors[i]);
      } catch (const std::exception& e) {
        throw Error(devices[i].str() + ": " + e.what());
      }
    }

  const double one = o.frames / alone.median;
  double aggregate = 0;
  nlohmann::json per_device = nlohmann::json::array();
  for (const DeviceTiming& t : together) {
    aggregate += o.frames / t.median;
    per_device.push_back({{"device", t.device.str()},
                          {"gpu", t.gpu},
                          {"runs", t.seconds},
                          {"median_s", t.median},
                          {"frames_per_s", o.frames / t.median},
                          {"peak_allocated_bytes", t.peak_allocated},
                          {"peak_reserved_bytes", t.peak_reserved},
                          {"plan", t.plan.to_json()}});
  }
  const nlohmann::json j = {{"op", o.op},
                            {"size", o.size},
                            {"frames", o.frames},
                            {"dtype", dtype_text(o, devices.front())},
                            {"devices", per_device},
                            {"one_device",
                             {{"device", alone.device.str()},
                              {"median_s", alone.median},
                              {"frames_per_s", one},
                              {"peak_allocated_bytes", alone.peak_allocated}}},
                            {"aggregate_frames_per_s", aggregate},
                            {"speedup_vs_one_device", aggregate / one}};
  if (o.json) {
    std::cout << j.dump() << "\n";
    return;
  }
  std::cout << std::fixed << std::setprecision(3) << o.op << " " << o.size << " x" << o.frames << " "
            << dtype_text(o, devices.front()) << " on " << devices.size()
            << " devices at once, one model each\n";
  for (const DeviceTiming& t : together)
    std::cout << "  " << t.device.str() << " (" << t.gpu << "): median " << std::setprecision(3) << t.median
              << " s, " << std::setprecision(1) << o.frames / t.median << " frames/s, peak "
              << std::setprecision(2) << t.peak_allocated / double(1ull << 30) << " GiB allocated, "
              << t.peak_reserved / double(1ull << 30) << " GiB reserved\n";
  std::cout << "  " << alone.device.str() << " alone: median " << std::setprecision(3) << alone.median
            << " s, " << std::setprecision(1) << one << " frames/s\n"
            << "  together " << aggregate << " frames/s, " << std::setprecision(2) << aggregate / one
            << "x one device\n";
}

// `bench --devices LIST --split`: the clip split across the devices in bands (Note [Bands across devices] in
// core/band_split.h) against the first device alone, in one call: the time, each device's peak memory and
// the bytes each device received from the others per run (halo rows, attention keys and values), and how far
// the split's output is from the first device's own run (rounding only: Note [Bands across devices]).
void bench_split(const BenchOptions& o) {
  const std::vector<torch::Device> devices = bench_device_list(o, "--split times the split run");
  if (devices.size() < 2) throw UsageError("--split needs two or more --devices");
  use_plain_allocator_for_peers();  // for the one-device run too, so that both use the same allocator
  const DeviceTiming alone = time_on_device(o, devices.front(), nullptr);

  const auto dtype = resolve_dtype(o.dtype, devices.front());
  std::vector<std::shared_ptr<core::VaeModel>> models;
  std::vector<core::BandPlace> places;
  for (const torch::Device& d : devices) {
    models.push_back(make_model(o, d, dtype));
    places.push_back({models.back().get(), &core::Device::of(d)});
  }
  core::Device::set_autotune(o.autotune);  // after the models' prepare()
  core::VaeModel& model = *models.front();
  const BenchClip clip = make_bench_clip(o, model, devices.front(), dtype);
  const auto [width, height] = parse_frame_size(o.size);
  const core::Plan plan =
      core::plan_band_run(core::PlanRequest::of(model.info(), model.parameter_count(), core::parse_op(o.op),
                                                width, height, dtype),
                          static_cast<int64_t>(devices.size()), clip.planner);
  const core::ChunkOptions chunks =
      core::ChunkOptions::of(plan, places);  // columns where a band does not fit
  auto run = [&] { return run_op(model, o.op, clip.video, clip.latents, chunks); };
  auto synchronize_all = [&] {
    for (const torch::Device& d : devices) synchronize(d);
  };
  for (int i = 0; i < o.warmup; ++i) run();
  synchronize_all();
  for (const torch::Device& d : devices) core::Device::of(d).reset_peak_statistics();
  core::reset_band_traffic();
  core::FlopCounter::reset();
  std::vector<double> seconds;
  for (int i = 0; i < o.runs; ++i) {
    core::FlopCounter::enable(i == 0);  // every band's layers count, on their threads
    const auto start = std::chrono::steady_clock::now();
    torch::Tensor out = run();
    synchronize_all();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  core::FlopCounter::enable(false);
  const double median = median_of(seconds);
  const double tflop = static_cast<double>(core::FlopCounter::total()) / 1e12;
  const auto traffic = core::band_traffic();
  // Every device's kernels and copies of one extra run (CUPTI sees all of the process's GPUs).
  if (!o.trace.empty())
    write_trace(o.trace, [&] {
      run();
      synchronize_all();
    });
  // The split's output against the first device's own run of the same model, frame by frame in float32 (the
  // whole clip in float64 would not fit beside it at 4K): the split should change rounding only.
  // A failure here (the one-device run may not fit where the bands did) leaves the timing standing.
  std::optional<double> split_error;
  try {
    const torch::Tensor mine = run();
    const torch::Tensor reference = run_op(model, o.op, clip.video, clip.latents, plan);
    double diff = 0, norm = 0;
    for (int64_t t = 0; t < reference.size(2); ++t) {
      const auto r = reference.select(2, t).to(torch::kFloat);
      diff += (mine.select(2, t).to(torch::kFloat) - r).pow(2).sum().item<double>();
      norm += r.pow(2).sum().item<double>();
    }
    split_error = std::sqrt(diff / std::max(norm, 1e-300));
  } catch (const std::exception& e) {
    std::cerr << "vaecodec: warning: the split's output was not compared with one device's: " << e.what()
              << std::endl;
  }
  nlohmann::json per_device = nlohmann::json::array();
  for (const torch::Device& d : devices) {
    const auto it = traffic.find(d.str());
    per_device.push_back({{"device", d.str()},
                          {"peak_allocated_bytes", core::Device::of(d).peak_allocated_bytes()},
                          {"peak_reserved_bytes", core::Device::of(d).peak_reserved_bytes()},
                          {"received_bytes_per_run", (it == traffic.end() ? 0 : it->second) / o.runs}});
  }
  const nlohmann::json j = {
      {"op", o.op},
      {"size", o.size},
      {"frames", o.frames},
      {"dtype", dtype_text(o, devices.front())},
      {"split",
       {{"devices", per_device},
        {"runs", seconds},
        {"median_s", median},
        {"relative_error_vs_one_device", split_error ? nlohmann::json(*split_error) : nlohmann::json()},
        {"model_tflop", tflop},
        {"tflops", tflop / median},
        {"tflops_per_device", tflop / median / static_cast<double>(devices.size())},
        {"plan", plan.to_json()}}},
      {"one_device",
       {{"device", alone.device.str()},
        {"median_s", alone.median},
        {"peak_allocated_bytes", alone.peak_allocated}}},
      {"speedup_vs_one_device", alone.median / median}};
  if (o.json) {
    std::cout << j.dump() << "\n";
    return;
  }
  std::cout << std::fixed << std::setprecision(3) << o.op << " " << o.size << " x" << o.frames << " "
            << dtype_text(o, devices.front()) << " split across " << devices.size()
            << " devices in bands: median " << median << " s against " << alone.median << " s on "
            << alone.device.str() << " alone, " << std::setprecision(2) << alone.median / median << "x";
  std::cout << "; model " << std::setprecision(1) << tflop << " TFLOP, " << std::setprecision(0)
            << tflop / median / static_cast<double>(devices.size()) << " TFLOP/s per device";
  if (split_error)
    std::cout << "; relative error against the first device's own run " << std::scientific
              << std::setprecision(2) << *split_error << std::fixed;
  std::cout << "\n";
  for (const nlohmann::json& d : per_device)
    std::cout << "  " << d["device"].get<std::string>() << ": peak " << std::setprecision(2)
              << d["peak_allocated_bytes"].get<int64_t>() / double(1ull << 30) << " GiB allocated, received "
              << std::setprecision(1) << d["received_bytes_per_run"].get<int64_t>() / double(1 << 20)
              << " MiB per run\n";
}

void bench(const BenchOptions& o) {
  core::kernels::set_conv_backend(*core::kernels::parse_conv_backend(o.conv));
  if (o.split && o.devices.empty())
    throw UsageError("--split splits the clip across --devices; give --devices too");
  if (o.split) return bench_split(o);
  if (!o.devices.empty()) return bench_devices(o);
  parse_frame_size(o.size);  // a malformed --size fails before the model is built
  if (o.op != "encode" && o.op != "decode" && o.op != "roundtrip")
    throw UsageError("--op: expected encode, decode or roundtrip, got '" + o.op + "'");
  if (o.weights.empty() && !o.random) throw UsageError("bench needs --weights FILE or --random");
  const auto device = resolve_device(o.device);
  const auto dtype = resolve_dtype(o.dtype, device);
  auto model = make_model(o, device, dtype);
  if (device.is_cuda()) core::Device::set_autotune(o.autotune);
  if (o.verbose) {  // Note [What the engine applied]
    io::set_verbose(true);
    core::KernelLog::enable(true);
    for (const std::string& line : core::engine_setup_lines(*model, o.autotune && device.is_cuda()))
      io::verbose_note("engine", line);
  }
  const auto& info = model->info();
  const core::Op op = core::parse_op(o.op);
  BenchClip clip = make_bench_clip(o, *model, device, dtype);
  const torch::Tensor& video = clip.video;
  const torch::Tensor& latents = clip.latents;
  const core::PlannerOptions& planner = clip.planner;
  const int64_t resident = clip.resident;
  const core::Plan& plan = clip.plan;
  if (!o.json) std::cerr << plan.summary() << "\n";
  const double fraction = core::Device::of(device).cap_memory(planner.budget_bytes);

  // With --warmup 0 the traced run is the process's first: it shows the first calls (plans, kernel loads,
  // allocations) that a fresh file run pays. Otherwise it follows the timed runs.
  const bool trace_cold = !o.trace.empty() && o.warmup == 0;
  auto traced_run = [&] {
    write_trace(o.trace, [&] {
      run_op(*model, o.op, video, latents, plan);
      synchronize(device);
    });
  };
  if (trace_cold) traced_run();
  for (int i = 0; i < o.warmup; ++i) run_op(*model, o.op, video, latents, plan);
  synchronize(device);
  core::Device::of(device).reset_peak_statistics();
  core::FlopCounter::reset();
  std::vector<double> seconds;
  std::vector<core::StageTimer::Stage> stages;
  torch::Tensor out;
  for (int i = 0; i < o.runs; ++i) {
    core::FlopCounter::enable(i == 0);
    if (i == 0 && o.profile) core::StageTimer::start(device.is_cuda());
    const auto start = std::chrono::steady_clock::now();
    try {
      out = run_op(*model, o.op, video, latents, plan);
    } catch (const c10::OutOfMemoryError& e) {
      throw Error("out of GPU memory under the plan (" + plan.summary() + "): " + e.what_without_backtrace());
    }
    synchronize(device);
    if (i == 0 && o.profile) stages = core::StageTimer::finish();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  core::FlopCounter::enable(false);
  if (!o.trace.empty() && !trace_cold) traced_run();
  const double median = median_of(seconds);
  const double tflop = static_cast<double>(core::FlopCounter::total()) / 1e12;

  nlohmann::json j = {{"model", info.family},
                      {"weights", o.weights.empty() ? "random" : o.weights},
                      {"op", o.op},
                      {"size", o.size},
                      {"frames", o.frames},
                      {"device", device.str()},
                      {"dtype", dtype_text(o, device)},
                      {"chunk_latent_frames", plan.chunk},
                      {"conv", o.conv},
                      {"preset", o.memory.chosen ? nlohmann::json(o.memory.chosen->name) : nlohmann::json()},
                      {"budget_bytes", planner.budget_bytes},
                      {"allocator_fraction", fraction},
                      {"resident_bytes", resident},
                      {"plan", plan.to_json()},
                      {"estimate_gib", plan.estimate.total() / double(1ull << 30)},
                      {"runs", seconds},
                      {"median_s", median},
                      {"frames_per_s", o.frames / median},
                      {"model_tflop", tflop},
                      {"tflops", tflop / median},
                      {"channels_last", model->channels_last()}};
  if (o.profile) {
    // The profiled run is the first timed one; its stages do not cover the transfers between them.
    auto& table = j["stages"] = nlohmann::json::array();
    for (const auto& s : stages)
      table.push_back({{"stage", s.name},
                       {"ms", s.ms},
                       {"tflop", s.flops / 1e12},
                       {"calls", s.calls},
                       {"tflops", s.ms > 0 ? s.flops / 1e12 / (s.ms / 1e3) : 0.0}});
  }
  if (device.is_cuda()) {
    const core::Device& gpu = core::Device::of(device);
    const int64_t allocated = gpu.peak_allocated_bytes(), reserved = gpu.peak_reserved_bytes();
    j["peak_allocated_gib"] = allocated / double(1ull << 30);
    j["peak_reserved_gib"] = reserved / double(1ull << 30);
    j["peak_allocated_bytes"] = allocated;
    j["peak_reserved_bytes"] = reserved;
    if (planner.budget_bytes > 0) j["within_budget"] = reserved <= planner.budget_bytes;
    j["gpu"] = gpu.name();
  }
  if (o.accuracy && dtype != torch::kFloat) {
    auto reference_model = make_model(o, device, torch::kFloat);
    const auto reference = run_op(*reference_model, o.op, video, latents, plan).to(torch::kDouble);
    const auto got = out.to(torch::kDouble);
    j["relative_l2_vs_fp32"] = ((got - reference).norm() / reference.norm()).item<double>();
    if (o.op != "encode") j["psnr_vs_fp32_db"] = psnr(got, reference);
    if (o.dtype == "fp8") {
      // Beside it, the same model in bf16 alone: what e4m3 costs on top.
      core::kernels::set_fp8_convolutions(false);
      const auto bf16 = run_op(*model, o.op, video, latents, plan).to(torch::kDouble);
      core::kernels::set_fp8_convolutions(true);
      j["bf16_relative_l2_vs_fp32"] = ((bf16 - reference).norm() / reference.norm()).item<double>();
      if (o.op != "encode") j["bf16_psnr_vs_fp32_db"] = psnr(bf16, reference);
    }
  }
  if (o.compare_untiled && plan.tiles.tiled()) {
    // After the measurements: the untiled run may need more than the budget, so the cap is lifted.
    core::Device::of(device).cap_memory(std::numeric_limits<int64_t>::max());
    const auto reference = run_op(*model, o.op, video, latents, untiled(plan)).to(torch::kDouble);
    const auto got = out.to(torch::kDouble);
    j["tiled_vs_untiled_relative_l2"] = ((got - reference).norm() / reference.norm()).item<double>();
    if (op != core::Op::kEncode) j["tiled_vs_untiled_psnr_db"] = psnr(got, reference);
  }
  for (const std::string& line : core::kernel_lines()) io::verbose_note("kernels (all runs)", line);
  if (o.json) {
    std::cout << core::json_text(j) << "\n";
    return;
  }
  std::cout << std::fixed << std::setprecision(3) << info.family << " " << o.op << " " << o.size << " x"
            << o.frames << " " << dtype_text(o, device) << " on " << j.value("gpu", device.str())
            << ", chunk " << plan.chunk << " latent frames"
            << (plan.tiles.tiled() ? ", " + std::to_string(plan.tiles.count()) + " tiles" : "") << "\n"
            << "  median " << median << " s over " << o.runs << " runs, " << std::setprecision(1)
            << o.frames / median << " frames/s\n"
            << "  model " << tflop << " TFLOP, achieved " << tflop / median << " TFLOP/s\n";
  if (j.contains("peak_allocated_gib"))
    std::cout << std::setprecision(2) << "  peak VRAM " << j["peak_allocated_gib"].get<double>()
              << " GiB allocated, " << j["peak_reserved_gib"].get<double>()
              << " GiB reserved; plan estimated " << j["estimate_gib"].get<double>() << " GiB\n";
  if (j.contains("tiled_vs_untiled_relative_l2")) {
    std::cout << std::scientific << std::setprecision(2) << "  tiled vs untiled: relative L2 "
              << j["tiled_vs_untiled_relative_l2"].get<double>();
    if (j.contains("tiled_vs_untiled_psnr_db"))
      std::cout << std::fixed << std::setprecision(1) << ", PSNR "
                << j["tiled_vs_untiled_psnr_db"].get<double>() << " dB";
    std::cout << "\n";
  }
  if (o.profile) {
    std::cout << "  stage                        ms    share   TFLOP  TFLOP/s\n";
    double total_ms = 0;
    for (const auto& s : stages) total_ms += s.ms;
    for (const auto& s : stages)
      std::cout << "  " << std::left << std::setw(24) << s.name << std::right << std::fixed
                << std::setprecision(1) << std::setw(9) << s.ms << std::setw(8)
                << 100 * s.ms / std::max(total_ms, 1e-9) << "%" << std::setw(8) << std::setprecision(2)
                << s.flops / 1e12 << std::setw(9) << std::setprecision(0)
                << (s.ms > 0 ? s.flops / 1e12 / (s.ms / 1e3) : 0.0) << "\n";
  }
  if (j.contains("relative_l2_vs_fp32")) {
    std::cout << std::scientific << std::setprecision(2) << "  vs fp32: relative L2 "
              << j["relative_l2_vs_fp32"].get<double>();
    if (j.contains("psnr_vs_fp32_db"))
      std::cout << std::fixed << std::setprecision(1) << ", PSNR " << j["psnr_vs_fp32_db"].get<double>()
                << " dB";
    std::cout << "\n";
  }
  if (j.contains("bf16_relative_l2_vs_fp32")) {
    std::cout << std::scientific << std::setprecision(2) << "  bf16 alone vs fp32: relative L2 "
              << j["bf16_relative_l2_vs_fp32"].get<double>();
    if (j.contains("bf16_psnr_vs_fp32_db"))
      std::cout << std::fixed << std::setprecision(1) << ", PSNR " << j["bf16_psnr_vs_fp32_db"].get<double>()
                << " dB";
    std::cout << "\n";
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd =
      app.add_subcommand("bench", "Time the VAE alone on a synthetic clip: seconds, frames/s, TFLOP/s, VRAM");
  cmd->add_option("--weights", o->weights, "Weights file (or --random)");
  cmd->add_flag("--random", o->random, "Random weights of the released architecture");
  cmd->add_option("--model", o->model,
                  "Model family: " + core::model_family_names() + " (default with --random: " +
                      core::default_model_family().name + "; with --weights: detected)");
  cmd->add_option("--size", o->size, "WIDTHxHEIGHT")->capture_default_str();
  cmd->add_option("--frames", o->frames, "Frames (1 + 4k)")
      ->check(CLI::Range(int64_t{1}, 4 * core::kMaxChunk + 1))
      ->capture_default_str();
  cmd->add_option("--op", o->op, "encode, decode or roundtrip")->capture_default_str();
  cmd->add_option("--device", o->device, "cpu, cuda or cuda:N (default: cuda when available)");
  cmd->add_option(
      "--devices", o->devices,
      "GPUs to time at once, one model each (all, 0,1 or cuda:0,cuda:2), against the first alone");
  cmd->add_flag(
      "--split", o->split,
      "With --devices: one clip split across them in bands (exact), against the first device alone");
  cmd->add_option("--dtype", o->dtype,
                  "fp32, bf16, fp16, or fp8 (bf16 with the norm-fed convolutions in e4m3: Wan on Hopper); "
                  "default: bf16 on CUDA, fp32 on the CPU")
      ->check(CLI::IsMember({"auto", "fp32", "bf16", "fp16", "fp8"}));
  cmd->add_option("--chunk", o->chunk, "Latent frames per chunk")
      ->check(CLI::Range(int64_t{1}, core::kMaxChunk))
      ->capture_default_str();
  cmd->add_option("--runs", o->runs, "Timed runs (the median is reported)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Untimed runs first")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  cmd->add_flag("--accuracy", o->accuracy, "Also run in fp32 and report the difference");
  CLI::Option* no_autotune = cmd->add_flag("!--no-autotune", o->autotune, "The same as --autotune off");
  cmd->add_option("--autotune", o->autotune_choice,
                  "on (default): let cuDNN time its convolution algorithms, off: take its heuristics' choice "
                  "(on the CPU: nothing to tune)")
      ->check(CLI::IsMember({"on", "off"}))
      ->excludes(no_autotune);
  cmd->add_option(
         "--conv", o->conv,
         "Convolution kernels: auto (own Hopper kernels wherever a tile fits, but where cuDNN measured "
         "faster), cudnn or own")
      ->check(CLI::IsMember({"auto", "cudnn", "own"}))
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->add_flag("-v,--verbose", o->verbose,
                "Print what the engine applied (device, dtype, layout, kernels, allocator) on stderr");
  cmd->add_option("--layout", o->layout, "Activation layout: auto, channels-last or contiguous")
      ->capture_default_str();
  cmd->add_flag("--profile", o->profile, "Time and FLOPs per model stage (first timed run)");
  cmd->add_flag("--compare-untiled", o->compare_untiled,
                "When the plan tiles, also run untiled (no budget) and report the difference");
  cmd->add_option(
      "--trace", o->trace,
      "Write a Chrome trace (Kineto) of one extra, untimed run to this file (the first run, cold, "
      "with --warmup 0)");
  add_memory_options(*cmd, o->memory, o->device, o->dtype, o->chunk);
  add_overwrite_options(*cmd, o->overwrite);
  cmd->callback([o] {
    if (!o->autotune_choice.empty()) o->autotune = o->autotune_choice == "on";
    check_preset_device(o->memory, o->device);
    check_overwrite({o->trace}, o->overwrite);  // Note [Existing outputs]
    bench(*o);
  });
}

}  // namespace vaecodec::app
