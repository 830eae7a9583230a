#pragma once

#include <cstdint>
#include <optional>

#include <torch/torch.h>

#include "core/op.h"
#include "core/planner.h"
#include "core/vae_model.h"

namespace vaecodec::core {

// Note [One planning entry]
// Every front end (the file pipeline, `plan`, `bench`, the Python package) asks for a plan the same way: a
// model, what the plan is for (PlanTarget) and the planner's options. The request the planner reads (the
// model's shapes, parameters, dtype, exact tiles and its family's measured peaks) is made here, from the
// registry, and nowhere else, so that no front end plans for a request that another would assemble otherwise.
// A run on a device first settles its budget against what that device has free (settle_budget).

// What a plan is for: `op` over frames of `width` x `height` pixels as the model sees them (padded), a clip
// of `latent_frames` (0: not known), split in bands across `devices` devices (1: one device; Note [Bands
// across devices] in core/band_exchange.h), with the weights in `dtype` (none: the model's own; `plan`
// describes a model without converting its weights).
struct PlanTarget {
  Op op = Op::kDecode;
  int64_t width = 0, height = 0;
  int64_t latent_frames = 0;
  int64_t devices = 1;
  std::optional<torch::ScalarType> dtype;
};

// The planner's request for `target` (its frame and length; not its devices) on `model`: the model's info,
// parameters and dtype, its exact tiles where it runs them, and its family's calibration.
PlanRequest plan_request(const VaeModel& model, const PlanTarget& target);
// The same for a model known by its info alone, with `parameter_count` weights in `dtype`, and no exact
// tiles.
PlanRequest plan_request(const ModelInfo& info, int64_t parameter_count, torch::ScalarType dtype, Op op,
                         int64_t width, int64_t height);

// The plan of `target` on `model` under `options`: plan_run on one device, plan_band_run across several.
// Throws what those throw when nothing fits.
Plan plan_for(const VaeModel& model, const PlanTarget& target, const PlannerOptions& options);

// A GPU run's host budget (Note [Host memory budget] in core/host_memory.h): where none was given, what the
// host has available now, less a margin.
PlannerOptions with_host_budget(PlannerOptions planner);

// The budget a run on `model`'s device plans for (and with_host_budget's host budget): without one given
// (budget 0), what the device has free now (Device::available_bytes); one given that is more than that is
// refused before any work unless `budget_forced`. The CPU has no such limit and keeps the options as given.
PlannerOptions settle_budget(const VaeModel& model, PlannerOptions planner);

}  // namespace vaecodec::core
