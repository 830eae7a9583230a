#include "app/batch.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <optional>

#include "core/error.h"
#include "io/interrupt.h"
#include "io/latent_file.h"
#include "io/output_file.h"

namespace vaecodec::app {
namespace fs = std::filesystem;

std::vector<fs::path> folder_inputs(const fs::path& folder, RunCommand command) {
  std::vector<fs::path> files;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
    const fs::path& path = entry.path();
    if (!entry.is_regular_file(error) || path.filename().string().starts_with(".")) continue;
    if (command == RunCommand::kDecode && !io::is_latent_input_path(path)) continue;
    files.push_back(path);
  }
  if (error) throw Error("cannot read input folder " + folder.string() + ": " + error.message());
  std::sort(files.begin(), files.end());
  return files;
}

const char* command_name(RunCommand command) {
  switch (command) {
    case RunCommand::kRoundtrip:
      return "roundtrip";
    case RunCommand::kEncode:
      return "encode";
    case RunCommand::kDecode:
      return "decode";
  }
  return "run";
}

StartedRun start_input(RunCommand command, core::VaeModel& model, const io::PipelineOptions& pipeline,
                       const BatchItem& item) {
  StartedRun started;
  switch (command) {
    case RunCommand::kRoundtrip:
      started.finishing.emplace(io::start_roundtrip(model, item.input, item.output, pipeline));
      break;
    case RunCommand::kEncode:
      started.done = item.musubi ? io::encode_musubi_job(model, *item.musubi, item.output, pipeline)
                                 : io::encode(model, item.input, item.output, pipeline);
      break;
    case RunCommand::kDecode:
      started.finishing.emplace(io::start_decode(model, item.input, item.output, pipeline));
      break;
  }
  return started;
}

StartedRun start_batch_input(RunCommand command, core::VaeModel& model, const io::PipelineOptions& pipeline,
                             const BatchItem& item) {
  try {
    return start_input(command, model, pipeline, item);
  } catch (const io::Interrupted&) {
    throw;
  } catch (const std::exception&) {
    StartedRun failed;
    failed.error = std::current_exception();
    return failed;
  }
}

// The weights file, when one is named already (the run fails later otherwise): no output may replace it.
std::vector<fs::path> named_weights(const RunOptions& options) {
  if (auto named = named_weights_file(options)) return {*named};
  return {};
}

Batch plan_batch(RunCommand command, const RunOptions& options, const Environment& env) {
  std::error_code error;
  std::optional<Shard> shard;
  if (!options.shard.empty()) shard = parse_shard(options.shard, options.shard_count, env);
  if (options.shard.empty() && options.shard_count != 0)
    throw UsageError(
        "--shard-count goes with --shard auto (a Kubernetes Indexed Job's JOB_COMPLETION_INDEX)");
  // Note [Standard input and output]: FFmpeg's pipe protocol would take `-`, but a run writes its output
  // under a temporary name and renames it once complete, and reads latents by mapping them.
  for (const std::string& input : options.inputs)
    if (input == "-")
      throw UsageError("input '-': vaecodec reads files, not standard input; name the file (or a folder)");
  if (options.output == "-")
    throw UsageError("-o -: vaecodec writes files (complete, by rename), not standard output; name a file");
  auto missing = [&](const std::string& input) {
    return fs::exists(input, error) ? std::string()
                                    : "cannot open input " + input + ": No such file or directory";
  };
  const fs::path output = options.output;
  const bool folder_named = !options.output.empty() && options.output.back() == '/';
  const bool musubi = command == RunCommand::kEncode && options.format == "musubi";
  const bool into_folder = musubi || options.inputs.size() > 1 || folder_named ||
                           fs::is_directory(output, error) ||
                           std::any_of(options.inputs.begin(), options.inputs.end(),
                                       [&](const std::string& in) { return fs::is_directory(in, error); });
  if (!into_folder) {
    if (!options.extension.empty())
      throw UsageError("--ext names a batch's output extension; give a folder as -o");
    if (shard)
      throw UsageError("--shard splits a batch: give several inputs or a folder, and a folder as -o");
    if (options.skip_existing && fs::exists(output, error))
      throw UsageError(
          "--skip-existing skips a batch's finished outputs, but " + output.string() +
          " is this run's only output and exists: remove it to run again, or drop --skip-existing "
          "to replace it");
    io::check_output_path(output, {options.inputs[0]});
    io::check_output_path(output, named_weights(options), "weights file");
    for (const std::string& extra : {options.metrics, options.side_by_side})
      if (!extra.empty()) {
        io::check_output_path(extra, {options.inputs[0], output});
        io::check_output_path(extra, named_weights(options), "weights file");
      }
    return {false, {{options.inputs[0], output, missing(options.inputs[0])}}, std::nullopt, 1};
  }
  if (fs::exists(output, error) && !fs::is_directory(output, error))
    throw UsageError("output " + output.string() + " is a file; a batch of inputs writes into a folder");
  if (!options.metrics.empty())
    throw UsageError("--metrics writes one file for one input; run a batch without it");
  if (!options.side_by_side.empty())
    throw UsageError("--side-by-side writes one video for one input; run a batch without it");
  if (musubi && !options.extension.empty())
    throw UsageError("--ext: --format musubi names its files as musubi-tuner does");
  std::string ext = options.extension;
  if (ext.empty()) ext = command == RunCommand::kEncode ? ".safetensors" : ".mp4";
  if (ext.front() != '.') ext = "." + ext;
  if (musubi) ext.clear();  // the output is the folder and the clip's stem (io::encode names the file)

  Batch batch{true, {}, shard, 0};
  std::vector<BatchItem>& items = batch.items;
  std::map<fs::path, fs::path> writer_of;  // output -> the input that writes it
  for (const std::string& input : options.inputs) {
    const std::vector<fs::path> files =
        fs::is_directory(input, error) ? folder_inputs(input, command) : std::vector<fs::path>{input};
    for (const fs::path& file : files) {
      fs::path target = output / file.stem();
      target += ext;
      const auto [it, inserted] = writer_of.emplace(target, file);
      if (!inserted)
        throw UsageError("inputs " + it->second.string() + " and " + file.string() + " would both write " +
                         target.string() + "; rename one or run them apart");
      items.push_back({file, target, missing(file.string())});
    }
  }
  if (items.empty())
    throw Error("no inputs: the folders given hold no files to " + std::string(command_name(command)));
  std::vector<fs::path> inputs;
  for (const BatchItem& item : items) inputs.push_back(item.input);
  for (const BatchItem& item : items) {
    io::check_output_path(item.output, inputs);
    io::check_output_path(item.output, named_weights(options), "weights file");
  }
  batch.all_items = items.size();
  if (shard) {  // Note [Shards]: every task sorts the same list
    std::stable_sort(items.begin(), items.end(),
                     [](const BatchItem& a, const BatchItem& b) { return a.input < b.input; });
    std::vector<BatchItem> mine;
    for (size_t i = static_cast<size_t>(shard->index); i < items.size();
         i += static_cast<size_t>(shard->count))
      mine.push_back(items[i]);
    items = std::move(mine);
  }
  return batch;
}

void run_inputs(RunCommand command, core::VaeModel& model, const std::vector<BatchItem>& items,
                const InputLoop& loop, std::vector<size_t>* unwritten) {
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  struct Finishing {
    size_t item;
    Clock::time_point start;
    io::FinishingRun run;
  };
  std::optional<Finishing> finishing;  // the previous input's writer, still draining
  std::optional<size_t> running;
  auto finish_previous = [&] {
    if (!finishing) return;
    try {
      loop.ok(finishing->item, finishing->run.finish());
    } catch (const io::Interrupted&) {
      throw;
    } catch (const std::exception&) {
      loop.failed(finishing->item, std::current_exception(), seconds_since(finishing->start));
    }
    finishing.reset();
  };
  try {
    while ((running = loop.take())) {
      const size_t i = *running;
      const Clock::time_point start = Clock::now();
      StartedRun started = start_batch_input(command, model, loop.pipeline(i), items[i]);
      finish_previous();
      if (started.error) {
        loop.failed(i, started.error, seconds_since(start));
      } else if (started.done) {
        loop.ok(i, std::move(*started.done));
      } else {
        finishing.emplace(Finishing{i, start, std::move(*started.finishing)});
      }
      running.reset();
    }
    if (finishing && loop.last_draining) loop.last_draining();
    finish_previous();
  } catch (const io::Interrupted&) {
    if (unwritten) {
      if (finishing) unwritten->push_back(finishing->item);
      if (running) unwritten->push_back(*running);
    }
    finishing.reset();  // its temporary output goes now, before the command exits
    throw;
  }
}

}  // namespace vaecodec::app
