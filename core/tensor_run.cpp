#include "core/tensor_run.h"

#include <string>
#include <vector>

#include "core/engine.h"
#include "core/error.h"

namespace vaecodec::core {
namespace {

// The frame size the model sees for `input`, in pixels: {width, height}.
std::pair<int64_t, int64_t> frame_size(const VaeModel& model, Op op, const torch::Tensor& input) {
  const int64_t scale = op == Op::kDecode ? model.info().spatial_factor : 1;
  return {input.size(4) * scale, input.size(3) * scale};
}

// Bytes of one clip's result: float32 latents (the models' encode returns them so), frames in the model's
// dtype.
int64_t result_bytes(const VaeModel& model, Op op, const torch::Tensor& input) {
  const ModelInfo& info = model.info();
  if (op == Op::kEncode) {
    const int64_t t = 1 + (input.size(2) - 1) / info.temporal_factor;
    return info.latent_channels * t * (input.size(3) / info.spatial_factor) *
           (input.size(4) / info.spatial_factor) * static_cast<int64_t>(sizeof(float));
  }
  const int64_t frames = 1 + (input.size(2) - 1) * info.temporal_factor;
  return 3 * frames * input.size(3) * info.spatial_factor * input.size(4) * info.spatial_factor *
         static_cast<int64_t>(c10::elementSize(model.dtype()));
}

}  // namespace

void check_tensor_input(const VaeModel& model, Op op, const torch::Tensor& input) {
  const ModelInfo& info = model.info();
  const int64_t f = info.spatial_factor, tf = info.temporal_factor;
  if (op == Op::kEncode) {
    if (input.dim() != 5 || input.size(1) != 3)
      throw UsageError("encode expects frames shaped [B, 3, T, H, W], got " + std::to_string(input.dim()) +
                       "-D" +
                       (input.dim() > 1 ? " with " + std::to_string(input.size(1)) + " channels" : ""));
    if (input.size(3) % f || input.size(4) % f || input.size(3) == 0 || input.size(4) == 0)
      throw UsageError("frame size " + std::to_string(input.size(4)) + "x" + std::to_string(input.size(3)) +
                       " is not a positive multiple of " + std::to_string(f));
    if (input.size(2) == 0) throw UsageError("nothing to encode: no frames");
    if ((input.size(2) - 1) % tf)
      throw UsageError("encode needs 1 + " + std::to_string(tf) + "k frames, got " +
                       std::to_string(input.size(2)));
  } else if (op == Op::kDecode) {
    if (input.dim() != 5 || input.size(1) != info.latent_channels)
      throw UsageError("decode expects latents shaped [B, " + std::to_string(info.latent_channels) +
                       ", T, h, w], got " + std::to_string(input.dim()) + "-D with " +
                       std::to_string(input.dim() > 1 ? input.size(1) : 0) + " channels");
    if (input.size(3) == 0 || input.size(4) == 0)
      throw UsageError("decode expects latents of a positive size");
    if (input.size(2) == 0) throw UsageError("nothing to decode: no latent frames");
  } else {
    throw UsageError("a run on a whole tensor encodes or decodes; " + op_name(op) + " is two runs");
  }
  if (input.size(0) == 0) throw UsageError(op_name(op) + " of an empty batch");
}

Plan plan_tensor_run(const VaeModel& model, Op op, const torch::Tensor& input, PlannerOptions planner) {
  check_tensor_input(model, op, input);
  const auto [width, height] = frame_size(model, op, input);
  // The results held on the device while the run goes on: the clips done, and the one being joined twice.
  if (model.device().is_cuda())
    planner.reserved_bytes += (input.size(0) + 1) * result_bytes(model, op, input);
  planner = settle_budget(model, planner);
  const int64_t tf = model.info().temporal_factor;
  const int64_t latent_frames = op == Op::kEncode ? 1 + (input.size(2) - 1) / tf : input.size(2);
  return plan_for(model, {op, width, height, latent_frames}, planner);
}

torch::Tensor run_tensor(VaeModel& model, Op op, const torch::Tensor& input, const Plan& plan) {
  check_tensor_input(model, op, input);
  torch::NoGradGuard no_grad;
  const ChunkOptions chunks = ChunkOptions::of(plan);
  std::vector<torch::Tensor> clips;
  for (int64_t b = 0; b < input.size(0); ++b) {
    const torch::Tensor clip = input.narrow(0, b, 1);
    torch::Tensor out =
        op == Op::kEncode ? encode_video(model, clip, chunks) : decode_latents(model, clip, chunks);
    // A window kept in host memory (Note [Tiles through time] in core/split/exact_tiles.h) comes back to the
    // model's device, where the caller's results are (their room is reserved in the plan).
    if (out.device() != model.device()) out = out.to(model.device());
    clips.push_back(out);
  }
  return clips.size() == 1 ? clips.front() : torch::cat(clips, 0);
}

}  // namespace vaecodec::core
