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

#include "app/bench.h"
#include "app/commands.h"
#include "app/devices.h"
#include "app/memory_options.h"
#include "app/overwrite.h"
#include "app/run_options.h"
#include "core/device/device.h"
#include "core/engine.h"
#include "core/engine_report.h"
#include "core/error.h"
#include "core/flops.h"
#include "core/host_memory.h"
#include "core/json_text.h"
#include "core/kernel_log.h"
#include "core/models/registry.h"
#include "core/planner.h"
#include "core/stage_timer.h"
#include "core/vae_model.h"
#include "io/log.h"

namespace vaecodec::app {
namespace {

void bench(const BenchOptions& o) {
  if (o.split && o.devices.empty())
    throw UsageError("--split splits the clip across --devices; give --devices too");
  if (o.split && o.clip_on_host)
    throw UsageError("--clip-on-host times one device or --devices each with its own clip, not --split");
  if (o.split) return bench_split(o);
  if (!o.devices.empty()) return bench_devices(o);
  parse_frame_size(o.size);  // a malformed --size fails before the model is built
  if (o.op != "encode" && o.op != "decode" && o.op != "roundtrip")
    throw UsageError("--op: expected encode, decode or roundtrip, got '" + o.op + "'");
  if (o.weights.empty() && !o.random) throw UsageError("bench needs --weights FILE or --random");
  const auto device = resolve_device(o.device);
  const auto dtype = resolve_dtype(o.dtype, device);
  auto model = make_model(o, device, dtype);
  if (o.verbose) {  // Note [What the engine applied]
    io::set_verbose(true);
    core::KernelLog::enable(true);
    for (const std::string& line : core::engine_setup_lines(*model)) io::verbose_note("engine", line);
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
      run_op(*model, o.op, video, latents, plan, clip.on_host);
      synchronize(device);
    });
  };
  if (trace_cold) traced_run();
  for (int i = 0; i < o.warmup; ++i) run_op(*model, o.op, video, latents, plan, clip.on_host);
  synchronize(device);
  core::Device::of(device).reset_peak_statistics();
  // The host's peak of the timed runs alone: not the clip this process made first (on the CPU, for a GPU
  // clip too), which getrusage's peak keeps counting.
  const int64_t host_before_runs = core::host_rss_bytes();
  const bool host_peak_reset = core::reset_host_window_peak();
  core::FlopCounter::reset();
  std::vector<double> seconds;
  std::vector<core::StageTimer::Stage> stages;
  torch::Tensor out;
  for (int i = 0; i < o.runs; ++i) {
    core::FlopCounter::enable(i == 0);
    if (i == 0 && o.profile) core::StageTimer::start(device.is_cuda());
    out = torch::Tensor();  // the last run's result goes before the next one is made
    const auto start = std::chrono::steady_clock::now();
    try {
      out = run_op(*model, o.op, video, latents, plan, clip.on_host);
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
                      {"clip_on_host", clip.on_host},
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
    j["peak_host_rss_bytes"] = core::host_peak_bytes();  // the process's, since it started
    if (planner.budget_bytes > 0) j["within_budget"] = reserved <= planner.budget_bytes;
    j["gpu"] = gpu.name();
  }
  // The timed runs' host peak and what the process held as they began (Linux; absent elsewhere).
  if (host_peak_reset) {
    j["host_rss_before_runs_bytes"] = host_before_runs;
    j["peak_host_rss_runs_bytes"] = core::host_window_peak_bytes();
  }
  if (o.accuracy && dtype != torch::kFloat) {
    auto reference_model = make_model(o, device, torch::kFloat);
    const auto reference =
        run_op(*reference_model, o.op, video, latents, plan, clip.on_host).to(torch::kDouble);
    const auto got = out.to(reference.device(), torch::kDouble);  // an exact run may keep it in host memory
    j["relative_l2_vs_fp32"] = ((got - reference).norm() / reference.norm()).item<double>();
    if (o.op != "encode") j["psnr_vs_fp32_db"] = psnr(got, reference);
    if (o.dtype == "fp8") {
      // Beside it, the same model in bf16 alone: what e4m3 costs on top.
      core::RunChoices bf16_choices = model->choices();
      bf16_choices.fp8 = false;
      model->set_choices(bf16_choices);
      const auto bf16 = run_op(*model, o.op, video, latents, plan, clip.on_host).to(torch::kDouble);
      j["bf16_relative_l2_vs_fp32"] = ((bf16 - reference).norm() / reference.norm()).item<double>();
      if (o.op != "encode") j["bf16_psnr_vs_fp32_db"] = psnr(bf16, reference);
    }
  }
  if (o.compare_untiled && plan.tiles.tiled()) {
    // After the measurements: the untiled run may need more than the budget, so the cap is lifted.
    core::Device::of(device).cap_memory(std::numeric_limits<int64_t>::max());
    const auto reference =
        run_op(*model, o.op, video, latents, untiled(plan), clip.on_host).to(torch::kDouble);
    const auto got = out.to(reference.device(), torch::kDouble);  // an exact run may keep it in host memory
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
  cmd->add_option("--frames", o->frames, "Frames: 1 + 4k (LTX-2: 1 + 8k)")
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
  cmd->add_flag("--clip-on-host", o->clip_on_host,
                "Hold the clip and the result in host memory and stream them a chunk at a time, as a file "
                "run does (a budgeted row then plans as a file run; the copies are timed)");
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
