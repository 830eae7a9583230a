#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/op.h"
#include "core/plan_types.h"
#include "core/tile_grid.h"
#include "core/trunk.h"
#include "core/vae_model.h"

namespace vaecodec::core {

// Note [Limits]
// Sizes and counts from the command line, presets and files are checked against these before any memory is
// planned or allocated, so that an absurd request is refused in one line instead of overflowing the
// planner's arithmetic, looping over millions of tile grids or exhausting memory: a frame side of 16384
// pixels (16K video; FFmpeg's encoders stop there or earlier) and 1024 latent frames per model call (4093
// video frames, far past where longer chunks stop paying).
constexpr int64_t kMaxFrameSide = 16384;
constexpr int64_t kMaxChunk = 1024;
// The largest tile overlap or norm context a user may give, latent pixels: a side of kMaxFrameSide pixels at
// 8 pixels per latent pixel.
constexpr int64_t kMaxTileMargin = kMaxFrameSide / 8;

// The estimate for one candidate plan.
MemoryEstimate estimate_memory(const PlanRequest& request, int64_t chunk, const TileGrid& tiles, bool offload,
                               int64_t reserved_bytes = 0);

// Picks the fastest plan whose estimate stays under the budget less the margin (Note [Planner]); throws
// Error with the smallest budget that would do when none does.
Plan plan_run(const PlanRequest& request, const PlannerOptions& options);
// The smallest budget any plan the options allow fits in (its estimate plus the margin).
int64_t smallest_budget(const PlanRequest& request, const PlannerOptions& options);

// --- a clip split across devices in bands (Note [Bands across devices] in core/band_exchange.h)
// The latent rows [first, first + count) of each of `bands` bands of a frame `latent_height` rows high,
// top to bottom: near-equal, the taller ones first. Throws Error when there are fewer rows than bands.
struct BandRows {
  int64_t first = 0, count = 0;
};
std::vector<BandRows> band_rows(int64_t latent_height, int64_t bands);

// What one device of a split run must hold: `whole`'s run for the tallest of `bands` bands, plus a latent
// row above and below for the halo (more than the halo needs at every resolution). Its plan is the plan of
// every device of the split.
PlanRequest band_plan_request(const PlanRequest& whole, int64_t bands);
// The plan of every device of that split: band_plan_request's run under `options`, untiled where it fits;
// else, where `options` allow tiles: for a family that runs exact tiles (and no options.tile), the
// one-device plan of the whole frame, its exact tiles shared out among the devices (plan.tile_devices,
// Note [Exact tiles across devices]); for the others (or a given options.tile: columns of its width) the
// fewest blended columns that fit, never rows of tiles nor offloaded caches. plan.tiles is the grid of the
// whole frame. Throws what plan_run throws for the last plan tried when none fits.
Plan plan_band_run(const PlanRequest& whole, int64_t bands, PlannerOptions options);

}  // namespace vaecodec::core
