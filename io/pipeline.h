#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/engine.h"
#include "core/planner.h"
#include "core/vae_model.h"
#include "io/latent_file.h"
#include "io/latent_sink.h"
#include "io/metrics.h"
#include "io/video_reader.h"
#include "io/video_writer.h"

namespace vaecodec::io {

// How the three runs below work. Defaults suit the CLI.
struct PipelineOptions {
  int64_t chunk = 1;  // latent frames per model call: memory and speed, not the result
  // Two or more: the clip is split across these bands' devices (Note [Bands across devices] in
  // core/band_exchange.h); the run's model must be the first band's. A plan is then made for the tallest band
  // on each device, untiled.
  std::vector<core::BandPlace> bands;
  // With a value the run is planned (core/planner.h): the plan's chunk and tiles replace `chunk`, the
  // allocator is capped at the budget, and the plan and the measured peak go to stderr unless quiet.
  std::optional<core::PlannerOptions> memory;
  // Where given, gets the request planned (io/run_plan.h's RunPlanOptions::planned).
  std::optional<core::PlanRequest>* planned = nullptr;
  WriterOptions writer;           // output codec, crf, pixel format
  bool strict = false;            // damaged input is an error, not a warning (Note [Damaged input])
  SourceOptions source;           // roundtrip, encode: --vf and the cut (Note [Cutting the input])
  bool quiet = false;             // no progress line
  std::filesystem::path metrics;  // roundtrip: per-frame PSNR/SSIM to .json or .csv; empty: none
  // roundtrip: input | reconstruction | difference x4 to this video (Note [Side by side] in io/stages.h);
  // empty: none.
  std::filesystem::path side_by_side;
  // decode: the frame rate when the latent file has no timing (a bare file); 0/1: none given.
  AVRational fps{0, 1};
  // encode: store latents times the model's latent scale; decode: the input's latents are stored so scaled
  // (Note [latent scale] in io/latent_file.h).
  bool latent_scale = false;
  // encode: the sink its latents go to (Note [Latent sinks] in io/latent_sink.h). kVaecodec: the output's
  // extension picks .safetensors or .latent (Note [latent files]); kMusubi: musubi-tuner's Wan cache, the
  // output naming the folder and the clip's stem (Note [musubi-tuner's latent cache]), its latents stored as
  // musubi_dtype.
  using LatentFormat = io::LatentFormat;
  LatentFormat latent_format = LatentFormat::kVaecodec;
  torch::ScalarType musubi_dtype = torch::kBFloat16;
  // Told the frames done so far in the run, from the thread that does them (the writer's for roundtrip and
  // decode, the model's for encode), quiet or not: a batch over devices draws one progress line for all.
  std::function<void(int64_t done)> frames_done;
  // The decoder's threads and those of the reading and writing threads' LibTorch operators (the encoder's are
  // writer.threads); 0: FFmpeg's and LibTorch's choice (Note [Host threads of a batch over devices]). Beside
  // a model on the CPU those operators run on one thread whatever this says (core/operator_threads.h).
  int host_threads = 0;
};

// Note [Host threads of a batch over devices]
// FFmpeg's decoders and encoders and LibTorch's host operations each size their thread pools for the whole
// host: x264 takes 1.5 threads per core, the H.264 decoder up to 16, and every thread that calls a LibTorch
// operation on the CPU gets a team of OpenMP threads as large as the host. A batch over four GPUs runs four
// readers and four writers at once, so a 64-core host had ~10 threads per core, and each clip's reading and
// writing took 2-7 times as long as with one GPU (read 0.13 -> 0.9 s, write 1.0 -> 2.25 s per 720p x81 clip,
// 4x H200, docs/benchmarks.md "Four GPUs"): the writer held the model up and the four GPUs did 3.3x the one
// GPU's work instead of 4x. So a batch over N devices gives each run the host's cores divided by N for its
// decoder and for the LibTorch work of its reading and writing threads (host_threads; read 0.31 s per clip
// then). Not for its encoder: x264's output depends on its thread count, and a batch writes the same bytes
// on any number of devices (tests/test_devices.cpp). --threads sets one count for all three, the encoder's
// too, as ffmpeg's -threads does.

// What a run did, for the summary line and --json.
struct RunSummary {
  std::string command;  // "roundtrip", "encode", "decode"
  std::filesystem::path input;
  std::filesystem::path output;
  int64_t frames = 0;  // frames read (encode, roundtrip) or written (decode)
  int64_t width = 0, height = 0;
  std::vector<int64_t> latent_shape;      // [B, C, T, h, w]
  double seconds = 0;                     // wall time of the run, opening to renaming
  double started = 0;                     // when it opened its input: seconds since the Unix epoch (UTC)
  std::string codec;                      // video encoder of the output (roundtrip, decode)
  std::string pixel_format;               // of the output video
  int audio_streams = 0;                  // copied into the output
  DecodeDamage damage;                    // what the input lost (roundtrip, encode)
  std::optional<QualitySummary> quality;  // with PipelineOptions::metrics
  std::optional<core::Plan> plan;         // with PipelineOptions::memory
  // The times the run ran out of device memory and started over with a new plan
  // (Note [Running out of memory] in core/device/memory_faults.h): why, and the budget of the new plan and
  // the share of it that plan keeps free.
  struct Replan {
    std::string reason;
    int64_t budget_bytes = 0;
    double margin = 0;
  };
  std::vector<Replan> replans;
  // Seconds by stage (Note [Pipeline]): "read" and "write" are the reader's and writer's threads at work,
  // "model_waits_for_*" the model's thread blocked on them, "write_tail" the writer finishing after the last
  // frame was handed to it (frames queued or held back by the encoder), "model" the rest of the run; the
  // stage the model waits on is the bottleneck.
  std::map<std::string, double> stage_seconds;
};

// A run whose every frame has been handed to its writer: the model is free for the next run while the writer
// (and its encoder's delayed frames) finishes the file. finish() waits for it, renames the output into place
// and returns the summary; a run dropped without finish() leaves no output (its temporary file is removed).
class FinishingRun {
 public:
  struct State;
  explicit FinishingRun(std::unique_ptr<State> state);
  FinishingRun(FinishingRun&&) noexcept;
  FinishingRun& operator=(FinishingRun&&) noexcept;
  ~FinishingRun();
  RunSummary finish();                                        // once
  void add_replans(std::vector<RunSummary::Replan> replans);  // what the run went through before it succeeded

 private:
  std::unique_ptr<State> state_;
};

// Decodes `input`, runs every frame through the model's encoder and decoder, and writes `output` with the
// input's size, frame count, timestamps, colour tags and audio (Note [Pipeline], Note [Padding]).
RunSummary roundtrip(core::VaeModel& model, const std::filesystem::path& input,
                     const std::filesystem::path& output, const PipelineOptions& options = {});
// The same, returning once the model's work is done (a batch starts the next input meanwhile).
FinishingRun start_roundtrip(core::VaeModel& model, const std::filesystem::path& input,
                             const std::filesystem::path& output, const PipelineOptions& options = {});

// Decodes `input` and writes its latents with everything decode() needs to rebuild the video (LatentMeta):
// .safetensors or ComfyUI's .latent, by extension; or, with LatentFormat::kMusubi, musubi-tuner's cache file
// output.parent_path() / musubi_file_name(...) (RunSummary::output names it): the sink options.latent_format
// picks (Note [Latent sinks] in io/latent_sink.h).
RunSummary encode(core::VaeModel& model, const std::filesystem::path& input,
                  const std::filesystem::path& output, const PipelineOptions& options = {});

// What encode() computes before it writes: the latents [1, C, F, h, w] on the CPU (normalized as the
// model gives them), the record of what was read, and the run's summary (no output).
struct EncodedVideo {
  torch::Tensor latents;
  LatentMeta meta;
  RunSummary summary;
};
// The same run as encode(), written nowhere and asking no sink (every frame kept, any size):
// musubi-tuner's dataset cache (io/musubi_item.h) puts a clip's latents and its control clip's into one file.
EncodedVideo encode_video(core::VaeModel& model, const std::filesystem::path& input,
                          const PipelineOptions& options = {});

// Decodes a latent file into a video with the size, frame count, timing and colour its record gives.
RunSummary decode(core::VaeModel& model, const std::filesystem::path& input,
                  const std::filesystem::path& output, const PipelineOptions& options = {});
FinishingRun start_decode(core::VaeModel& model, const std::filesystem::path& input,
                          const std::filesystem::path& output, const PipelineOptions& options = {});

// The normalization a model's latents carry, for .latent files (Note [latent files]).
LatentNormalization latent_normalization(const core::ModelInfo& info);

}  // namespace vaecodec::io
