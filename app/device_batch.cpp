#include "app/device_batch.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "app/devices.h"
#include "app/errors.h"
#include "core/device/device.h"
#include "core/error.h"
#include "core/models/registry.h"
#include "core/split/places.h"
#include "io/interrupt.h"
#include "io/log.h"
#include "io/output_file.h"
#include "io/progress.h"

namespace vaecodec::app {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
using Status = InputRecord::Status;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A device's worker: its model, built before the workers start.
struct Worker {
  size_t slot;  // in the list of devices given
  torch::Device device;
  std::shared_ptr<core::VaeModel> model;
  LoadSeconds load;
};

// What the workers share: the queue, the outcomes and the progress line. One mutex guards the queue, the
// counts and the record log (whose lines must not interleave); the progress line has its own.
class SharedBatch {
 public:
  SharedBatch(RunCommand command, const RunOptions& options, const std::vector<BatchItem>& items,
              std::vector<size_t> order, std::vector<io::InputLength> lengths, RecordLog& log)
      : command_(command_name(command)),
        options_(options),
        items_(items),
        order_(std::move(order)),
        lengths_(std::move(lengths)),
        done_(items.size(), 0),
        log_(log),
        progress_(std::string(command_name(command)) + " batch", total_frames(), progress_options(options)) {}

  const std::vector<BatchItem>& items() const { return items_; }
  const BatchItem& item(size_t i) const { return items_[i]; }

  // The next input for `device`; none when the queue is empty or the batch stopped. Throws Interrupted once
  // the flag is up (Note [Interrupts]).
  std::optional<size_t> take(const std::string& device, size_t worker) {
    io::throw_if_interrupted();
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_ || next_ == order_.size()) return std::nullopt;
    const size_t i = order_[next_++];
    result_.taken.push_back({items_[i].input, device, worker});
    // Note [A batch's progress line] in app/run_command.cpp: the input taken last, how far down the queue.
    progress_.set_label(command_ + " [" + std::to_string(next_) + "/" + std::to_string(order_.size()) + "] " +
                        items_[i].input.filename().string());
    return i;
  }

  // A run's progress: `done` frames of input `i` (from the run's own progress, Note [Batches over devices]).
  void frames(size_t i, int64_t done) {
    std::lock_guard<std::mutex> lock(mutex_);
    credit(i, done);
  }

  void ok(size_t i, io::RunSummary summary, const Worker& worker) {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string device = worker.device.str();
    log_.write({items_[i].input, items_[i].output, Status::kOk, summary.seconds, summary.frames, device, ""},
               options_.json ? summary_json(summary, options_, *worker.model, worker.load)
                             : nlohmann::json(nullptr));
    if (!options_.quiet && !options_.json) {
      char seconds[32];
      std::snprintf(seconds, sizeof(seconds), "%.1f", summary.seconds);
      progress_.message("vaecodec: " + items_[i].input.string() + " -> " + items_[i].output.string() + ": " +
                        std::to_string(summary.frames) + " frames in " + seconds + " s on " + device);
    }
    finished(i, worker, summary.frames, /*ok=*/true);
  }

  void failed(size_t i, const std::exception_ptr& error, double seconds, const Worker& worker) {
    const std::string message = error_line(error);
    const std::string device = worker.device.str();
    std::lock_guard<std::mutex> lock(mutex_);
    log_.write({items_[i].input, items_[i].output, Status::kFailed, seconds, 0, device, message});
    const bool named = message.find(items_[i].input.string()) != std::string::npos;
    progress_.message("vaecodec: error: " + (named ? "" : items_[i].input.string() + ": ") + message);
    ++result_.failed;
    finished(i, worker, 0, /*ok=*/false);
  }

  void interrupted(const std::vector<fs::path>& unwritten) {
    std::lock_guard<std::mutex> lock(mutex_);
    result_.interrupted = true;
    result_.unwritten.insert(result_.unwritten.end(), unwritten.begin(), unwritten.end());
  }

  // What stops the whole batch (a manifest that cannot be written): the other workers take nothing more.
  void stop(const std::exception_ptr& error) {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
    if (!fatal_) fatal_ = error;
  }

  void message(const std::string& line) { progress_.message(line); }

  // After the workers are joined.
  DeviceBatchResult finish(Clock::time_point start) {
    if (!result_.interrupted) progress_.finish();
    if (!options_.quiet && !options_.json) {
      std::string line;
      for (const auto& [slot, share] : shares_)
        line += (line.empty() ? "" : "; ") + share.device + " ran " + std::to_string(share.inputs) +
                " input" + (share.inputs == 1 ? "" : "s") + " (" + std::to_string(share.frames) + " frames" +
                (share.failed ? ", " + std::to_string(share.failed) + " failed" : "") + ")";
      char seconds[32];
      std::snprintf(seconds, sizeof(seconds), "%.1f", seconds_since(start));
      if (!line.empty()) progress_.message("vaecodec: " + line + ", " + seconds + " s in all");
    }
    if (fatal_) std::rethrow_exception(fatal_);
    return result_;
  }

 private:
  struct Share {
    std::string device;
    int inputs = 0;
    int failed = 0;
    int64_t frames = 0;
  };

  static io::ProgressOptions progress_options(const RunOptions& options) {
    io::ProgressOptions progress;
    progress.quiet = options.quiet || options.json;
    return progress;
  }

  // The batch's frames, when every input's length is known (else the line counts without a total).
  int64_t total_frames() const {
    int64_t total = 0;
    for (const io::InputLength& length : lengths_) {
      if (length.frames <= 0) return 0;
      total += length.frames;
    }
    return total;
  }

  // Moves input `i`'s count to `done` and the progress line with it; an input's count stops at its length
  // until it is finished.
  void credit(size_t i, int64_t done) {
    const int64_t length = lengths_[i].frames;
    if (length > 0) done = std::min(done, length);
    credited_ += done - done_[i];
    done_[i] = done;
    progress_.update(credited_);
  }

  void finished(size_t i, const Worker& worker, int64_t frames, bool ok) {
    credit(i, std::max(lengths_[i].frames, frames));
    Share& share = shares_[worker.slot];
    share.device = worker.device.str();
    share.failed += ok ? 0 : 1;
    ++share.inputs;
    share.frames += frames;
  }

  std::string command_;  // "roundtrip", "encode" or "decode"
  const RunOptions& options_;
  const std::vector<BatchItem>& items_;
  std::vector<size_t> order_;
  std::vector<io::InputLength> lengths_;
  std::vector<int64_t> done_;  // frames credited to each input
  RecordLog& log_;
  io::Progress progress_;
  std::mutex mutex_;
  size_t next_ = 0;  // into order_
  int64_t credited_ = 0;
  bool stopped_ = false;
  std::exception_ptr fatal_;
  std::map<size_t, Share> shares_;  // by worker
  DeviceBatchResult result_;
};

// One device's worker (Note [Batches over devices]): a one-device batch's loop (run_inputs) over the inputs
// it takes.
void run_worker(RunCommand command, const io::PipelineOptions& base, const Worker& worker,
                SharedBatch& shared) {
  const std::string device = worker.device.str();
  InputLoop loop;
  bool first = true;
  loop.take = [&] {
    if (std::exchange(first, false)) io::startup_note(device + " takes its first input");
    return shared.take(device, worker.slot);
  };
  loop.pipeline = [&](size_t i) {
    io::PipelineOptions pipeline = base;
    pipeline.frames_done = [&shared, i](int64_t done) { shared.frames(i, done); };
    return pipeline;
  };
  loop.ok = [&](size_t i, io::RunSummary summary) { shared.ok(i, std::move(summary), worker); };
  loop.failed = [&](size_t i, const std::exception_ptr& error, double seconds) {
    shared.failed(i, error, seconds, worker);
  };
  std::vector<size_t> unwritten;
  try {
    run_inputs(command, *worker.model, shared.items(), loop, &unwritten);
  } catch (const io::Interrupted&) {
    std::vector<fs::path> paths;
    for (const size_t i : unwritten) paths.push_back(shared.item(i).output);
    shared.interrupted(paths);
  } catch (const std::exception&) {
    shared.stop(std::current_exception());
  }
}

}  // namespace

int host_threads(int threads, size_t devices) {
  if (threads >= 0) return threads;  // --threads
  const unsigned cores = std::thread::hardware_concurrency();
  if (devices < 2 || cores == 0) return 0;
  return std::max(2, static_cast<int>(cores / devices));  // Note [Host threads of a batch over devices]
}

std::vector<size_t> longest_first(const std::vector<BatchItem>& items,
                                  const std::vector<io::InputLength>& lengths) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (lengths[a].frames != lengths[b].frames) return lengths[a].frames > lengths[b].frames;
    if (lengths[a].seconds != lengths[b].seconds) return lengths[a].seconds > lengths[b].seconds;
    return items[a].input < items[b].input;
  });
  return order;
}

std::vector<size_t> predict_split(const std::vector<size_t>& order,
                                  const std::vector<io::InputLength>& lengths, size_t devices) {
  std::vector<size_t> device_of(lengths.size(), 0);
  std::vector<int64_t> busy_until(std::max<size_t>(devices, 1), 0);
  for (const size_t i : order) {
    const size_t d =
        static_cast<size_t>(std::min_element(busy_until.begin(), busy_until.end()) - busy_until.begin());
    device_of[i] = d;
    busy_until[d] += std::max<int64_t>(lengths[i].frames, 1);  // an unknown length still takes a turn
  }
  return device_of;
}

DeviceBatchResult run_on_devices(RunCommand command, const RunOptions& options,
                                 const std::vector<BatchItem>& items,
                                 const std::vector<torch::Device>& devices, RecordLog& log) {
  const Clock::time_point start = Clock::now();
  io::startup_note("a batch of " + std::to_string(items.size()) + " inputs on " + device_list(devices));
  // The GPUs' contexts are made while the inputs are probed and the weights read (Note [Contexts while the
  // weights load] in core/device/device.h); the models are then built at once (Note [Models built at once]
  // in app/run_options.h).
  core::ContextWarmup contexts(devices);
  std::vector<io::InputLength> lengths;
  for (const BatchItem& item : items) lengths.push_back(io::probe_length(item.input));
  std::vector<size_t> order = longest_first(items, lengths);
  io::PipelineOptions pipeline = pipeline_options(options);
  pipeline.quiet = true;  // one progress line for the batch instead of one per run
  pipeline.host_threads = host_threads(options.threads, devices.size());
  io::startup_note("inputs probed");

  auto fail_all = [&](const std::string& message) {
    for (const BatchItem& item : items)
      log.write({item.input, item.output, Status::kFailed, 0, 0, "", message});
  };
  std::optional<core::Checkpoint> checkpoint;
  double read_seconds = 0;
  try {
    checkpoint = core::load_checkpoint(resolve_weights(options));
    read_seconds = seconds_since(start);
  } catch (const std::exception&) {
    fail_all(error_line(std::current_exception()));
    throw;
  }
  io::startup_note("weights read");
  contexts.wait();
  io::startup_note("contexts made");
  const Clock::time_point build_start = Clock::now();
  BuiltModels built = build_models(*checkpoint, options, devices);
  const double build_seconds = seconds_since(build_start);
  io::startup_note("models built");
  std::vector<Worker> workers;
  std::string first_error;
  for (size_t slot = 0; slot < devices.size(); ++slot) {
    if (built.models[slot]) {
      workers.push_back({slot, devices[slot], built.models[slot], {read_seconds, build_seconds}});
      continue;
    }
    const std::string message = error_line(built.errors[slot]);
    if (first_error.empty()) first_error = message;
    io::warn(devices[slot].str() + ": cannot build the model there (" + message +
             "); the other devices run its share");
  }
  checkpoint.reset();
  if (workers.empty()) {
    fail_all(first_error);
    throw Error("the model could not be built on any of the devices " + device_list(devices) + ": " +
                first_error);
  }
  std::error_code error;
  if (!options.output.empty()) fs::create_directories(options.output, error);  // a dataset's: by each item
  if (error) throw Error("cannot create output folder " + options.output + ": " + error.message());

  SharedBatch shared(command, options, items, std::move(order), lengths, log);
  if (!options.quiet && !options.json) {
    std::vector<torch::Device> used;
    for (const Worker& worker : workers) used.push_back(worker.device);
    shared.message("vaecodec: " + std::string(command_name(command)) + " of " + std::to_string(items.size()) +
                   " inputs on " + device_list(used) + ", longest first");
  }
  // A worker catches its own failures (Note [Batches over devices]): nothing comes back from the threads.
  std::vector<torch::Device> worker_devices;
  for (const Worker& worker : workers) worker_devices.push_back(worker.device);
  core::Places places(worker_devices);  // Note [Places] in core/split/places.h
  core::rethrow_first(worker_devices, places.run_each([&](size_t slot) {
    run_worker(command, pipeline, workers[slot], shared);
  }));
  io::startup_note("every worker is done");
  return shared.finish(start);
}

}  // namespace vaecodec::app
