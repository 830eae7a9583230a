#include "io/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "core/atomic_file.h"
#include "core/device/memory_faults.h"
#include "core/error.h"
#include "core/error_text.h"
#include "core/host_memory.h"
#include "core/models/registry.h"
#include "core/presets.h"
#include "core/sizes.h"
#include "io/chunking.h"
#include "io/interrupt.h"
#include "io/latent_record.h"
#include "io/latent_sink.h"
#include "io/log.h"
#include "io/output_file.h"
#include "io/progress.h"
#include "io/run_plan.h"
#include "io/stages.h"

namespace vaecodec::io {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kUnbounded = std::numeric_limits<size_t>::max();

// A moment of the steady clock as seconds since the Unix epoch (RunSummary::started).
double unix_seconds(Clock::time_point at) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return now - std::chrono::duration<double>(Clock::now() - at).count();
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// About one chunk of frames on each side of the model: enough to keep every stage busy.
size_t frame_queue_capacity(const core::ModelInfo& info, const core::ChunkOptions& chunks) {
  return static_cast<size_t>(1 + info.temporal_factor * std::max<int64_t>(chunks.latent_frames, 1));
}

// chunks with the engine's progress going to `progress` (ChunkOptions::progress).
core::ChunkOptions reporting(core::ChunkOptions chunks, Progress& progress) {
  chunks.progress = [&progress](int64_t frames) { progress.update(frames); };
  return chunks;
}

// A decode's chunks: the engine's progress going to `progress`, and tiles through time hand `sink` their
// window's frames as they become final (Note [A window's edges stream] in core/split/exact_tiles.h), so the
// writer runs beside the window's last tile.
core::ChunkOptions decoding(core::ChunkOptions chunks, Progress& progress, DecodedFrameSink& sink) {
  // The engine counts the frames it decoded, the padding's too (Note [Padding]); progress counts the clip's.
  chunks.progress = [&progress, &sink](int64_t frames) {
    progress.update(std::min(frames, sink.frames_timed()));
  };
  chunks.emit = [&sink](const torch::Tensor& frames) { sink.push(frames); };
  chunks.emit_8bit = sink.keeps_8_bits();  // Note [A window held in 8 bits] in core/split/eight_bit_window.h
  return chunks;
}

// Whether a round trip's frames carry their input frame: for the quality meter (metrics) or the side-by-side
// video. Such input frames stay RGB from the reader (Note [Colour conversion of the input on the GPU]).
bool wants_references(const PipelineOptions& options) {
  return !options.metrics.empty() || !options.side_by_side.empty();
}

ProgressOptions progress_options(const PipelineOptions& options) {
  ProgressOptions progress;
  progress.quiet = options.quiet;
  progress.listener = options.frames_done;
  return progress;
}

bool valid(AVRational q) {
  return q.num > 0 && q.den > 0;
}

// One warning line for what a damaged input lost (Note [Damaged input]), one for repaired timestamps.
void report_damage(const VideoReader& reader, int64_t frames) {
  const DecodeDamage& d = reader.damage();
  const std::string name = reader.path().string();
  if (d.any()) {
    std::string what;
    auto add = [&](const std::string& part) { what += (what.empty() ? "" : ", ") + part; };
    if (d.bad_packets) add(std::to_string(d.bad_packets) + " damaged or undecodable packets");
    if (d.damaged_frames) add(std::to_string(d.damaged_frames) + " frames with concealed errors");
    if (d.read_error) add("reading stopped early");
    std::string decoded = "; " + std::to_string(frames) + " frames decoded";
    if (d.expected_frames > frames)
      decoded += " of the " + std::to_string(d.expected_frames) + " the file lists";
    warn(name + " is damaged: " + what + decoded + " (" + d.first_error + ")");
  }
  if (d.fixed_timestamps)
    warn(name + ": " + std::to_string(d.fixed_timestamps) +
         " frames had a missing or non-increasing pts and were given the next free one");
}

// Note [Colour conversion on the GPU]
// Converting a decoded frame to the output's Y'CbCr (with the exact chroma subsampling of io/chroma.cpp)
// costs the CPU more per frame than the model costs the GPU, so on a GPU the conversion runs there, batched
// over the chunk right after the decoder, and the writer thread only copies planes into the encoder's frame.
// A CPU run converts the same way, in the model's thread and on its team of threads: on a writer thread of
// its own the conversion would take a core from the model's team, frame by frame (Note [Operator threads of
// a helper thread] in core/operator_threads.h). Quality metrics and the side-by-side video compare RGB and
// keep the RGB path.

// The threads of the reading and writing threads' LibTorch operators (Note [Operator threads of a helper
// thread]): one beside a model on the CPU, whose team has the cores; else a batch's share of the cores
// (host_threads), or LibTorch's choice (0).
int operator_threads(const core::VaeModel& model, const PipelineOptions& options) {
  return model.device().is_cuda() ? options.host_threads : 1;
}

// Whether a video written from frames of `source`'s format keeps 8 bits of each colour at most, as far as it
// is known before the writer is made (its encoder may take another format: the run goes by the writer's
// converter, DecodedFrameSink::keeps_8_bits); no where frames go to a quality meter or a side-by-side video.
bool eight_bit_output(const PipelineOptions& o, AVPixelFormat source) {
  if (wants_references(o)) return false;
  const AVPixelFormat format = o.writer.pixel_format != AV_PIX_FMT_NONE ? o.writer.pixel_format : source;
  const AVPixFmtDescriptor* d = av_pix_fmt_desc_get(format);
  return d && d->nb_components >= 3 && d->comp[0].depth <= 8;
}

// latent_frames: the clip's length where known (0 where not); output: the pixel format the output would
// copy (AV_PIX_FMT_NONE: no video is written); planes: the format of frames the reader hands on as their
// planes (ReaderOptions::yuv_planes; AV_PIX_FMT_NONE: none).
RunPlanOptions run_plan_options(const PipelineOptions& o, int64_t latent_frames = 0,
                                AVPixelFormat output = AV_PIX_FMT_NONE,
                                AVPixelFormat planes = AV_PIX_FMT_NONE) {
  return {o.memory,
          o.bands,
          o.chunk,
          o.quiet,
          latent_frames,
          o.writer.threads,
          o.host_threads,
          output != AV_PIX_FMT_NONE && eight_bit_output(o, output),
          planes != AV_PIX_FMT_NONE ? plane_bytes_per_pixel(planes) : 0.0,
          o.planned};
}

// The latent frames of a clip of `frames` frames (0: not known).
int64_t latent_frames_of(int64_t frames, int64_t temporal_factor) {
  return frames > 0 ? 1 + (padded_frame_count(frames, temporal_factor) - 1) / temporal_factor : 0;
}

// Puts the plan into the summary and reports the measured peak against it (io/run_plan.h).
void report_memory(core::VaeModel& model, const core::Plan& plan, const PipelineOptions& options,
                   RunSummary& summary) {
  if (options.memory) summary.plan = plan;
  report_memory(model, plan, run_plan_options(options));
}

// The run's time by stage (RunSummary::stage_seconds).
std::map<std::string, double> stage_seconds(const StageTimes* reader, const StageTimes* writer,
                                            double total) {
  std::map<std::string, double> t;
  double waited = 0;
  if (reader) {
    t["read"] = reader->busy;
    t["model_waits_for_read"] = reader->waited;
    waited += reader->waited;
  }
  if (writer) {
    t["write"] = writer->busy;
    t["write_waits_for_gpu"] = writer->for_gpu;
    t["model_waits_for_write"] = writer->waited;
    t["write_tail"] = writer->tail;
    waited += writer->waited + writer->tail;
  }
  t["model"] = total - waited;  // the model thread's own time: queueing GPU work, transfers, set-up
  return t;
}

}  // namespace

LatentNormalization latent_normalization(const core::ModelInfo& info) {
  LatentNormalization n;
  n.mean.assign(info.latent_mean.begin(), info.latent_mean.end());
  n.std.assign(info.latent_std.begin(), info.latent_std.end());
  return n;
}

// What a run keeps until its writer is done (FinishingRun). Members in the order they are made: the writer
// stage goes first when unwinding (its thread stops), the temporary file last (it is removed unless
// committed).
struct FinishingRun::State {
  State(core::VaeModel& model, const core::Plan& plan, const PipelineOptions& options,
        Clock::time_point start)
      : model(model), plan(plan), options(options), start(start) {}
  core::VaeModel& model;
  core::Plan plan;
  PipelineOptions options;
  Clock::time_point start;
  std::optional<StageTimes> reader_times;  // roundtrip: the reader's, final once it reached the end
  RunSummary summary;                      // all but what the writer decides
  std::optional<core::AtomicFile> temp;
  std::optional<VideoWriter> writer;
  std::optional<core::AtomicFile> side_temp;  // Note [Side by side] in io/stages.h
  std::optional<VideoWriter> side_writer;
  std::optional<QualityMeter> meter;
  bool references = false;  // frames carry their input frame (metrics, side by side)
  std::optional<Progress> progress;
  PacketQueue audio{kUnbounded};
  std::optional<WriterStage> writing;

  // Opens `output` (through a temporary file) and starts its writer thread. With `references` (roundtrip)
  // the frames carry their input frame, for the quality meter (options.metrics) and the side-by-side video
  // (options.side_by_side), made here when asked for.
  void open(const fs::path& output, const VideoFormat& format, const std::vector<AudioStream>& audio_streams,
            const char* label, int64_t frames, size_t capacity, bool with_references) {
    temp.emplace(output);
    writer.emplace(temp->path(), output, format, options.writer, audio_streams);
    references = with_references && wants_references(options);
    if (references && !options.metrics.empty()) meter.emplace();
    if (references && !options.side_by_side.empty()) {
      VideoFormat wide = format;
      wide.width *= 3;
      side_temp.emplace(options.side_by_side);
      side_writer.emplace(side_temp->path(), options.side_by_side, wide, options.writer);
    }
    progress.emplace(label, frames, progress_options(options));
    writing.emplace(*writer, capacity, audio_streams.empty() ? nullptr : &audio, meter ? &*meter : nullptr,
                    &*progress, operator_threads(model, options), side_writer ? &*side_writer : nullptr);
  }
  // Frames converted on the model's device for the writer (Note [Colour conversion on the GPU]); none when
  // the quality meter or the side-by-side video needs RGB.
  const TensorToFrame* converter() const { return references ? nullptr : writer->converter(); }
};

FinishingRun::FinishingRun(std::unique_ptr<State> state) : state_(std::move(state)) {}
FinishingRun::FinishingRun(FinishingRun&&) noexcept = default;
FinishingRun& FinishingRun::operator=(FinishingRun&&) noexcept = default;
FinishingRun::~FinishingRun() = default;

void FinishingRun::add_replans(std::vector<RunSummary::Replan> replans) {
  state_->summary.replans = std::move(replans);
}

RunSummary FinishingRun::finish() {
  State& s = *state_;
  s.writing->finish();
  if (s.meter) s.meter->write(s.options.metrics);
  s.temp->commit();
  if (s.side_temp) s.side_temp->commit();
  s.progress->finish();
  RunSummary summary = std::move(s.summary);
  summary.codec = s.writer->codec_name();
  summary.pixel_format = pixel_format_name(s.writer->pixel_format());
  summary.audio_streams = s.writer->audio_streams_copied();
  if (s.meter) summary.quality = s.meter->summary();
  report_memory(s.model, s.plan, s.options, summary);
  const double total = std::chrono::duration<double>(s.writing->finished_at() - s.start).count();
  summary.stage_seconds =
      stage_seconds(s.reader_times ? &*s.reader_times : nullptr, &s.writing->times(), total);
  summary.seconds = total;
  summary.started = unix_seconds(s.start);
  state_.reset();
  return summary;
}

RunSummary roundtrip(core::VaeModel& model, const fs::path& input, const fs::path& output,
                     const PipelineOptions& options) {
  return start_roundtrip(model, input, output, options).finish();
}

RunSummary decode(core::VaeModel& model, const fs::path& input, const fs::path& output,
                  const PipelineOptions& options) {
  return start_decode(model, input, output, options).finish();
}

static FinishingRun start_roundtrip_once(core::VaeModel& model, const fs::path& input, const fs::path& output,
                                         const PipelineOptions& options) {
  const Clock::time_point start = Clock::now();
  check_output_path(output, {input});
  if (!options.metrics.empty()) check_output_path(options.metrics, {input, output});
  if (!options.side_by_side.empty()) {
    check_output_path(options.side_by_side, {input, output});
    if (!options.metrics.empty()) check_output_path(options.side_by_side, {options.metrics});
    output_container(options.side_by_side);
  }
  output_container(output);
  torch::NoGradGuard no_grad;
  const core::ModelInfo& info = model.info();
  core::Device& device = core::Device::of(model.device());
  const bool planes = device.torch_device().is_cuda() && !wants_references(options);
  VideoReader reader(input, {device.wants_pinned(), options.strict, /*keep_audio=*/true, options.source,
                             /*yuv_planes=*/planes, options.host_threads});
  const VideoFormat& format = reader.format();
  const Geometry geometry = Geometry::of(info, format.width, format.height);
  const core::Plan memory_plan =
      plan_memory(model, core::Op::kRoundtrip, geometry,
                  run_plan_options(options, latent_frames_of(reader.frame_count_hint(), info.temporal_factor),
                                   format.pixel_format, planes ? format.pixel_format : AV_PIX_FMT_NONE));
  const core::ChunkOptions chunking = core::ChunkOptions::of(memory_plan, options.bands);

  auto state = std::make_unique<FinishingRun::State>(model, memory_plan, options, start);
  FinishingRun::State& w = *state;
  const size_t capacity = frame_queue_capacity(info, chunking);
  w.open(output, format, reader.audio_streams(), "roundtrip", reader.frame_count_hint(), capacity,
         /*with_references=*/true);
  DecodedFrameSink sink(geometry, device, *w.writing, w.converter());
  EncodeFeeder feeder(model, chunking, geometry, device);
  core::Run decoder(model, device, core::Op::kDecode, decoding(chunking, *w.progress, sink));
  int64_t latent_frames = 0;
  auto decode = [&](const torch::Tensor& latents) {
    if (!has_frames(latents)) return;
    latent_frames += latents.size(2);
    sink.push(decoder.push(latents));
  };
  // Declared last: its thread stops first when unwinding.
  ReaderStage reading(reader, capacity, &w.audio, operator_threads(model, options));

  while (std::optional<VideoFrame> frame = reading.next()) {
    throw_if_interrupted();
    sink.add_timing(frame->pts, frame->duration, w.references ? frame->rgb : torch::Tensor());
    decode(feeder.push(*frame));
  }
  decode(feeder.finish());
  sink.push(decoder.finish());
  if (sink.emitted() != feeder.frames())
    throw Error("roundtrip of " + input.string() + " produced " + std::to_string(sink.emitted()) +
                " frames for " + std::to_string(feeder.frames()));
  w.writing->close();
  report_damage(reader, feeder.frames());

  RunSummary& summary = w.summary;
  summary.command = "roundtrip";
  summary.input = input;
  summary.output = output;
  summary.frames = feeder.frames();
  summary.width = format.width;
  summary.height = format.height;
  summary.latent_shape = {1, info.latent_channels, latent_frames,
                          geometry.padded_height / info.spatial_factor,
                          geometry.padded_width / info.spatial_factor};
  summary.damage = reader.damage();
  w.reader_times = reading.times();
  return FinishingRun(std::move(state));
}

// Reads `input` through options.source and runs every frame through the encoder: the latents on the CPU and
// the record of what was read (Note [latent files]); nothing is written. With a sink, the frames are checked
// and cut as it asks (Note [Latent sinks] in io/latent_sink.h); without, every frame of any size is kept.
static EncodedVideo encode_video_once(core::VaeModel& model, const fs::path& input,
                                      const PipelineOptions& options, const LatentSink* sink = nullptr) {
  const Clock::time_point start = Clock::now();
  torch::NoGradGuard no_grad;
  const core::ModelInfo& info = model.info();
  core::Device& device = core::Device::of(model.device());
  const bool planes = device.torch_device().is_cuda();
  VideoReader reader(input, {device.wants_pinned(), options.strict, /*keep_audio=*/false, options.source,
                             /*yuv_planes=*/planes, options.host_threads});
  const VideoFormat format = reader.format();
  if (sink) sink->check_frames(format.width, format.height, input);
  const Geometry geometry = Geometry::of(info, format.width, format.height);
  const core::Plan memory_plan =
      plan_memory(model, core::Op::kEncode, geometry,
                  run_plan_options(options, latent_frames_of(reader.frame_count_hint(), info.temporal_factor),
                                   AV_PIX_FMT_NONE, planes ? format.pixel_format : AV_PIX_FMT_NONE));
  Progress progress("encode", reader.frame_count_hint(), progress_options(options));
  const core::ChunkOptions chunking = reporting(core::ChunkOptions::of(memory_plan, options.bands), progress);
  EncodeFeeder feeder(model, chunking, geometry, device);
  std::vector<core::HostTensor> chunks;
  std::vector<int64_t> pts;
  auto keep = [&](const torch::Tensor& latents) {
    if (has_frames(latents)) chunks.push_back(device.download(latents));
  };
  ReaderStage reading(reader, frame_queue_capacity(info, chunking), nullptr,
                      operator_threads(model, options));
  while (std::optional<VideoFrame> frame = reading.next()) {
    throw_if_interrupted();
    pts.push_back(frame->pts);
    keep(feeder.push(*frame));
  }
  keep(feeder.finish());
  std::vector<torch::Tensor> parts;
  for (const core::HostTensor& chunk : chunks) {
    chunk.wait();
    parts.push_back(chunk.tensor);
  }
  EncodedVideo v;
  v.latents = torch::cat(parts, /*dim=*/2);
  int64_t frames = feeder.frames();
  if (const int64_t kept = sink ? sink->frames_kept(frames, input) : frames; kept < frames) {
    // Note [Latent sinks]: the causal encoder's first latents are those of the frames kept.
    v.latents = v.latents.narrow(2, 0, 1 + (kept - 1) / info.temporal_factor);
    pts.resize(static_cast<size_t>(kept));
    frames = kept;
  }

  v.meta = latent_record(info, format, geometry, frames, std::move(pts), options.source, options.latent_scale,
                         !reader.audio_streams().empty(), input);
  progress.finish();
  report_damage(reader, feeder.frames());

  RunSummary& summary = v.summary;
  summary.command = "encode";
  summary.input = input;
  summary.frames = frames;
  summary.width = format.width;
  summary.height = format.height;
  summary.latent_shape = v.latents.sizes().vec();
  summary.damage = reader.damage();
  report_memory(model, memory_plan, options, summary);
  summary.stage_seconds = stage_seconds(&reading.times(), nullptr, seconds_since(start));
  summary.seconds = seconds_since(start);
  summary.started = unix_seconds(start);
  return v;
}

static RunSummary encode_once(core::VaeModel& model, const fs::path& input, const fs::path& output,
                              const PipelineOptions& options) {
  const Clock::time_point start = Clock::now();
  check_output_path(output, {input});
  const std::unique_ptr<LatentSink> sink =
      make_latent_sink(model.info(), output,
                       {options.latent_format, options.musubi_dtype, options.source.start_us,
                        latent_normalization(model.info())});
  EncodedVideo v = encode_video_once(model, input, options, sink.get());
  const fs::path written = sink->write(v.latents, v.meta);
  RunSummary summary = std::move(v.summary);
  summary.output = written;
  summary.seconds = seconds_since(start);
  summary.started = unix_seconds(start);
  return summary;
}

static FinishingRun start_decode_once(core::VaeModel& model, const fs::path& input, const fs::path& output,
                                      const PipelineOptions& options) {
  const Clock::time_point start = Clock::now();
  check_output_path(output, {input});
  output_container(output);
  torch::NoGradGuard no_grad;
  const core::ModelInfo& info = model.info();
  const LatentFile file =
      read_latents(input, latent_normalization(info),
                   options.latent_scale ? std::optional<double>(info.latent_scale) : std::nullopt);
  check_latents_match(file.meta, info.family, info.latent_channels, input.string());
  if (file.latents.size(1) != info.latent_channels)
    throw Error(input.string() + " holds " + std::to_string(file.latents.size(1)) + "-channel latents; the " +
                info.family + " model takes " + std::to_string(info.latent_channels));
  const DecodePlan plan = plan_decode(file, info, input, options.fps);
  const Geometry geometry = Geometry::of(info, plan.format.width, plan.format.height);
  const core::Plan memory_plan =
      plan_memory(model, core::Op::kDecode, geometry,
                  run_plan_options(options, file.latents.size(2), plan.format.pixel_format));
  const core::ChunkOptions chunking = core::ChunkOptions::of(memory_plan, options.bands);

  core::Device& device = core::Device::of(model.device());
  auto state = std::make_unique<FinishingRun::State>(model, memory_plan, options, start);
  FinishingRun::State& w = *state;
  w.open(output, plan.format, {}, "decode", plan.frames, frame_queue_capacity(info, chunking),
         /*measure=*/false);
  DecodedFrameSink sink(geometry, device, *w.writing, w.converter());
  for (int64_t i = 0; i < plan.frames; ++i) sink.add_timing(plan.pts[i], plan.durations[i]);
  core::Run decoder(model, device, core::Op::kDecode, decoding(chunking, *w.progress, sink));
  const int64_t step = std::max<int64_t>(chunking.latent_frames, 1);
  for (int64_t t = 0; t < file.latents.size(2); t += step) {
    throw_if_interrupted();
    const int64_t n = std::min<int64_t>(step, file.latents.size(2) - t);
    sink.push(decoder.push(device.upload(file.latents.narrow(2, t, n))));
  }
  sink.push(decoder.finish());
  if (sink.emitted() != plan.frames)
    throw Error("decoding " + input.string() + " produced " + std::to_string(sink.emitted()) +
                " frames for " + std::to_string(plan.frames));
  w.writing->close();

  RunSummary& summary = w.summary;
  summary.command = "decode";
  summary.input = input;
  summary.output = output;
  summary.frames = plan.frames;
  summary.width = plan.format.width;
  summary.height = plan.format.height;
  summary.latent_shape = file.latents.sizes().vec();
  return FinishingRun(std::move(state));
}

namespace {

constexpr int kMaxReplans = 2;
// Each new plan is made for this share of what the one before planned for (its margin grows): the plan
// that failed was too close to its budget, whatever took the rest.
constexpr double kReplanShare = 0.8;

void add_replans(RunSummary& summary, std::vector<RunSummary::Replan> replans) {
  summary.replans = std::move(replans);
}
void add_replans(EncodedVideo& video, std::vector<RunSummary::Replan> replans) {
  video.summary.replans = std::move(replans);
}
void add_replans(FinishingRun& run, std::vector<RunSummary::Replan> replans) {
  run.add_replans(std::move(replans));
}

// Runs `run(options)`; when the device runs out of memory part way through, plans again and runs the whole
// input again, at most kMaxReplans times (Note [Running out of memory] in core/device/memory_faults.h). The
// failed attempt's output was never renamed into place: its temporary file went with it.
template <typename Run>
auto with_replans(core::VaeModel& model, const fs::path& input, const PipelineOptions& options, Run&& run)
    -> decltype(run(options)) {
  PipelineOptions attempt = options;
  std::optional<core::PlanRequest> planned;  // the last attempt's request
  attempt.planned = &planned;
  std::vector<RunSummary::Replan> replans;
  while (true) {
    try {
      auto result = run(attempt);
      add_replans(result, std::move(replans));
      return result;
    } catch (const std::exception& e) {
      if (!core::is_out_of_memory(e) || !attempt.memory) throw;
      core::Device& device = core::Device::of(model.device());
      device.release_cached();
      const std::optional<int64_t> available = device.available_bytes();
      const std::string where = device.torch_device().str();
      if (!available || static_cast<int>(replans.size()) == kMaxReplans) {
        const int64_t free_now = available.value_or(device.memory_info().free);
        std::string needed;
        if (planned)
          needed = "; the smallest plan needs a budget of " +
                   core::format_size(core::smallest_budget(*planned, *attempt.memory));
        throw Error(input.string() + ": ran out of memory on " + where + " " +
                    std::to_string(replans.size() + 1) + " time" + (replans.empty() ? "" : "s") + " (" +
                    core::first_line(e.what()) + "); " + core::format_size(free_now) + " is free there now" +
                    needed + ": close what else uses the GPU, or run on another one");
      }
      core::PlannerOptions& memory = *attempt.memory;
      const int64_t given = options.memory->budget_bytes;  // the user's budget; 0: none
      const bool within_given = given > 0 && *available >= given;
      memory.budget_bytes = within_given ? given : *available;
      memory.budget_note =
          within_given ? options.memory->budget_note : "free on " + where + " after running out of memory";
      memory.budget_forced = true;
      memory.margin = 1.0 - (1.0 - memory.margin) * kReplanShare;
      replans.push_back({core::first_line(e.what()), memory.budget_bytes, memory.margin});
      const std::string kept =
          std::to_string(static_cast<int>(memory.margin * 100 + 0.5)) + "% of it kept free";
      warn(input.string() + ": out of memory (" + core::first_line(e.what()) + "); planning again for " +
           (within_given ? "the budget of " + core::format_size(given)
                         : "the " + core::format_size(*available) + " free on " + where) +
           " with " + kept + " and starting over");
    }
  }
}

}  // namespace

FinishingRun start_roundtrip(core::VaeModel& model, const fs::path& input, const fs::path& output,
                             const PipelineOptions& options) {
  return with_replans(model, input, options, [&](const PipelineOptions& o) {
    return start_roundtrip_once(model, input, output, o);
  });
}

EncodedVideo encode_video(core::VaeModel& model, const fs::path& input, const PipelineOptions& options) {
  return with_replans(model, input, options,
                      [&](const PipelineOptions& o) { return encode_video_once(model, input, o); });
}

RunSummary encode(core::VaeModel& model, const fs::path& input, const fs::path& output,
                  const PipelineOptions& options) {
  return with_replans(model, input, options,
                      [&](const PipelineOptions& o) { return encode_once(model, input, output, o); });
}

FinishingRun start_decode(core::VaeModel& model, const fs::path& input, const fs::path& output,
                          const PipelineOptions& options) {
  return with_replans(model, input, options,
                      [&](const PipelineOptions& o) { return start_decode_once(model, input, output, o); });
}

}  // namespace vaecodec::io
