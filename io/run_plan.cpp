#include "io/run_plan.h"

#include <iostream>
#include <optional>
#include <string>

#include "core/device/device.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "core/sizes.h"
#include "io/log.h"

namespace vaecodec::io {
namespace {

// Note [Planning bands]
// A clip split across devices is planned as the tallest band alone on the device with the least room (each
// band holds the whole model and its band's activations, caches and input and output, plus the halo rows,
// which are a few rows per layer): the budget is per device, every device's allocator is capped at it, and
// the plan's chunk length serves every band. Where a band does not fit whole, a family that runs exact tiles
// runs the one-device plan's exact tiles shared out among the devices (Note [Exact tiles across devices] in
// core/split/exact_tiles.h); the others cut every band into the fewest columns that fit, the same in every
// band (Note [Bands across devices]). What fits in neither is refused with what would fit, more devices or a
// larger budget.
core::Plan plan_bands(core::VaeModel& model, core::Op op, const Geometry& geometry,
                      const RunPlanOptions& options) {
  const int64_t f = model.info().spatial_factor;
  const int64_t latent_height = geometry.padded_height / f;
  const auto rows = core::band_rows(latent_height, static_cast<int64_t>(options.bands.size()));
  std::optional<core::PlannerOptions> planner;
  std::string devices;
  for (const core::BandPlace& band : options.bands) {
    core::PlannerOptions mine = core::settle_budget(*band.model, *options.memory);
    // The smallest budget of any device (0: none, larger than any).
    if (!planner ||
        (mine.budget_bytes > 0 && (planner->budget_bytes == 0 || mine.budget_bytes < planner->budget_bytes)))
      planner = mine;
    devices += (devices.empty() ? "" : ",") + band.device->torch_device().str();
  }
  const core::PlanTarget target{op, geometry.padded_width, geometry.padded_height, options.latent_frames,
                                static_cast<int64_t>(rows.size())};
  if (options.planned)
    *options.planned = core::band_plan_request(core::plan_request(model, target), target.devices);
  core::Plan plan;
  try {
    plan = core::plan_for(model, target, *planner);
  } catch (const Error& e) {
    throw Error("one band of " + std::to_string(geometry.padded_width) + "x" +
                std::to_string(rows.front().count * f) + " (of " + std::to_string(options.bands.size()) +
                " across " + devices + ") does not fit: " + e.what() +
                "; use more devices or a larger budget");
  }
  double fraction = 0;
  for (const core::BandPlace& band : options.bands) fraction = band.device->cap_memory(planner->budget_bytes);
  if ((!options.quiet || verbose()) && plan.tile_devices > 1)
    std::cerr << "vaecodec: " << plan.summary() << " (" << devices
              << "): bands would not fit, budget per device" << std::endl;
  else if (!options.quiet || verbose())
    std::cerr << "vaecodec: " << plan.summary() << "; split in " << options.bands.size() << " bands of "
              << rows.back().count * f << "-" << rows.front().count * f << " rows across " << devices
              << ", budget per device" << std::endl;
  if (fraction > 0)
    verbose_note("allocator",
                 "capped at " + core::format_size(planner->budget_bytes) + " on each of " + devices);
  return plan;
}

}  // namespace

core::Plan plan_memory(core::VaeModel& model, core::Op op, const Geometry& geometry,
                       const RunPlanOptions& options) {
  if (!options.memory) {
    core::Plan plan;
    plan.op = op;
    plan.chunk = options.chunk;
    const int64_t f = model.info().spatial_factor;
    plan.tiles = core::TileGrid::whole(geometry.padded_height / f, geometry.padded_width / f);
    plan.split = options.bands.size() >= 2 ? core::SplitKind::kBands : core::SplitKind::kWhole;
    return plan;
  }
  if (!options.bands.empty()) return plan_bands(model, op, geometry, options);
  const core::PlannerOptions planner = core::settle_budget(model, *options.memory);
  const core::PlanTarget target{op, geometry.padded_width, geometry.padded_height, options.latent_frames};
  if (options.planned) *options.planned = core::plan_request(model, target);
  const core::Plan plan = core::plan_for(model, target, planner);
  if (model.device().is_cpu())
    core::check_host_memory(plan.estimate.total(),
                            core::op_name(op) + " of " + std::to_string(geometry.padded_width) + "x" +
                                std::to_string(geometry.padded_height),
                            planner.spelling.name(planner.spelling.vram));
  const double fraction = core::Device::of(model.device()).cap_memory(planner.budget_bytes);
  if (!options.quiet || verbose()) std::cerr << "vaecodec: " << plan.summary() << std::endl;
  if (fraction > 0)
    verbose_note("allocator", "capped at " + core::format_size(planner.budget_bytes) + " (" +
                                  std::to_string(static_cast<int>(fraction * 100 + 0.5)) +
                                  "% of the device)");
  return plan;
}

void report_memory(core::VaeModel& model, const core::Plan& plan, const RunPlanOptions& options) {
  if (!options.memory) return;
  if (options.quiet || !model.device().is_cuda()) return;
  if (!options.bands.empty()) {  // each device's peak against the tallest band's estimate
    std::string peaks;
    for (const core::BandPlace& band : options.bands)
      peaks += (peaks.empty() ? "" : ", ") + band.device->torch_device().str() + " " +
               core::format_size(band.device->peak_allocated_bytes());
    std::cerr << "vaecodec: peak VRAM " << peaks << " (estimated " << core::format_size(plan.estimate.total())
              << " per device)" << std::endl;
    return;
  }
  std::cerr << "vaecodec: peak VRAM "
            << core::format_size(core::Device::of(model.device()).peak_allocated_bytes()) << " (estimated "
            << core::format_size(plan.estimate.total()) << "), peak host RSS "
            << core::format_size(core::host_peak_bytes()) << " (estimated "
            << core::format_size(plan.estimate.host) << ")" << std::endl;
}

}  // namespace vaecodec::io
