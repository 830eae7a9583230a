// run_command's stages (Note [Stages of a run]): what every run of roundtrip, encode and decode goes through,
// whichever batch it is (app/batch.h, app/dataset_batch.h, app/device_batch.h).
#include "app/run_command.h"

#include <exception>
#include <iostream>
#include <mutex>
#include <optional>

#include "app/batch.h"
#include "app/dataset_batch.h"
#include "app/device_batch.h"
#include "app/devices.h"
#include "app/errors.h"
#include "app/overwrite.h"
#include "app/record.h"
#include "core/device/device.h"
#include "core/engine_report.h"
#include "core/error.h"
#include "core/kernel_log.h"
#include "core/models/registry.h"
#include "io/ffmpeg_common.h"
#include "io/interrupt.h"
#include "io/latent_file.h"
#include "io/log.h"
#include "io/musubi_cache.h"
#include "io/probe.h"
#include "io/progress.h"
#include "io/video_writer.h"

namespace vaecodec::app {
namespace fs = std::filesystem;

// Where a batch's outputs went, for its last line.
static std::string written_to(const RunOptions& options) {
  return options.dataset_config.empty() ? options.output : "the datasets' cache directories";
}

namespace {

using Status = InputRecord::Status;

// Note [Stages of a run]
// run_command goes through four stages, each a function below, and ends in one place: it returns, or throws
// for main() to report (Note [One-line errors]); an interrupt becomes RunInterrupted, whose line and exit
// status main() prints and returns (Note [Interrupts] in io/interrupt.h).
//   prepare   the cheap checks (devices, preset, weights, the runs of Note [Batches], writer options), before
//             any model is loaded; one input on one of --devices runs there as if --device named it
//   skip      inputs that cannot run (missing) fail alone, finished outputs (Note [Shards]) are skipped, and
//             what the run would replace is checked (Note [Existing outputs] in app/overwrite.h)
//   load      the model (one per device of a split), or a worker per device (Note [Batches over devices])
//   run       every input in turn, a clip's writer finishing while the next clip runs

// What `prepare` settles before any work.
struct Prepared {
  RunOptions options;  // --device set from --devices where one input runs on one device
  io::PipelineOptions pipeline;
  Batch plan;
  std::vector<torch::Device> devices;  // a batch over devices (Note [Several devices]); empty: one device
  std::vector<torch::Device> split;    // one input split across these in bands
  bool batch() const { return plan.into_folder; }
};

Prepared prepare(RunCommand command, const RunOptions& given) {
  Prepared p;
  p.options = given;
  RunOptions& options = p.options;
  // Cheap checks first: loading a released model takes seconds.
  if (!options.devices.empty()) {
    const int64_t cuda_count = visible_cuda_devices();
    p.devices = parse_devices(options.devices, cuda_count);
    check_device_agrees(options.device, p.devices, cuda_count);
  }
  check_preset_device(options.memory, options.device);
  resolve_weights(options);                                     // none given: a usage error, before any work
  if (options.devices.empty()) resolve_device(options.device);  // a device that is not here, likewise
  p.pipeline = pipeline_options(options);
  p.plan = options.dataset_config.empty() ? plan_batch(command, options) : plan_dataset_batch(options);
  if (!p.batch() && p.devices.size() == 1) {  // one input on the one device named: --device's run
    options.device = p.devices[0].str();
    options.devices.clear();
    p.devices.clear();
    check_preset_device(options.memory, options.device);
    resolve_device(options.device);
    p.pipeline = pipeline_options(options);
  }
  if (command != RunCommand::kEncode && !p.plan.items.empty())
    io::check_writer_options(p.plan.items.front().output, p.pipeline.writer);
  if (command == RunCommand::kDecode && !p.batch() && p.plan.items.front().error.empty())
    io::check_not_video(p.plan.items.front().input);  // a video given to decode by mistake
  // One input on several devices: the clip is split across them in bands (Note [Bands across devices] in
  // core/band_exchange.h), one model per device, the output on the first.
  if (!p.batch() && p.devices.size() > 1) {
    p.split = std::move(p.devices);
    p.devices.clear();
    core::Device::use_plain_allocator_for_peers();
  }
  if (!options.model.empty()) core::find_model_family(options.model);  // throws, naming the known families
  return p;
}

// The inputs left to run, and how many failed before running.
struct Pending {
  std::vector<BatchItem> items;
  int failed = 0;        // so far: before running, and while running
  size_t attempted = 0;  // the inputs run or failed before running
};

// One input file (a musubi cache writes it into a folder all the same): main() reports its error.
bool one_input(const RunOptions& options) {
  return options.inputs.size() == 1 && !fs::is_directory(options.inputs[0]);
}

// Finished outputs are found first, before a model is loaded for the rest (Note [Shards]); the outputs the
// run would replace are checked against --overwrite before the log records anything.
std::vector<std::optional<fs::path>> find_finished(RunCommand command, const Prepared& p) {
  const RunOptions& options = p.options;
  const bool musubi = command == RunCommand::kEncode && options.format == "musubi";
  std::vector<std::optional<fs::path>> finished(p.plan.items.size());
  std::vector<fs::path> outputs;  // what the run would replace (Note [Existing outputs] in app/overwrite.h)
  for (size_t i = 0; i < p.plan.items.size(); ++i) {
    const BatchItem& item = p.plan.items[i];
    if (!item.error.empty()) continue;
    std::error_code error;
    // A musubi cache file is named by what was read (Note [musubi-tuner's latent cache]): found by its
    // pattern.
    std::optional<fs::path> existing;
    if (fs::is_regular_file(item.output, error)) existing = item.output;
    if (musubi && !existing)
      existing = io::find_musubi_cache(item.output.parent_path(), item.output.filename().string());
    if (options.skip_existing && existing) {
      finished[i] = existing;
    } else {
      outputs.push_back(existing.value_or(item.output));
    }
  }
  if (!p.batch())
    for (const std::string& extra : {options.metrics, options.side_by_side})
      if (!extra.empty()) outputs.push_back(extra);
  check_overwrite(outputs, options.overwrite);
  return finished;
}

// Inputs that do not exist fail alone (Note [Batches]); finished outputs are reported as skipped.
Pending skip(const Prepared& p, const std::vector<std::optional<fs::path>>& finished, RecordLog& log) {
  Pending pending;
  for (size_t i = 0; i < p.plan.items.size(); ++i) {
    const BatchItem& item = p.plan.items[i];
    if (!item.error.empty()) {
      log.write({item.input, item.output, Status::kFailed, 0, 0, "", item.error});
      if (!p.batch() || one_input(p.options)) throw Error(item.error);
      std::cerr << "vaecodec: error: " << item.error << std::endl;
      ++pending.failed;
    } else if (finished[i]) {
      std::cerr << "vaecodec: skipped " << item.input.string() << ": " << finished[i]->string() << " exists"
                << std::endl;
      log.write({item.input, *finished[i], Status::kSkipped, 0, 0, "", ""});
    } else {
      pending.items.push_back(item);
    }
  }
  pending.attempted = pending.items.size() + static_cast<size_t>(pending.failed);
  return pending;
}

Error failed_error(const RunOptions& options, const Pending& pending, int count) {
  return Error(std::to_string(count) + " of " + std::to_string(pending.attempted) + " inputs failed" +
               (count == static_cast<int>(pending.attempted)
                    ? std::string()
                    : "; the others were written to " + written_to(options)));
}

// The batch on a worker per device (Note [Batches over devices] in app/device_batch.h).
void run_over_devices(RunCommand command, const Prepared& p, const Pending& pending, RecordLog& log) {
  const DeviceBatchResult result = run_on_devices(command, p.options, pending.items, p.devices, log);
  if (result.interrupted) {
    std::string unwritten;
    for (const fs::path& path : result.unwritten)
      unwritten += (unwritten.empty() ? "" : ", ") + path.string();
    throw RunInterrupted(
        std::string(command_name(command)) + " interrupted; " +
            (unwritten.empty()
                 ? std::string("every output started was written")
                 : unwritten + (result.unwritten.size() == 1 ? " was" : " were") + " not written"),
        io::interrupted_exit_code());
  }
  const int failed = static_cast<int>(result.failed) + pending.failed;
  if (failed > 0) throw failed_error(p.options, pending, failed);
}

// The model on --device, or one per device of a split (the first is the output's).
struct Loaded {
  LoadSeconds load;
  std::shared_ptr<core::VaeModel> model;
  std::vector<std::shared_ptr<core::VaeModel>> band_models;
};

Loaded load(const Prepared& p, const Pending& pending, RecordLog& log) {
  Loaded l;
  try {
    if (p.split.empty()) {
      l.model = load_model(p.options, &l.load);
    } else {
      l.band_models = load_models(p.options, p.split, &l.load);
      l.model = l.band_models.front();
    }
  } catch (const std::exception&) {  // no input can run: each gets its line, the error goes to main()
    const std::string message = error_line(std::current_exception());
    for (const BatchItem& item : pending.items)
      log.write({item.input, item.output, Status::kFailed, 0, 0, "", message});
    throw;
  }
  return l;
}

// Every input in turn on the loaded model (run_inputs, in input order); `current_output` is set to the input
// that was running when an interrupt came (what it leaves unwritten).
void run_here(RunCommand command, const Prepared& p, Pending& pending, const Loaded& loaded, RecordLog& log,
              fs::path& current_output) {
  const RunOptions& options = p.options;
  const std::vector<BatchItem>& items = pending.items;
  const core::VaeModel& model = *loaded.model;
  const bool batch = p.batch(), one = one_input(options);
  const std::string device = p.split.empty() ? model.device().str() : device_list(p.split);
  io::PipelineOptions run_pipeline = p.pipeline;
  for (const auto& m : loaded.band_models)
    run_pipeline.bands.push_back({m.get(), &core::Device::of(m->device())});
  if (options.verbose) {  // Note [What the engine applied]
    core::KernelLog::enable(true);
    for (const std::string& line : core::engine_setup_lines(model)) io::verbose_note("engine", line);
  }
  if (batch &&
      !options.output.empty()) {  // made once the model loaded: a run that fails before leaves nothing
    std::error_code error;
    fs::create_directories(options.output, error);
    if (error) throw Error("cannot create output folder " + options.output + ": " + error.message());
  }
  // Note [A batch's progress line]
  // A batch draws one progress line for all its inputs, as a batch over devices does: it names the input
  // being read and k/N, counts the frames of the whole batch (their lengths from the headers, io/probe.h),
  // and each input's outcome is a line of its own above it, naming the output. The runs' own lines (the
  // progress, the plan) would otherwise interleave, since a clip's writer finishes while the next one runs.
  const bool quiet = options.quiet || options.json;
  std::optional<io::Progress> batch_line;
  std::mutex credit_mutex;
  std::vector<int64_t> credited(items.size(), 0);
  int64_t credited_sum = 0;
  if (batch && !one) {
    int64_t total = 0;
    for (const BatchItem& item : items) total += io::probe_length(item.input).frames;
    io::ProgressOptions progress;
    progress.quiet = quiet;
    batch_line.emplace(command_name(command), total, progress);
  }
  auto say = [&](const std::string& line) {
    if (batch_line) {
      batch_line->message(line);
    } else {
      std::cerr << line << std::endl;
    }
  };
  auto position = [&](const BatchItem& item) {
    return "[" + std::to_string(&item - items.data() + 1) + "/" + std::to_string(items.size()) + "] ";
  };
  // Each input's outcome, in input order: a clip's writer finishes while the next clip runs on the GPU.
  auto report = [&](const BatchItem& item, const std::exception_ptr& error, double seconds) {
    const std::string message = error_line(error);
    log.write({item.input, item.output, Status::kFailed, seconds, 0, device, message});
    if (!batch || one) {  // one input: main() reports it (Note [One-line errors])
      if (!from_libtorch(error)) std::rethrow_exception(error);
      print_full_error(error);  // the one line below replaces it
      throw Error(item.input.string() + ": " + message);
    }
    print_full_error(error);
    const bool named = message.find(item.input.string()) != std::string::npos;
    say("vaecodec: error: " + (named ? "" : item.input.string() + ": ") + message);
    ++pending.failed;
  };
  auto print = [&](const BatchItem& item, io::RunSummary summary) {
    if (batch_line && !quiet) {
      char seconds[32];
      std::snprintf(seconds, sizeof(seconds), "%.1f", summary.seconds);
      say("vaecodec: " + position(item) + item.input.string() + " -> " + item.output.string() + ": " +
          std::to_string(summary.frames) + " frames in " + seconds + " s");
    }
    log.write({item.input, item.output, Status::kOk, summary.seconds, summary.frames, device, ""},
              options.json ? summary_json(summary, options, model, loaded.load) : nlohmann::json(nullptr));
  };
  InputLoop loop;
  size_t next = 0;
  loop.take = [&]() -> std::optional<size_t> {
    if (next == items.size()) return std::nullopt;
    if (batch_line)  // Note [A batch's progress line]
      batch_line->set_label(command_name(command) + std::string(" ") + position(items[next]) +
                            items[next].input.filename().string());
    return next++;
  };
  loop.pipeline = [&](size_t i) {
    io::PipelineOptions item_pipeline = run_pipeline;
    if (batch_line) {
      item_pipeline.quiet = true;
      item_pipeline.frames_done = [&, i](int64_t done) {
        std::lock_guard<std::mutex> lock(credit_mutex);
        credited_sum += done - credited[i];
        credited[i] = done;
        batch_line->update(credited_sum);
      };
    }
    return item_pipeline;
  };
  loop.ok = [&](size_t i, io::RunSummary summary) { print(items[i], std::move(summary)); };
  loop.failed = [&](size_t i, const std::exception_ptr& error, double seconds) {
    report(items[i], error, seconds);
  };
  // The GPU's part is over; while the last writer drains (x264's held-back frames), the allocator hands its
  // cached memory back, which the process's end would otherwise do after the output is complete
  // (Note [Quick exit] in app/main.cpp).
  loop.last_draining = [&] { core::Device::of(model.device()).release_cached(); };
  std::vector<size_t> unwritten;
  try {
    run_inputs(command, *loaded.model, items, loop, &unwritten);
  } catch (const io::Interrupted&) {
    if (!unwritten.empty()) current_output = items[unwritten.back()].output;  // the input running
    throw;
  }
  for (const std::string& line : core::kernel_lines()) io::verbose_note("kernels", line);
  if (batch_line) batch_line->finish();
  if (pending.failed > 0) throw failed_error(options, pending, pending.failed);
}

}  // namespace

void run_command(RunCommand command, const RunOptions& options) {
  // Note [Stages of a run]
  io::set_ffmpeg_log_level(AV_LOG_QUIET);
  io::InterruptHandler interrupts;
  io::set_verbose(options.verbose);
  fs::path current_output = options.output;  // what an interrupt leaves unwritten
  try {
    io::startup_note(std::string(command_name(command)) + " begins");
    const Prepared p = prepare(command, options);
    io::startup_note("inputs listed");
    if (p.plan.items.empty()) {  // a shard of an array with more tasks than inputs may hold none
      std::cerr << "vaecodec: shard " << p.plan.shard->text() << " holds none of the " << p.plan.all_items
                << " inputs; nothing to do" << std::endl;
      return;
    }
    const std::vector<std::optional<fs::path>> finished = find_finished(command, p);
    RecordLog log({options.json, options.manifest, command_name(command),
                   p.plan.shard ? p.plan.shard->text() : "", command_line(),
                   summary_template(command_name(command))});
    Pending pending = skip(p, finished, log);
    if (pending.items.empty()) {
      if (pending.failed > 0) throw failed_error(p.options, pending, pending.failed);
      return;
    }
    if (!p.devices.empty()) return run_over_devices(command, p, pending, log);
    const Loaded loaded = load(p, pending, log);
    io::startup_note("weights read, model built");
    run_here(command, p, pending, loaded, log, current_output);
  } catch (const io::Interrupted&) {
    throw RunInterrupted(
        std::string(command_name(command)) + " interrupted; " + current_output.string() + " was not written",
        io::interrupted_exit_code());
  }
}

}  // namespace vaecodec::app
