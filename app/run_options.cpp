#include "app/run_options.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <map>
#include <optional>

extern "C" {
#include <libavutil/parseutils.h>
}

#include "core/checkpoint.h"
#include "core/device/device.h"
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

AVRational parse_fps(const std::string& text) {
  AVRational q{0, 1};
  if (text.empty()) return q;
  if (av_parse_video_rate(&q, text.c_str()) < 0 || q.num <= 0 || q.den <= 0)
    throw Error("--fps " + text + " is not a frame rate (write 24, 29.97 or 30000/1001)");
  return q;
}

int64_t peak_host_rss_bytes() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace

void add_run_options(CLI::App& sub, RunOptions& options, RunCommand command) {
  const bool video_in = command != RunCommand::kDecode;
  const bool video_out = command != RunCommand::kEncode;
  sub.add_option("input", options.inputs,
                 video_in ? "input video (any format FFmpeg decodes); several, or folders, for a batch"
                          : "latent file; several, or folders, for a batch")
      ->required();
  sub.add_option("-o,--output", options.output,
                 std::string(video_out ? "output video (.mp4, .mkv, .mov, ...)"
                                       : "latent file (.safetensors or .latent)") +
                     "; for a batch, the folder to write into")
      ->required();
  sub.add_option(
      "--ext", options.extension,
      std::string("a batch's output extension (default ") + (video_out ? ".mp4" : ".safetensors") + ")");
  sub.add_option("-w,--weights", options.weights,
                 "VAE weights (.safetensors or .pth); default $VAECODEC_WEIGHTS");
  sub.add_option(
      "--model", options.model,
      "model family, when detection from the weights should be overridden: " + core::model_family_names());
  sub.add_option("--device", options.device, "cpu, cuda or cuda:N (default: cuda when available)");
  sub.add_option("--dtype", options.dtype, "fp32, bf16 or fp16 (default: bf16 on CUDA, fp32 on the CPU)")
      ->check(CLI::IsMember({"auto", "fp32", "bf16", "fp16"}));
  sub.add_option("--chunk", options.chunk,
                 "latent frames per chunk (memory vs speed; the result is the same)")
      ->check(CLI::PositiveNumber);
  if (video_out) {
    sub.add_option("--codec", options.codec, "video encoder, e.g. libx264 (default), libx265, ffv1");
    sub.add_option("--crf", options.crf, "quality for x264/x265/VP9/AV1 (lower is better; default 17)")
        ->check(CLI::Range(0, 63));
    sub.add_option("--encoder-preset", options.encoder_preset, "video encoder preset (x264/x265), e.g. slow");
    sub.add_option("--pix-fmt", options.pixel_format, "output pixel format (default: the input's)");
  }
  if (command == RunCommand::kDecode)
    sub.add_option("--fps", options.fps, "frame rate for latent files that do not record one, e.g. 16");
  if (command == RunCommand::kRoundtrip)
    sub.add_option("--metrics", options.metrics, "write per-frame PSNR/SSIM to a .json or .csv file");
  sub.add_flag("-q,--quiet", options.quiet, "no progress line");
  sub.add_flag("--json", options.json, "print a JSON summary on stdout");
  sub.add_flag("--strict", options.strict, "fail on damaged input instead of decoding what can be decoded");
  sub.add_option(
         "--autotune", options.autotune,
         "on: let cuDNN time its convolution algorithms (about 2 s at start-up; pays on long clips of "
         "some models), off: take its heuristics' choice")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  add_memory_options(sub, options.memory, options.device, options.dtype, options.chunk);
}

fs::path resolve_weights(const RunOptions& options) {
  if (!options.weights.empty()) return options.weights;
  if (const char* env = std::getenv("VAECODEC_WEIGHTS"); env && *env) return env;
  throw Error(
      "no VAE weights given: pass --weights FILE or set VAECODEC_WEIGHTS=FILE. For Wan2.1 use Wan2.1_VAE.pth "
      "from the Wan-AI/Wan2.1 model repositories on Hugging Face (e.g. Wan-AI/Wan2.1-T2V-1.3B) or ComfyUI's "
      "wan_2.1_vae.safetensors (Comfy-Org/Wan_2.1_ComfyUI_repackaged, split_files/vae)");
}

std::pair<int64_t, int64_t> parse_frame_size(const std::string& text) {
  long long width = 0, height = 0;
  char x = 0, extra = 0;
  if (std::sscanf(text.c_str(), "%lld%c%lld%c", &width, &x, &height, &extra) != 3 || x != 'x' || width <= 0 ||
      height <= 0)
    throw Error("--size: expected WIDTHxHEIGHT, got '" + text + "'");
  return {width, height};
}

torch::Device resolve_device(const std::string& device) {
  if (device == "auto") return torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::kCPU;
  torch::Device parsed(torch::kCPU);
  try {
    parsed = torch::Device(device);
  } catch (const c10::Error&) {
    throw Error("--device " + device + " is not a device (use cpu, cuda or cuda:N)");
  }
  if (parsed.is_cpu()) return parsed;
  if (!parsed.is_cuda()) throw Error("--device " + device + ": vaecodec runs on cpu or cuda");
  if (!torch::cuda::is_available()) throw Error("--device " + device + ": no CUDA device is available here");
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  if (parsed.has_index() && parsed.index() >= count)
    throw Error("--device " + device + ": there are only " + std::to_string(count) + " CUDA devices");
  return parsed.has_index() ? parsed : torch::Device(torch::kCUDA, 0);
}

torch::ScalarType resolve_dtype(const std::string& dtype, torch::Device device) {
  if (dtype == "fp32") return torch::kFloat;
  if (dtype == "bf16") return torch::kBFloat16;
  if (dtype == "fp16") return torch::kHalf;
  return device.is_cuda() ? torch::kBFloat16 : torch::kFloat;
}

std::shared_ptr<core::VaeModel> load_model(const RunOptions& options, LoadSeconds* seconds) {
  using Clock = std::chrono::steady_clock;
  const fs::path weights = resolve_weights(options);
  core::ModelOptions model;
  model.family = options.model;
  model.device = resolve_device(options.device);
  model.dtype = resolve_dtype(options.dtype, model.device);
  const Clock::time_point start = Clock::now();
  const core::Checkpoint checkpoint = core::load_checkpoint(weights);
  const Clock::time_point read = Clock::now();
  std::shared_ptr<core::VaeModel> built = core::build_model(checkpoint, model);
  if (seconds) {
    seconds->read = std::chrono::duration<double>(read - start).count();
    seconds->build = std::chrono::duration<double>(Clock::now() - read).count();
  }
  return built;
}

io::PipelineOptions pipeline_options(const RunOptions& options) {
  io::PipelineOptions p;
  p.autotune = options.autotune == "on";
  p.chunks.latent_frames = options.chunk;
  p.writer.codec = options.codec;
  p.writer.crf = options.crf;
  p.writer.preset = options.encoder_preset;
  if (!options.pixel_format.empty()) {
    p.writer.pixel_format = av_get_pix_fmt(options.pixel_format.c_str());
    if (p.writer.pixel_format == AV_PIX_FMT_NONE)
      throw Error("--pix-fmt " + options.pixel_format + " is not a pixel format FFmpeg knows");
  }
  p.strict = options.strict;
  p.memory = options.memory.planner;
  p.quiet = options.quiet || options.json;
  p.metrics = options.metrics;
  p.fps = parse_fps(options.fps);
  return p;
}

nlohmann::json summary_json(const io::RunSummary& s, const RunOptions& options, const core::VaeModel& model,
                            const LoadSeconds& load) {
  const torch::Device device = model.device();
  nlohmann::json j;
  j["command"] = s.command;
  j["input"] = s.input.string();
  j["output"] = s.output.string();
  j["frames"] = s.frames;
  j["width"] = s.width;
  j["height"] = s.height;
  j["seconds"] = s.seconds;
  j["fps"] = s.seconds > 0 ? static_cast<double>(s.frames) / s.seconds : 0.0;
  j["latent_shape"] = s.latent_shape;
  j["device"] = device.str();
  j["dtype"] = c10::toString(model.dtype());
  j["model"] = model.info().family;
  if (!s.codec.empty()) {
    j["codec"] = s.codec;
    j["pixel_format"] = s.pixel_format;
    j["audio_streams"] = s.audio_streams;
  }
  j["peak_device_bytes"] = core::Device::of(device).peak_allocated_bytes();
  j["peak_host_rss_bytes"] = peak_host_rss_bytes();
  if (s.plan) j["plan"] = s.plan->to_json();
  j["stage_seconds"] = s.stage_seconds;
  j["load_seconds"] = {{"read_weights", load.read}, {"build_model", load.build}};
  j["damaged"] = s.damage.any();
  if (s.damage.any() || s.damage.fixed_timestamps)
    j["damage"] = {{"bad_packets", s.damage.bad_packets},
                   {"damaged_frames", s.damage.damaged_frames},
                   {"read_error", s.damage.read_error},
                   {"fixed_timestamps", s.damage.fixed_timestamps},
                   {"first_error", s.damage.first_error}};
  if (s.quality) {
    auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
    j["quality"] = {{"psnr", number(s.quality->psnr)},         {"mean_psnr", number(s.quality->mean_psnr)},
                    {"min_psnr", number(s.quality->min_psnr)}, {"ssim", number(s.quality->ssim)},
                    {"min_ssim", number(s.quality->min_ssim)}, {"metrics_file", options.metrics}};
  }
  return j;
}

namespace {

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
