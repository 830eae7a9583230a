#include <chrono>
#include <exception>
#include <iomanip>
#include <iostream>
#include <latch>

#include <c10/cuda/CUDAGuard.h>
#include <torch/cuda.h>
#include <nlohmann/json.hpp>

#include "app/bench.h"
#include "app/devices.h"
#include "app/run_options.h"
#include "core/band_traffic.h"
#include "core/device/device.h"
#include "core/error.h"
#include "core/flops.h"
#include "core/json_text.h"
#include "core/models/registry.h"
#include "core/place.h"
#include "core/plan_for.h"
#include "core/split/places.h"

namespace vaecodec::app {
namespace {

// Note [Benchmark over devices]
// `bench --devices` measures what a batch over devices (Note [Batches over devices] in app/device_batch.h)
// can gain: the clip on the first device alone, then on every device at once, one model and one thread each
// (the batch's workers, Note [Places] in core/split/places.h), the threads meeting at a gate
// after their warm-up so that the timed runs overlap. It reports each device's median and peak memory, and
// the devices' frames per second summed against the first device's alone (a batch of equal clips on N devices
// can reach at most N times; shared PCIe, host memory and CPU threads are what keeps it lower).
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
    const BenchClip clip = make_bench_clip(o, *model, device, dtype);
    core::Device& where = core::Device::of(device);
    where.cap_memory(clip.planner.budget_bytes);
    for (int i = 0; i < o.warmup; ++i)
      run_op(*model, o.op, clip.video, clip.latents, clip.plan, clip.on_host);
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
      torch::Tensor out = run_op(*model, o.op, clip.video, clip.latents, clip.plan, clip.on_host);
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

}  // namespace

void bench_devices(const BenchOptions& o) {
  const std::vector<torch::Device> devices = bench_device_list(o, "--devices times the devices together");

  const DeviceTiming alone = time_on_device(o, devices.front(), nullptr);
  std::vector<DeviceTiming> together(devices.size());
  std::latch gate(static_cast<std::ptrdiff_t>(devices.size()));
  core::Places places(devices);
  core::rethrow_first(devices, places.run_each([&](size_t slot) {
    together[slot] = time_on_device(o, devices[slot], &gate);
  }));

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
// core/band_exchange.h) against the first device alone, in one call: the time, each device's peak memory and
// the bytes each device received from the others per run (halo rows, attention keys and values), and how far
// the split's output is from the first device's own run (rounding only: Note [Bands across devices]).
void bench_split(const BenchOptions& o) {
  const std::vector<torch::Device> devices = bench_device_list(o, "--split times the split run");
  if (devices.size() < 2) throw UsageError("--split needs two or more --devices");
  core::Device::use_plain_allocator_for_peers();  // for the one-device run too, so that both use the same
                                                  // allocator
  const DeviceTiming alone = time_on_device(o, devices.front(), nullptr);

  const auto dtype = resolve_dtype(o.dtype, devices.front());
  std::vector<std::shared_ptr<core::VaeModel>> models;
  std::vector<core::BandPlace> places;
  for (const torch::Device& d : devices) {
    models.push_back(make_model(o, d, dtype));
    places.push_back({models.back().get(), &core::Device::of(d)});
  }
  core::VaeModel& model = *models.front();
  const BenchClip clip = make_bench_clip(o, model, devices.front(), dtype);
  const auto [width, height] = parse_frame_size(o.size);
  const int64_t latent_frames = 1 + (o.frames - 1) / model.info().temporal_factor;
  const core::Plan plan = core::plan_for(
      model, {core::parse_op(o.op), width, height, latent_frames, static_cast<int64_t>(devices.size())},
      clip.planner);
  // Exact tiles shared out (or blended columns) where a band does not fit.
  const core::ChunkOptions chunks = core::ChunkOptions::of(plan, places);
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
  // The split's output against the first device's own run of the same model under the one-device plan
  // (`clip.plan`, as timed alone; the split's plan names bands, which one place cannot run), frame by frame
  // in float32 (the whole clip in float64 would not fit beside it at 4K): the split should change rounding
  // only. A failure here (the one-device run may not fit where the bands did) leaves the timing standing.
  std::optional<double> split_error;
  try {
    const torch::Tensor mine = run();
    const torch::Tensor reference = run_op(model, o.op, clip.video, clip.latents, clip.plan);
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

}  // namespace vaecodec::app
