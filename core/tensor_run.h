#pragma once

#include <cstdint>

#include <torch/torch.h>

#include "core/op.h"
#include "core/plan_for.h"
#include "core/vae_model.h"

namespace vaecodec::core {

// Note [Runs on whole tensors]
// A caller that holds a whole clip in memory (the Python package) runs it through what the file pipeline
// runs, minus the files: the planner picks the chunk and tiles for the clip's frame size under the budget,
// and the engine's run (core::Run) carries the clip through the model in those chunks and tiles, so the
// result is the one the CLI gets for the same frames or latents. What differs:
// - nothing is padded: the frames must already be 1 + temporal_factor * k, with sides that are multiples of
//   the spatial factor (the CLI pads what it reads, Note [Padding] in io/chunking.h); other shapes are a
//   UsageError naming what is expected;
// - the result stays on the model's device and grows there, so the plan holds it as memory reserved outside
//   the run (PlannerOptions::reserved_bytes);
// - the allocator is not capped at the budget: in a caller's process the cap would also bind the caller's
//   own tensors, so the budget is kept by the plan alone;
// - a batch of B clips runs one clip at a time (each is planned as the CLI plans one input).

// Throws UsageError when `input` cannot go through `op` (kEncode or kDecode) on `model` as a whole: not 5-D,
// the wrong channel count, sides that are not multiples of the spatial factor, a frame count that is not
// 1 + temporal_factor * k (encode), no frames.
void check_tensor_input(const VaeModel& model, Op op, const torch::Tensor& input);

// The plan for `op` over `input` (shaped as check_tensor_input wants) on `model`, with the budget settled
// and the result's bytes reserved. Throws Error from the planner when no plan fits.
Plan plan_tensor_run(const VaeModel& model, Op op, const torch::Tensor& input, PlannerOptions planner);

// Runs `op` over `input` under `plan`: encode: frames [B, 3, T, H, W] in [-1, 1] -> latents [B, z, t, h, w]
// as the model's encode gives them (Wan: normalized, float32); decode: latents -> frames [B, 3, T, H, W],
// unclamped, in the model's dtype. Any float dtype in, on the CPU or the model's device; the result is on
// the model's device, made on the current stream.
torch::Tensor run_tensor(VaeModel& model, Op op, const torch::Tensor& input, const Plan& plan);

}  // namespace vaecodec::core
