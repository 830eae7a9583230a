#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "app/bench.h"
#include "app/run_options.h"
#include "core/error.h"
#include "core/models/registry.h"
#include "core/plan_for.h"

namespace vaecodec::app {

std::string dtype_text(const BenchOptions& o, torch::Device device) {
  return o.dtype == "fp8" ? "fp8" : dtype_name(resolve_dtype(o.dtype, device));
}

std::optional<bool> channels_last_option(const std::string& layout) {
  if (layout == "auto") return std::nullopt;
  if (layout == "channels-last") return true;
  if (layout == "contiguous") return false;
  throw UsageError("--layout: expected auto, channels-last or contiguous, got '" + layout + "'");
}

void synchronize(const torch::Device& device) {
  core::Device::of(device).synchronize();
}

// Note [A clip in host memory]
// A file run holds neither its input nor its result on the device: the reader hands frames (or latents) over
// a few at a time and the writer takes what each push completes. Bench holds the whole clip, on the device by
// default (counted as resident: the plan leaves room for it), which at 4K is most of a small card - 3.75 GiB
// of bf16 frames for 81 frames - and leaves a budgeted row a far smaller device than a file run would have.
// --clip-on-host keeps the clip in pinned host memory instead and runs as a file run does: one chunk's
// frames pushed at a time (uploaded by the run), each push's output copied back to host memory, a round
// trip's latents handed from the encoder to the decoder on the device. Nothing is resident, so the plan is a
// file run's; the timings include the chunks' copies, as a file run's do. The pushes are the engine's chunks
// (the first one frame shorter), as a file's are: a window kept in host memory stores what comes in the
// pieces it came in, and a chunk that straddled two pieces would be joined again for every tile that reads
// it (Pieces::slice in core/split/exact_tiles.h) - the 4K encode rows of a first measurement, pushed in
// steps of tf * n from frame 0, ran 1.2-1.9x their plan's time, about a second more per tile.
namespace {

torch::Tensor run_streamed(core::VaeModel& model, const std::string& op, const torch::Tensor& input,
                           const core::ChunkOptions& chunks) {
  core::Device& device = core::Device::of(model.device());
  const bool encode = op != "decode";
  core::Run first(model, device, encode ? core::Op::kEncode : core::Op::kDecode, chunks);
  std::optional<core::Run> second;
  if (op == "roundtrip") second.emplace(model, device, core::Op::kDecode, chunks);
  std::vector<torch::Tensor> out;
  auto keep = [&](const torch::Tensor& y) {
    if (y.defined() && y.size(2) > 0) out.push_back(y.to(torch::kCPU));
  };
  auto pass = [&](const torch::Tensor& y) {
    if (!second) return keep(y);
    if (y.defined() && y.size(2) > 0) keep(second->push(y));
  };
  const int64_t tf = model.info().temporal_factor, n = std::max<int64_t>(chunks.latent_frames, 1);
  for (int64_t t = 0, step = 0; t < input.size(2); t += step) {
    step = encode ? core::encode_chunk_frames(tf, n, /*first=*/t == 0) : n;  // the engine's chunks
    pass(first.push(input.narrow(2, t, std::min(step, input.size(2) - t))));
  }
  pass(first.finish());
  if (second) keep(second->finish());
  return out.empty() ? torch::Tensor() : torch::cat(out, 2);
}

}  // namespace

// One operation over the whole clip, in the plan's chunks and tiles, as the tool runs it.
torch::Tensor run_op(core::VaeModel& model, const std::string& op, const torch::Tensor& video,
                     const torch::Tensor& latents, const core::ChunkOptions& chunks, bool streamed) {
  if (streamed) return run_streamed(model, op, op == "decode" ? latents : video, chunks);
  if (op == "encode") return core::encode_video(model, video, chunks);
  if (op == "decode") return core::decode_latents(model, latents, chunks);
  return core::decode_latents(model, core::encode_video(model, video, chunks), chunks);
}

torch::Tensor run_op(core::VaeModel& model, const std::string& op, const torch::Tensor& video,
                     const torch::Tensor& latents, const core::Plan& plan, bool streamed) {
  return run_op(model, op, video, latents, core::ChunkOptions::of(plan), streamed);
}

// The middle of the timed runs (the upper one of an even count).
double median_of(std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

// The same run untiled, for the tiles' accuracy.
core::Plan untiled(core::Plan plan) {
  // Blended tiles with offloaded caches may chunk many latent frames at a time (SeedVR2 1080p at 16G: 5),
  // which untiled would not fit even an 80 GB GPU: one latent frame instead (chunks do not change the result,
  // Note [Chunks]). Exact plans keep their chunk, so that the comparison sees the tiles alone, bit for bit.
  if (!plan.tiles.exact) plan.chunk = 1;
  plan.tiles = core::TileGrid::whole(plan.tiles.latent_height, plan.tiles.latent_width);
  plan.split = core::SplitKind::kWhole;
  plan.offload = false;
  plan.window = 0;
  plan.window_store = core::WindowStore::kDevice;
  return plan;
}

int64_t bytes_of(const torch::Tensor& t) {
  return static_cast<int64_t>(t.numel() * t.element_size());
}

double psnr(const torch::Tensor& got, const torch::Tensor& reference) {
  const double mse = (got.clamp(-1, 1) - reference.clamp(-1, 1)).div(2).pow(2).mean().item<double>();
  return 10 * std::log10(1.0 / std::max(mse, 1e-20));
}

std::shared_ptr<core::VaeModel> make_model(const BenchOptions& o, torch::Device device,
                                           torch::ScalarType dtype) {
  // --model names the family of --random; with --weights it overrides detection when given.
  const core::ModelOptions options{o.model,
                                   device,
                                   dtype,
                                   nullptr,
                                   channels_last_option(o.layout),
                                   run_choices(o.conv, o.dtype, o.autotune && device.is_cuda())};
  std::shared_ptr<core::VaeModel> model;
  if (!o.weights.empty()) {
    model = core::build_model(core::load_checkpoint(o.weights), options);
  } else {
    const auto& family = o.model.empty() ? core::default_model_family() : core::find_model_family(o.model);
    model = family.build(family.released_config);
    core::randomize_parameters(*model, /*seed=*/0);
    core::place_model(*model, options);
  }
  return model;
}

BenchClip make_bench_clip(const BenchOptions& o, const core::VaeModel& model, torch::Device device,
                          torch::ScalarType dtype) {
  const auto [width, height] = parse_frame_size(o.size);
  const auto& info = model.info();
  const int64_t f = info.spatial_factor, tf = info.temporal_factor;
  if (width % f || height % f) throw UsageError("--size must be a multiple of " + std::to_string(f));
  if ((o.frames - 1) % tf) throw UsageError("--frames must be 1 + " + std::to_string(tf) + "k");

  // Bench holds the whole clip and the whole result on the device (a file run holds neither: frames come from
  // the reader and go to the writer): the plan leaves room for them. Only the op's input is made: decode runs
  // had kept random frames on the device too, uncounted, and peaked that much above their estimates. With
  // --clip-on-host both stay in host memory and nothing is resident (Note [A clip in host memory]). The plan
  // comes first: a refusal makes no clip.
  const core::Op op = core::parse_op(o.op);
  const std::vector<int64_t> latent_shape{1, info.latent_channels, 1 + (o.frames - 1) / tf, height / f,
                                          width / f};
  const int64_t element = static_cast<int64_t>(c10::elementSize(dtype));
  const int64_t latents = c10::multiply_integers(latent_shape), frames = 3 * o.frames * width * height;
  BenchClip clip;
  clip.on_host = o.clip_on_host;
  if (!clip.on_host)
    clip.resident = op == core::Op::kDecode   ? latents * 4 + frames * element  // float32 latents, the frames
                    : op == core::Op::kEncode ? (frames + latents) * element
                                              : (2 * frames + latents) * element;  // and the frames again
  clip.planner = o.memory.planner;
  clip.planner.reserved_bytes = clip.resident;
  clip.planner.reserved_note = "bench's clip; --clip-on-host holds it in host memory, as a file run does";
  clip.plan = core::plan_for(model, {op, width, height, latent_shape[2]}, clip.planner);
  auto place = [&](const torch::Tensor& t) {
    if (!clip.on_host) return t.to(device);
    return device.is_cpu() ? t : t.pin_memory();
  };
  torch::manual_seed(1);
  if (op == core::Op::kDecode) {
    clip.latents = place(torch::randn(latent_shape));
  } else {
    // Smooth random content in [-1, 1] (never zeros: they would flatter the timings), in the model's dtype as
    // a file run converts frames once on the device.
    auto coarse = torch::rand({1, 3, o.frames, height / f, width / f}) * 2 - 1;
    clip.video = place(
        torch::nn::functional::interpolate(coarse, torch::nn::functional::InterpolateFuncOptions()
                                                       .size(std::vector<int64_t>{o.frames, height, width})
                                                       .mode(torch::kTrilinear)
                                                       .align_corners(false))
            .add_(torch::randn({1, 3, o.frames, height, width}) * 0.05)
            .clamp_(-1, 1)
            .to(dtype));
  }
  return clip;
}

}  // namespace vaecodec::app
