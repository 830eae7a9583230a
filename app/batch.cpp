#include "app/batch.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <map>
#include <optional>

#include "core/error.h"
#include "core/models/registry.h"
#include "io/ffmpeg_common.h"
#include "io/interrupt.h"
#include "io/latent_file.h"
#include "io/output_file.h"

namespace vaecodec::app {
namespace fs = std::filesystem;

namespace {

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

// The files a folder contributes to a batch: regular files, not hidden, in name order; for decode only
// latents.
std::vector<fs::path> folder_inputs(const fs::path& folder, RunCommand command) {
  std::vector<fs::path> files;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
    const fs::path& path = entry.path();
    if (!entry.is_regular_file(error) || path.filename().string().starts_with(".")) continue;
    if (command == RunCommand::kDecode && !io::is_latent_path(path)) continue;
    files.push_back(path);
  }
  if (error) throw Error("cannot read input folder " + folder.string() + ": " + error.message());
  std::sort(files.begin(), files.end());
  return files;
}

// The one-line message of an error, as main() prints it.
std::string error_message(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  }
}

// The JSON line of a batch input that failed.
nlohmann::json failure_json(const BatchItem& item, const std::string& message) {
  return {{"input", item.input.string()}, {"output", item.output.string()}, {"error", message}};
}

// One input's run, started: encode runs to its end (`done`); roundtrip and decode return once the model's
// work is done (`finishing`), their writer still draining.
struct Started {
  std::optional<io::RunSummary> done;
  std::optional<io::FinishingRun> finishing;
};

Started start_one(RunCommand command, const RunOptions& options, core::VaeModel& model,
                  const io::PipelineOptions& pipeline, const BatchItem& item) {
  Started started;
  switch (command) {
    case RunCommand::kRoundtrip:
      started.finishing.emplace(io::start_roundtrip(model, item.input, item.output, pipeline));
      break;
    case RunCommand::kEncode:
      started.done = io::encode(model, item.input, item.output, pipeline);
      if (options.latent_scale) io::apply_latent_scale(item.output);
      break;
    case RunCommand::kDecode: {
      std::optional<io::ScaledLatentInput> scaled;
      if (options.latent_scale) scaled.emplace(item.input, model.info().latent_scale);
      const fs::path latents = scaled ? scaled->path() : item.input;
      started.finishing.emplace(io::start_decode(model, latents, item.output, pipeline));
      break;
    }
  }
  return started;
}

}  // namespace

Batch plan_batch(RunCommand command, const RunOptions& options) {
  std::error_code error;
  for (const std::string& input : options.inputs)
    if (!fs::exists(input, error)) throw Error("cannot open input " + input + ": No such file or directory");
  const fs::path output = options.output;
  const bool folder_named = !options.output.empty() && options.output.back() == '/';
  const bool into_folder = options.inputs.size() > 1 || folder_named || fs::is_directory(output, error) ||
                           std::any_of(options.inputs.begin(), options.inputs.end(),
                                       [&](const std::string& in) { return fs::is_directory(in, error); });
  if (!into_folder) {
    if (!options.extension.empty())
      throw Error("--ext names a batch's output extension; give a folder as -o");
    io::check_output_path(output, {options.inputs[0]});
    return {false, {{options.inputs[0], output}}};
  }
  if (fs::exists(output, error) && !fs::is_directory(output, error))
    throw Error("output " + output.string() + " is a file; a batch of inputs writes into a folder");
  if (!options.metrics.empty())
    throw Error("--metrics writes one file for one input; run a batch without it");
  std::string ext = options.extension;
  if (ext.empty()) ext = command == RunCommand::kEncode ? ".safetensors" : ".mp4";
  if (ext.front() != '.') ext = "." + ext;

  Batch batch{true, {}};
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
        throw Error("inputs " + it->second.string() + " and " + file.string() + " would both write " +
                    target.string() + "; rename one or run them apart");
      items.push_back({file, target});
    }
  }
  if (items.empty())
    throw Error("no inputs: the folders given hold no files to " + std::string(command_name(command)));
  return batch;
}

void run_command(RunCommand command, const RunOptions& options) {
  io::set_ffmpeg_log_level(AV_LOG_QUIET);
  io::InterruptHandler interrupts;
  const BatchItem* current = nullptr;
  try {
    const io::PipelineOptions pipeline = pipeline_options(options);
    // Cheap checks first: loading a released model takes seconds.
    const Batch plan = plan_batch(command, options);
    const std::vector<BatchItem>& items = plan.items;
    const bool batch = plan.into_folder;
    if (!options.model.empty()) core::find_model_family(options.model);  // throws, naming the known families
    LoadSeconds load;
    const std::shared_ptr<core::VaeModel> model = load_model(options, &load);
    if (batch) {  // made once the model loaded: a run that fails before leaves nothing behind
      std::error_code error;
      fs::create_directories(options.output, error);
      if (error) throw Error("cannot create output folder " + options.output + ": " + error.message());
    }
    // Each input's outcome, in input order: a clip's writer finishes while the next clip runs on the GPU.
    int failed = 0;
    auto report = [&](const BatchItem& item, const std::exception_ptr& error) {
      if (!batch) std::rethrow_exception(error);  // one input: main() reports it
      const std::string message = error_message(error);
      const bool named = message.find(item.input.string()) != std::string::npos;
      std::cerr << "vaecodec: error: " << (named ? "" : item.input.string() + ": ") << message << std::endl;
      if (options.json) std::cout << failure_json(item, message).dump() << std::endl;
      ++failed;
    };
    auto print = [&](const BatchItem& item, io::RunSummary summary) {
      summary.input = item.input;  // decode --latent-scale ran on a scaled copy
      if (options.json) std::cout << summary_json(summary, options, *model, load).dump() << std::endl;
    };
    const BatchItem* finishing_item = nullptr;
    std::optional<io::FinishingRun> finishing;
    auto finish_previous = [&] {
      if (!finishing) return;
      try {
        print(*finishing_item, finishing->finish());
      } catch (const io::Interrupted&) {
        throw;
      } catch (const std::exception&) {
        report(*finishing_item, std::current_exception());
      }
      finishing.reset();
    };
    for (const BatchItem& item : items) {
      current = &item;
      Started started;
      std::exception_ptr error;
      try {
        if (batch) io::check_output_path(item.output, {item.input});
        started = start_one(command, options, *model, pipeline, item);
      } catch (const io::Interrupted&) {
        throw;
      } catch (const std::exception&) {
        error = std::current_exception();
      }
      finish_previous();
      if (error) {
        report(item, error);
      } else if (started.done) {
        print(item, std::move(*started.done));
      } else {
        finishing_item = &item;
        finishing = std::move(started.finishing);
      }
    }
    finish_previous();
    if (failed > 0)
      throw Error(std::to_string(failed) + " of " + std::to_string(items.size()) +
                  " inputs failed; the others were written to " + options.output);
  } catch (const io::Interrupted&) {
    std::cerr << "vaecodec: " << command_name(command) << " interrupted; "
              << (current ? current->output.string() : options.output) << " was not written" << std::endl;
    std::exit(io::kInterruptedExitCode);
  }
}

}  // namespace vaecodec::app