#include "io/run_plan.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "core/device/device.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "core/plan_model.h"
#include "core/sizes.h"
#include "io/log.h"
#include "io/video_reader.h"

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
  planner->host_reserved_bytes += pipeline_host_bytes(op, geometry, options);
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

// Note [A file run's host memory]
// Beside the model's run (the window's frames, parked caches: the planner's host estimate), a file run holds
// in host memory what its reader and writer hold, which grows with the frame and not with the clip:
//   the video encoder's own frames (decode, roundtrip): x264 at vaecodec's settings (rc-lookahead 10,
//     sync-lookahead 0) peaks at about 65 + 10.5 x threads bytes per pixel, measured with ffmpeg on 30 frames
//     of noise (4K: 0.82 / 1.53 / 2.47 GB with 4 / 12 / 24 threads; 1080p: 0.67 GB with 24), and takes 1.5
//     threads per core when left to choose (24 on a 16-core host: 2.6 GB at 4K). Other encoders are counted
//     as x264.
//   the writer's queue of converted frames and the chunk they came down in: the queue's frames and four more,
//     3 bytes per pixel (8-bit 4:4:4 at most).
//   the reader's queue of float32 RGB frames in pinned blocks, rounded up to a power of two (Note [Pinned
//     blocks] in core/plan_model.cpp), one chunk and one more, and the H.264 decoder's frames: one per thread
//     (Note [The reader's decoder threads] in io/video_reader.cpp) and 16 references, 1.5 bytes per pixel.
// At 4K these are 2.9 GB for a decode and 1.1 GB for an encode, which the H200's file rows held beyond the
// estimate before it counted them (docs/benchmarks.md, "On one H200 at 051e5a3"). The planner adds them to
// every plan's host estimate (PlannerOptions::host_reserved_bytes).
int64_t pipeline_host_bytes(core::Op op, const Geometry& geometry, const RunPlanOptions& options) {
  constexpr double kEncoderBase = 65, kEncoderPerThread = 10.5;  // bytes per pixel
  constexpr double kDecoderReferences = 16;
  const double pixels = static_cast<double>(geometry.padded_width * geometry.padded_height);
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  const double queue =
      static_cast<double>(1 + geometry.temporal_factor * std::max<int64_t>(options.chunk, 1));
  double bytes = 0;
  if (op != core::Op::kEncode) {
    const double threads = options.encoder_threads > 0 ? options.encoder_threads : 1.5 * cores;
    bytes += pixels * (kEncoderBase + kEncoderPerThread * threads) + (queue + 4) * 3.0 * pixels;
  }
  if (op != core::Op::kDecode) {
    const double frame = 3.0 * 4.0 * pixels;
    const double threads =
        reader_threads(options.decoder_threads, geometry.padded_width, geometry.padded_height);
    bytes +=
        (queue + 1) * core::plan_model::pinned_block(frame) + (threads + kDecoderReferences) * 1.5 * pixels;
  }
  return static_cast<int64_t>(bytes);
}

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
  core::PlannerOptions planner = core::settle_budget(model, *options.memory);
  planner.host_reserved_bytes += pipeline_host_bytes(op, geometry, options);
  planner.output_8bit = options.output_8bit;
  planner.input_packed_bytes = options.input_packed_bytes;
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
