#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/memory_options.h"
#include "app/overwrite.h"
#include "core/engine_report.h"
#include "core/models/registry.h"
#include "core/vae_model.h"
#include "io/pipeline.h"

namespace vaecodec::app {

// The commands that run a model over a video or latents.
enum class RunCommand { kRoundtrip, kEncode, kDecode };

// Everything `roundtrip`, `encode` and `decode` take on the command line, as CLI11 fills it. Turned into
// core and io option structs by the functions below; the commands themselves hold no parsing.
struct RunOptions {
  std::vector<std::string> inputs;  // one file, or several files and folders (Note [Batches])
  std::string output;               // the output file, or the folder of a batch
  std::string extension;            // a batch's output extension (--ext); empty: the command's default
  std::string weights;              // empty: $VAECODEC_WEIGHTS
  std::string model;            // --model: the family, overriding detection from the weights; empty: detected
  std::string device = "auto";  // "cpu", "cuda", "cuda:N"; auto: cuda when available
  std::string devices;          // --devices all|0,1|cuda:0,cuda:2 (Note [Several devices]); empty: one device
  // --threads: host threads of each input's decoder and encoder (io::PipelineOptions::host_threads and
  // WriterOptions::threads); -1: 0 on one device, the host's cores shared among --devices' decoders (Note
  // [Host threads of a batch over devices]).
  int threads = -1;
  std::string dtype = "auto";  // "fp32", "bf16", "fp16"; auto: bf16 on CUDA, fp32 on the CPU
  int64_t chunk = core::ChunkOptions{}.latent_frames;  // latent frames per chunk
  std::string codec;  // empty: libx264 for .mp4/.mkv/.mov, else the container's default
  int crf = 17;
  std::string encoder_options;  // --encoder-options "key=value:..." (io::WriterOptions::encoder_options)
  std::string encoder_preset;   // --encoder-preset (x264/x265 "slow", ...); empty: the encoder's default
  std::string pixel_format;     // empty: follow the input
  std::string fps;              // decode: "24" or "30000/1001", when the latent file has no frame rate
  std::string metrics;          // roundtrip: per-frame PSNR/SSIM (.json or .csv)
  // roundtrip, encode: the source's filter graph and cut (Note [Cutting the input] in io/video_reader.h).
  std::string filter_graph;  // --vf
  std::string start;         // --start / -ss, ffmpeg's time syntax ("2.5", "1:02.5"); empty: none
  std::string duration;      // --duration / -t; empty: none
  int64_t frames = -1;       // --frames; -1: all
  // encode: "auto" (the output's extension: .safetensors or .latent) or "musubi" (musubi-tuner's Wan cache in
  // the output folder, Note [musubi-tuner's latent cache] in io/musubi_cache.h), and the latter's dtype.
  std::string format = "auto";
  std::string latent_dtype = "bf16";
  // encode --dataset-config: musubi-tuner's dataset config, every cache it makes (Note [Dataset batches] in
  // app/dataset_batch.h); --dry-run lists them without running.
  std::string dataset_config;
  bool dry_run = false;
  std::string side_by_side;  // roundtrip --side-by-side: input | reconstruction | difference x4; empty: none
  bool quiet = false;
  bool verbose = false;  // --verbose: what the engine applied, full error texts (io/log.h)
  bool json = false;
  bool strict = false;
  std::string autotune = "off";  // --autotune on|off (Note [Autotuning] in core/run_choices.h)
  std::string conv = "auto";     // --conv auto|cudnn|own (Note [Own convolutions] in core/kernels/conv3d.h)
  // encode: write latents times the model's latent scale; decode: the input's are so scaled (--latent-scale,
  // Note [latent scale] in io/latent_file.h).
  bool latent_scale = false;
  // A job array's part of a batch and its record (Note [Shards] in app/shard.h).
  std::string shard;           // --shard K/N or auto; empty: the whole batch
  int64_t shard_count = 0;     // --shard-count N, with --shard auto from JOB_COMPLETION_INDEX
  bool skip_existing = false;  // --skip-existing
  std::string manifest;        // --manifest FILE.jsonl
  MemoryOptions memory;        // --preset, --preset-file, --vram, --tile (app/memory_options.h)
  OverwriteOptions overwrite;  // -y, -n (Note [Existing outputs] in app/overwrite.h)
};

// Adds the options of `command` to its subcommand.
void add_run_options(CLI::App& sub, RunOptions& options, RunCommand command);

// The weights file named by --weights, else by $VAECODEC_WEIGHTS; nullopt when neither names one.
std::optional<std::filesystem::path> named_weights_file(const RunOptions& options);
// The weights file: --weights, else $VAECODEC_WEIGHTS, else an error that says where real weights come from.
std::filesystem::path resolve_weights(const RunOptions& options);
// The CLI's device and dtype (core/resolve_options.h, its messages naming --device and --dtype).
torch::Device resolve_device(const std::string& device);
// "WIDTHxHEIGHT" (--size) as {width, height}; one clear error otherwise.
std::pair<int64_t, int64_t> parse_frame_size(const std::string& text);
// fp8 is bf16 with the norm-fed convolutions on e4m3 tiles (Note [FP8 convolutions] in
// core/kernels/conv3d.cpp).
torch::ScalarType resolve_dtype(const std::string& dtype, torch::Device device);
// The run choices of --conv, --dtype (fp8) and --autotune (Note [Run choices] in core/run_choices.h);
// place_model refuses those the family or the device cannot run.
core::RunChoices run_choices(const std::string& conv, const std::string& dtype, bool autotune);

// Where loading a model spends its time: reading the weights file, building the model on its device (for a
// GPU, that includes creating the CUDA context and uploading the weights).
struct LoadSeconds {
  double read = 0;
  double build = 0;
};

// The model options of a run on `device`: --model's family (empty: detected), --dtype (auto: by device).
core::ModelOptions model_options(const RunOptions& options, torch::Device device);

// Loads the weights and builds the model on the chosen device and dtype; `seconds`, when given, gets the
// time of each step.
std::shared_ptr<core::VaeModel> load_model(const RunOptions& options, LoadSeconds* seconds = nullptr);
// The same on each of `devices`, the weights read once (a clip split across devices: one model per device);
// the first failure thrown.
std::vector<std::shared_ptr<core::VaeModel>> load_models(const RunOptions& options,
                                                         const std::vector<torch::Device>& devices,
                                                         LoadSeconds* seconds = nullptr);

// Note [Models built at once]
// A batch over four GPUs that made each GPU's context as its model was built started its last GPU ~4 s after
// the first (1.1-1.4 s per model on H200s, docs/benchmarks.md "Four GPUs"). The contexts are made at once
// beforehand (Note [Contexts while the weights load] in core/device/device.h), and the models are built on a
// thread per GPU (core/split/places.h). Built one after the other, four took 3.8 s after their contexts;
// at once, 0.44-0.49 s. The parallel builds first failed on some GPUs with "CUDA driver error: operation not
// permitted": the allocator's first mapping, made by four threads at once (Note [The allocator's first
// mapping] in core/device/peers.cpp); one small allocation on the calling thread beforehand settles it, made
// wherever several places start (core::Places).

// The models of one checkpoint on each of `devices`, at once (Note [Models built at once]); by slot, with the
// exception of each one that failed (its model null).
struct BuiltModels {
  std::vector<std::shared_ptr<core::VaeModel>> models;
  std::vector<std::exception_ptr> errors;
};
BuiltModels build_models(const core::Checkpoint& checkpoint, const RunOptions& options,
                         const std::vector<torch::Device>& devices);

// The pipeline's options from the command line's.
io::PipelineOptions pipeline_options(const RunOptions& options);

// A dtype as the CLI's --dtype takes it (core/engine_report.h).
using core::dtype_name;
// Every key summary_json writes, null but `command`: the --json line of an input that failed or was skipped.
nlohmann::json summary_template(const std::string& command);
// The --json summary: the run, its speed and peak memory (device and host); the same keys for every run.
nlohmann::json summary_json(const io::RunSummary& summary, const RunOptions& options,
                            const core::VaeModel& model, const LoadSeconds& load);

}  // namespace vaecodec::app
