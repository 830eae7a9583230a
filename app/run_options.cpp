#include "app/run_options.h"

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <c10/cuda/CUDAGuard.h>

extern "C" {
#include <libavutil/parseutils.h>
}

#include "core/checkpoint.h"
#include "core/device/device.h"
#include "core/error.h"
#include "core/models/registry.h"
#include "core/planner.h"
#include "core/resolve_options.h"
#include "core/split/places.h"
#include "io/ffmpeg_common.h"

namespace vaecodec::app {
namespace fs = std::filesystem;

namespace {

AVRational parse_fps(const std::string& text) {
  AVRational q{0, 1};
  if (text.empty()) return q;
  if (av_parse_video_rate(&q, text.c_str()) < 0 || q.num <= 0 || q.den <= 0)
    throw UsageError("--fps " + text + " is not a frame rate (write 24, 29.97 or 30000/1001)");
  return q;
}

// --start / --duration in ffmpeg's syntax, as microseconds.
std::optional<int64_t> parse_time(const std::string& text, const char* option) {
  if (text.empty()) return std::nullopt;
  int64_t us = 0;
  if (av_parse_time(&us, text.c_str(), /*duration=*/1) < 0)
    throw UsageError(std::string(option) + " " + text +
                     " is not a time (write seconds as 2.5, or [HH:]MM:SS[.ms] as 1:02.5)");
  if (us < 0) throw UsageError(std::string(option) + " " + text + " is before the start of the input");
  return us;
}

io::SourceOptions source_options(const RunOptions& options) {
  io::SourceOptions source;
  source.filter_graph = options.filter_graph;
  source.start_us = parse_time(options.start, "--start");
  source.duration_us = parse_time(options.duration, "--duration");
  if (source.duration_us && *source.duration_us == 0)
    throw UsageError("--duration " + options.duration + " takes no frames; give a positive duration");
  if (options.frames == 0 || options.frames < -1)
    throw UsageError("--frames " + std::to_string(options.frames) +
                     ": the number of frames must be 1 or more");
  if (options.frames > 0) source.max_frames = options.frames;
  if (!source.filter_graph.empty()) io::check_filter_graph(source.filter_graph);
  return source;
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
                          : "latent file (.safetensors, .latent, .pt); several, or folders, for a batch")
      ->required();
  sub.add_option("-o,--output", options.output,
                 std::string(video_out ? "output video (.mp4, .mkv, .mov, ...)"
                                       : "latent file (.safetensors or .latent)") +
                     "; for a batch, the folder to write into")
      ->required();
  sub.add_option(
      "--ext", options.extension,
      std::string("a batch's output extension (default ") + (video_out ? ".mp4" : ".safetensors") + ")");
  sub.add_option(
      "-w,--weights", options.weights,
      "VAE weights (.safetensors or .pth, or a diffusers model folder); default $VAECODEC_WEIGHTS");
  sub.add_option(
      "--model", options.model,
      "model family, when detection from the weights should be overridden: " + core::model_family_names());
  sub.add_option("--device", options.device, "cpu, cuda or cuda:N (default: cuda when available)");
  sub.add_option("--devices", options.devices,
                 "GPUs to spread a batch over, one model and one input at a time each: all, 0,1 or "
                 "cuda:0,cuda:2 (default: --device's alone)");
  sub.add_option("--threads", options.threads,
                 "host threads of each input's video decoder and encoder, as ffmpeg's -threads (0: the "
                 "codecs' own choice; default: the codecs' own choice, the decoders' shared among --devices)")
      ->check(CLI::Range(0, 1024));
  sub.add_option("--dtype", options.dtype,
                 "fp32, bf16 or fp16 (default: bf16 on CUDA, fp32 on the CPU); fp8: bf16 with the "
                 "norm-fed convolutions in e4m3 (Wan on Hopper; faster, less exact)")
      ->check(CLI::IsMember({"auto", "fp32", "bf16", "fp16", "fp8"}));
  sub.add_option("--chunk", options.chunk,
                 "latent frames per chunk (memory vs speed; the result is the same)")
      ->check(CLI::Range(int64_t{1}, core::kMaxChunk));
  if (video_out) {
    sub.add_option("--codec", options.codec,
                   "video encoder, e.g. libx264 (default), libx265, ffv1, h264_nvenc; auto: a GPU encoder "
                   "(NVENC) where one works, else the default");
    sub.add_option("--crf", options.crf, "quality for x264/x265/VP9/AV1 (lower is better; default 17)")
        ->check(CLI::Range(0, 63));
    sub.add_option("--encoder-preset", options.encoder_preset, "video encoder preset (x264/x265), e.g. slow");
    sub.add_option("--encoder-options", options.encoder_options,
                   "the encoder's own options, key=value:key=value as ffmpeg takes them after -c:v, e.g. "
                   "rc-lookahead=10 or x264-params=sliced-threads=1");
    sub.add_option("--pix-fmt", options.pixel_format, "output pixel format (default: the input's)");
  }
  if (command == RunCommand::kDecode)
    sub.add_option("--fps", options.fps, "frame rate for latent files that do not record one, e.g. 16");
  if (command == RunCommand::kRoundtrip) {
    sub.add_option("--metrics", options.metrics, "write per-frame PSNR/SSIM to a .json or .csv file");
    sub.add_option("--side-by-side", options.side_by_side,
                   "also write input | reconstruction | difference x4 side by side to this video");
  }
  if (command == RunCommand::kEncode) {
    sub.add_option(
           "--format", options.format,
           "auto: by the output's extension (.safetensors, .latent); musubi: musubi-tuner's Wan latent "
           "cache, one file per clip in the output folder")
        ->check(CLI::IsMember({"auto", "musubi"}))
        ->capture_default_str();
    sub.add_option("--latent-dtype,--cache-dtype", options.latent_dtype,
                   "--format musubi, --dataset-config: the latents' dtype")
        ->check(CLI::IsMember({"bf16", "fp16", "fp32"}))
        ->capture_default_str();
  }
  if (video_in) {
    sub.add_option(
        "--vf", options.filter_graph,
        "FFmpeg filter graph applied to the decoded frames before the model, e.g. scale=832:480,fps=16");
    sub.add_option("--start", options.start,
                   "start at this time of the input (seconds or [HH:]MM:SS[.ms], as ffmpeg's -ss; also -ss)");
    sub.add_option("-t,--duration", options.duration,
                   "take this much of the input from the start (as ffmpeg's -t)");
    sub.add_option("--frames", options.frames,
                   "take at most N frames (counted after --vf, as ffmpeg's -frames:v)");
  }
  sub.add_flag("-q,--quiet", options.quiet, "no progress line");
  sub.add_flag(
      "-v,--verbose", options.verbose,
      "print what the engine applied (device, dtype, layout, kernels, allocator, plan) and errors' full "
      "text");
  sub.add_flag("--json", options.json, "print a JSON summary on stdout");
  sub.add_flag("--strict", options.strict, "fail on damaged input instead of decoding what can be decoded");
  sub.add_option(
         "--autotune", options.autotune,
         "on: let cuDNN time its convolution algorithms (about 2 s at start-up; pays on long clips of "
         "some models), off: take its heuristics' choice")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  sub.add_option(
         "--conv", options.conv,
         "convolution kernels: auto (own Hopper kernels wherever a tile fits, cuDNN where it measured "
         "faster), cudnn, or own (wherever one takes the shape)")
      ->check(CLI::IsMember({"auto", "cudnn", "own"}))
      ->capture_default_str();
  sub.add_option("--shard", options.shard,
                 "run part K of N of a batch (K/N: the inputs sorted by path, every N-th from K; auto: from "
                 "SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX)");
  sub.add_option("--shard-count", options.shard_count,
                 "the number of shards for --shard auto from JOB_COMPLETION_INDEX (a Kubernetes Indexed Job)")
      ->check(CLI::PositiveNumber);
  sub.add_flag("--skip-existing", options.skip_existing,
               "skip the inputs whose output exists (outputs appear complete or not at all)");
  sub.add_option("--manifest", options.manifest,
                 "append one JSON line per input (ok, failed or skipped) to this file; tasks may share it");
  add_memory_options(sub, options.memory, options.device, options.dtype, options.chunk);
  add_overwrite_options(sub, options.overwrite);
}

std::optional<fs::path> named_weights_file(const RunOptions& options) {
  if (!options.weights.empty()) return fs::path(options.weights);
  if (const char* env = std::getenv("VAECODEC_WEIGHTS"); env && *env) return fs::path(env);
  return std::nullopt;
}

fs::path resolve_weights(const RunOptions& options) {
  if (auto named = named_weights_file(options)) return *named;
  throw UsageError(
      "no VAE weights given: pass --weights FILE or set VAECODEC_WEIGHTS=FILE. For Wan2.1 use Wan2.1_VAE.pth "
      "from the Wan-AI/Wan2.1 model repositories on Hugging Face (e.g. Wan-AI/Wan2.1-T2V-1.3B) or ComfyUI's "
      "wan_2.1_vae.safetensors (Comfy-Org/Wan_2.1_ComfyUI_repackaged, split_files/vae)");
}

std::pair<int64_t, int64_t> parse_frame_size(const std::string& text) {
  long long width = 0, height = 0;
  char x = 0, extra = 0;
  if (std::sscanf(text.c_str(), "%lld%c%lld%c", &width, &x, &height, &extra) != 3 || x != 'x' || width <= 0 ||
      height <= 0)
    throw UsageError("--size: expected WIDTHxHEIGHT, got '" + text + "'");
  if (width > core::kMaxFrameSide || height > core::kMaxFrameSide)
    throw UsageError("--size " + text + ": each side may be at most " + std::to_string(core::kMaxFrameSide) +
                     " pixels");
  return {width, height};
}

torch::Device resolve_device(const std::string& device) {
  return core::resolve_device(device, core::OptionSpelling::cli());
}

torch::ScalarType resolve_dtype(const std::string& dtype, torch::Device device) {
  return core::resolve_dtype(dtype, device, core::OptionSpelling::cli());
}

core::RunChoices run_choices(const std::string& conv, const std::string& dtype, bool autotune) {
  core::RunChoices c;
  c.conv = *core::parse_conv_backend(conv);  // checked by the option's validator
  c.fp8 = dtype == "fp8";
  c.autotune = autotune;
  return c;
}

core::ModelOptions model_options(const RunOptions& options, torch::Device device) {
  core::ModelOptions model;
  model.family = options.model;
  model.device = device;
  model.dtype = resolve_dtype(options.dtype, device);
  model.choices = run_choices(options.conv, options.dtype, options.autotune == "on");
  return model;
}

std::shared_ptr<core::VaeModel> load_model(const RunOptions& options, LoadSeconds* seconds) {
  return load_models(options, {resolve_device(options.device)}, seconds).front();
}

std::vector<std::shared_ptr<core::VaeModel>> load_models(const RunOptions& options,
                                                         const std::vector<torch::Device>& devices,
                                                         LoadSeconds* seconds) {
  using Clock = std::chrono::steady_clock;
  const fs::path weights = resolve_weights(options);
  const Clock::time_point start = Clock::now();
  core::ContextWarmup contexts(devices);  // Note [Contexts while the weights load]
  const core::Checkpoint checkpoint = core::load_checkpoint(weights);
  const Clock::time_point read = Clock::now();
  contexts.wait();  // counted as building
  BuiltModels built = build_models(checkpoint, options, devices);
  for (const std::exception_ptr& error : built.errors)
    if (error) std::rethrow_exception(error);  // as a build on this thread would throw it
  if (seconds) {
    seconds->read = std::chrono::duration<double>(read - start).count();
    seconds->build = std::chrono::duration<double>(Clock::now() - read).count();
  }
  return built.models;
}

BuiltModels build_models(const core::Checkpoint& checkpoint, const RunOptions& options,
                         const std::vector<torch::Device>& devices) {
  BuiltModels built;
  built.models.resize(devices.size());
  built.errors.resize(devices.size());
  if (devices.size() == 1) {  // on this thread: a single model needs no other
    try {
      c10::cuda::OptionalCUDAGuard guard;  // the library's own state for the device made with it current
      if (devices[0].is_cuda()) guard.set_device(devices[0]);
      built.models[0] = core::build_model(checkpoint, model_options(options, devices[0]));
    } catch (...) {
      built.errors[0] = std::current_exception();
    }
    return built;
  }
  core::Places places(devices);  // Note [Places] in core/split/places.h
  built.errors = places.run_each([&](size_t slot) {
    built.models[slot] = core::build_model(checkpoint, model_options(options, devices[slot]));
  });
  return built;
}

io::PipelineOptions pipeline_options(const RunOptions& options) {
  io::PipelineOptions p;
  p.chunk = options.chunk;
  p.writer.codec = options.codec;
  p.writer.crf = options.crf;
  p.writer.preset = options.encoder_preset;
  p.writer.encoder_options = options.encoder_options;
  // -1: none given; a batch over devices then shares the host's cores among its decoders (host_threads).
  p.writer.threads = std::max(options.threads, 0);
  p.host_threads = std::max(options.threads, 0);
  if (!options.pixel_format.empty()) {
    p.writer.pixel_format = av_get_pix_fmt(options.pixel_format.c_str());
    if (p.writer.pixel_format == AV_PIX_FMT_NONE)
      throw UsageError("--pix-fmt " + options.pixel_format + " is not a pixel format FFmpeg knows");
  }
  p.strict = options.strict;
  p.memory = options.memory.planner;
  p.quiet = options.quiet || options.json;
  p.metrics = options.metrics;
  p.side_by_side = options.side_by_side;
  p.fps = parse_fps(options.fps);
  p.latent_scale = options.latent_scale;
  p.source = source_options(options);
  if (options.format == "musubi") {
    p.latent_format = io::PipelineOptions::LatentFormat::kMusubi;
    p.musubi_dtype = options.latent_dtype == "fp32"   ? torch::kFloat
                     : options.latent_dtype == "fp16" ? torch::kHalf
                                                      : torch::kBFloat16;
  }
  return p;
}

namespace {

// Every key of summary_json, in one list: a failed input's --json line carries them all, null.
constexpr const char* kSummaryKeys[] = {"command",
                                        "input",
                                        "output",
                                        "frames",
                                        "width",
                                        "height",
                                        "seconds",
                                        "started",
                                        "fps",
                                        "latent_shape",
                                        "device",
                                        "dtype",
                                        "fp8_convolutions",
                                        "model",
                                        "codec",
                                        "pixel_format",
                                        "audio_streams",
                                        "peak_device_bytes",
                                        "peak_host_rss_bytes",
                                        "plan",
                                        "replans",
                                        "stage_seconds",
                                        "load_seconds",
                                        "damaged",
                                        "damage",
                                        "quality"};

}  // namespace

nlohmann::json summary_template(const std::string& command) {
  nlohmann::json j = nlohmann::json::object();
  for (const char* key : kSummaryKeys) j[key] = nullptr;
  j["command"] = command;
  return j;
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
  j["started"] = s.started;  // seconds since the Unix epoch: runs of a batch can be laid out in time
  j["fps"] = s.seconds > 0 ? static_cast<double>(s.frames) / s.seconds : 0.0;
  j["latent_shape"] = s.latent_shape;
  j["device"] = device.str();
  j["dtype"] = dtype_name(model.dtype());
  j["fp8_convolutions"] = options.dtype == "fp8";  // Note [FP8 convolutions]
  j["model"] = model.info().family;
  for (const char* key : {"codec", "pixel_format", "audio_streams", "plan", "damage", "quality"})
    j[key] = nullptr;  // the same keys for every input (summary_template)
  if (!s.codec.empty()) {
    j["codec"] = s.codec;
    j["pixel_format"] = s.pixel_format;
    j["audio_streams"] = s.audio_streams;
  }
  j["peak_device_bytes"] = core::Device::of(device).peak_allocated_bytes();
  j["peak_host_rss_bytes"] = peak_host_rss_bytes();
  if (s.plan) j["plan"] = s.plan->to_json();
  j["replans"] = nlohmann::json::array();
  for (const auto& r : s.replans)
    j["replans"].push_back({{"reason", r.reason}, {"budget_bytes", r.budget_bytes}, {"margin", r.margin}});
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

}  // namespace vaecodec::app
