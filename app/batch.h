#pragma once

#include <cstddef>
#include <exception>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "app/run_options.h"
#include "app/shard.h"
#include "io/musubi_item.h"

namespace vaecodec::app {

// Note [Batches]
// A run takes one input file and writes one output file, or takes several inputs and writes into a folder:
// when there is more than one input, an input is a folder, the output is a folder (existing, or named with
// a trailing '/'), or the output is a musubi-tuner cache (encode --format musubi, always a folder). Folders
// contribute their files (not their subfolders; for decode only .safetensors and .latent files), in name
// order, and every input writes <output folder>/<its name without extension><ext>, with ext
// --ext or the command's default (.safetensors for encode, .mp4 otherwise). The model is loaded once and
// cuDNN's plans carry over, so a folder of short clips pays the start-up once instead of per clip, and a
// clip's writer finishes (x264's delayed frames, ~1.2 s at 720p) while the next clip runs on the GPU
// (io::FinishingRun; docs/benchmarks.md, "End to end"). Outcomes are reported in input order. A file that
// fails gets its one error line and the batch goes on; at the end a summary line says how many failed and the
// exit status is 1. Two inputs that would write the same output are refused before anything runs.
// With --shard a task runs its part of the inputs, and with --skip-existing the inputs whose output exists
// are reported as skipped before the model loads (none is loaded when nothing is left); Note [Shards] in
// app/shard.h.
struct BatchItem {
  std::filesystem::path input;
  std::filesystem::path output;
  std::string error;  // why the input cannot run at all (it does not exist): reported as failed, not run
  // A musubi-tuner dataset's cache file (Note [Dataset batches] in app/dataset_batch.h): what to read and
  // write; null for the other batches.
  std::shared_ptr<const io::MusubiJob> musubi = nullptr;
};
struct Batch {
  bool into_folder = false;      // a batch (Note [Batches]); false: one input, one output file
  std::vector<BatchItem> items;  // with --shard, this shard's: sorted by input, every N-th from K
  std::optional<Shard> shard;    // --shard (Note [Shards])
  size_t all_items = 0;          // the inputs of every shard together
};
// The runs `options` asks for (Note [Batches], Note [Shards]). An input that does not exist is an item with
// its `error`: a batch reports it as failed and goes on. Throws for what can be told before loading a model:
// an output folder that is a file, two inputs writing one output, folders holding nothing to run;
// UsageError for a --shard that cannot be, for `-` as input or output, and for --skip-existing on a single
// output that exists. `env` gives --shard auto its variables.
Batch plan_batch(RunCommand command, const RunOptions& options, const Environment& env = process_environment);

// One input's run on `model`, as a batch starts it (each device's worker too, app/device_batch.h): encode
// runs to its end (`done`); roundtrip and decode return once the model's work is done (`finishing`), their
// writer still draining.
struct StartedRun {
  std::optional<io::RunSummary> done;
  std::optional<io::FinishingRun> finishing;
  std::exception_ptr error;  // set by start_batch_input when the input failed to start or (encode) to run
};
StartedRun start_input(RunCommand command, core::VaeModel& model, const io::PipelineOptions& pipeline,
                       const BatchItem& item);
// start_input for one input of a batch: keeps a failure in `error` instead of throwing, so the batch goes on;
// an interrupt still throws. Its output was checked when the batch was planned (plan_batch,
// plan_dataset_batch: it replaces neither an input nor the weights).
StartedRun start_batch_input(RunCommand command, core::VaeModel& model, const io::PipelineOptions& pipeline,
                             const BatchItem& item);

// What run_inputs asks of its caller; inputs are indices into the caller's items.
struct InputLoop {
  std::function<std::optional<size_t>()> take;               // the next input to run; none: the loop ends
  std::function<io::PipelineOptions(size_t i)> pipeline;     // input i's pipeline options
  std::function<void(size_t i, io::RunSummary summary)> ok;  // input i is written
  std::function<void(size_t i, const std::exception_ptr& error, double seconds)> failed;
  std::function<void()> last_draining;  // optional: every input started, the last one's writer still draining
};

// One model's loop over the inputs of a batch, the same on one device and on each device of a batch over
// devices (app/device_batch.h): inputs taken one after another, each started (start_batch_input) while the
// previous one's writer finishes (Note [Batches]), and each outcome reported as it comes. An input's failure
// goes to `failed` and the loop goes on; what `ok` or `failed` throw ends it. An interrupt (io::Interrupted)
// is rethrown once the outputs being made have dropped their temporary files; `*unwritten` then holds their
// inputs: the one whose writer was finishing, then the one running.
void run_inputs(RunCommand command, core::VaeModel& model, const std::vector<BatchItem>& items,
                const InputLoop& loop, std::vector<size_t>* unwritten = nullptr);

// The files a folder contributes to a batch: regular files, not hidden, in name order; for decode only
// latents.
std::vector<std::filesystem::path> folder_inputs(const std::filesystem::path& folder, RunCommand command);

// "roundtrip", "encode" or "decode".
const char* command_name(RunCommand command);
// The weights file, when one is named already (the run fails later otherwise): no output may replace it.
std::vector<std::filesystem::path> named_weights(const RunOptions& options);

}  // namespace vaecodec::app
