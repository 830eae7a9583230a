#include "core/plan_for.h"

#include <optional>
#include <string>
#include <utility>

#include "core/device/device.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "core/models/registry.h"
#include "core/sizes.h"

namespace vaecodec::core {

PlanRequest plan_request(const ModelInfo& info, int64_t parameter_count, torch::ScalarType dtype, Op op,
                         int64_t width, int64_t height) {
  PlanRequest r;
  r.calibration = find_model_family(info.family).calibration;
  r.family = info.family;
  r.spatial_factor = info.spatial_factor;
  r.temporal_factor = info.temporal_factor;
  r.latent_channels = info.latent_channels;
  r.parameter_count = parameter_count;
  r.encode_attention = info.encode_attention;
  r.decode_attention = info.decode_attention;
  r.op = op;
  r.width = width;
  r.height = height;
  r.dtype = dtype;
  return r;
}

PlanRequest plan_request(const VaeModel& model, const PlanTarget& target) {
  PlanRequest r = plan_request(model.info(), model.parameter_count(), target.dtype.value_or(model.dtype()),
                               target.op, target.width, target.height);
  r.latent_frames = target.latent_frames;
  if (!model.tiles_through_time()) return r;
  r.exact_tiles = model.exact_tiles();
  r.tiles_through_time = true;
  r.encode_features = model.feature_channels(true);
  r.decode_features = model.feature_channels(false);
  const int64_t lh = target.height / r.spatial_factor, lw = target.width / r.spatial_factor;
  // Copies of the trunks' reaches: the request may outlive the model.
  r.tile_work = [encode_trunk = *model.trunk_for(true), decode_trunk = *model.trunk_for(false), lh, lw](
                    bool encode, const Area& interior) {
    return trunk_tile_work(encode ? encode_trunk : decode_trunk, encode, interior, lh, lw);
  };
  return r;
}

Plan plan_for(const VaeModel& model, const PlanTarget& target, const PlannerOptions& options) {
  const PlanRequest request = plan_request(model, target);
  if (target.devices > 1) return plan_band_run(request, target.devices, options);
  return plan_run(request, options);
}

PlannerOptions with_host_budget(PlannerOptions planner) {
  if (planner.host_budget_bytes == 0) {
    planner.host_budget_bytes = host_budget_bytes();
    if (planner.host_budget_bytes > 0) planner.host_budget_note = "available on this host, less a margin";
  }
  return planner;
}

PlannerOptions settle_budget(const VaeModel& model, PlannerOptions planner) {
  const Device& device = Device::of(model.device());
  const std::optional<int64_t> available = device.available_bytes();
  if (!available) return planner;
  planner = with_host_budget(std::move(planner));
  const std::string where = device.torch_device().str();
  if (planner.budget_bytes == 0) {
    const int64_t total = device.memory_info().total;
    planner.budget_bytes = *available;
    planner.budget_is_ceiling = true;
    if (planner.budget_note.empty())
      planner.budget_note = "free" + (total > 0 ? " of " + format_size(total) : "") + " on " + where;
  } else if (planner.budget_bytes > *available && !planner.budget_forced) {
    const OptionSpelling& o = planner.spelling;
    throw Error("the memory budget of " + format_size(planner.budget_bytes) + " is more than the " +
                format_size(*available) + " free on " + where + " now (other programs hold the rest): give " +
                o.give(o.vram, format_size(*available)) + " or less" +
                (o.vram_force.empty() ? "" : ", or " + o.name(o.vram_force) + " to plan for it anyway"));
  }
  return planner;
}

}  // namespace vaecodec::core
