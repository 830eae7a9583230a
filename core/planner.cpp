#include "core/planner.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/plan_model.h"
#include "core/sizes.h"

namespace vaecodec::core {
using namespace plan_model;

MemoryEstimate estimate_memory(const PlanRequest& request, int64_t chunk, const TileGrid& tiles, bool offload,
                               int64_t reserved_bytes) {
  const double size = static_cast<double>(element_size(request.dtype));
  const double f2 = static_cast<double>(request.spatial_factor * request.spatial_factor);
  const double frame_pixels = static_cast<double>(request.width * request.height);
  const double tile_pixels = static_cast<double>(tiles.tile_height * tiles.tile_width) * f2;
  // Every tile's cache on the device, or (offloaded) three: the tile running, the next one coming up and the
  // last one going down (Note [Offloaded caches]).
  const double cache_pixels = static_cast<double>(tiled_area(tiles)) * f2;
  const double device_cache_pixels =
      offload ? std::min<int64_t>(3, tiles.count()) * tile_pixels : cache_pixels;
  const double frames = static_cast<double>(request.temporal_factor * chunk);

  MemoryEstimate e;
  e.weights = request.parameter_count * element_size(request.dtype);
  e.reserved = reserved_bytes;
  std::vector<Op> ops;
  if (request.op == Op::kRoundtrip)
    ops = {Op::kEncode, Op::kDecode};
  else
    ops = {request.op};
  double activations = 0;
  for (Op op : ops) {
    const Coefficients k = coefficients(request, op);
    e.cache += static_cast<int64_t>(k.cache_elements * size * device_cache_pixels);
    e.host_cache += offload ? static_cast<int64_t>(k.cache_elements * size * cache_pixels) : 0;
    activations = std::max(activations, k.activation_bytes * tile_pixels * frames);
  }
  e.activations = static_cast<int64_t>(activations);
  // The chunk in and out (3 channels each side; latents are small next to them), and when tiled the float32
  // accumulator of the blended output and one tile's output.
  double io = 6.0 * frames * frame_pixels * size * static_cast<double>(ops.size());
  if (tiles.tiled()) io += 3.0 * frames * (frame_pixels * 4.0 + tile_pixels * size);
  e.io = static_cast<int64_t>(io);
  return e;
}

// Note [Planner]
// Every candidate - the whole frame or a grid of tiles (every rows x cols split whose tiles are at least
// min_tile), each chunk length up to max_chunk, caches on the device or offloaded - gets a memory estimate
// (Note [Memory model]) and a time (Note [Plan cost]). Of those whose estimate fits the usable part of the
// budget, the cheapest wins; within kCostTolerance of it, the smallest peak (and never one dearer than a
// smaller budget's: Note [More memory is never slower]). So the whole frame wins whenever
// it fits (tiles only add work), chunks stay at one latent frame unless offloaded copies make longer ones
// pay, and a plan with few wide tiles and offloaded caches competes fairly with one of many small tiles whose
// caches all stay on the device. Temporal chunks never cut the causal cache, so none of this changes the
// result except the spatial tiles' blend (Note [Tile blending]).
// For a family whose tiles are not exact (SeedVR2) the whole frame is also a candidate with part of its
// cache streamed from host memory (Note [Caches streamed slot by slot]), in eighths kept on the device. It
// is the published function, so it wins over tiles wherever both budgets hold it and its time, copies and
// pinning counted, is within kStreamedCostLimit (1.5x) of the untiled run's, even where tiles would be
// faster: exactness first, then speed. Beyond that limit tiles through time run (the streamed plan only
// where no tiles fit). Its time falls as the budget grows (more stays on the device), so a larger budget
// never loses it, and among the plans of each kind more memory is never slower.
namespace {

// Every plan the options allow (Note [Planner]), with its estimate and cost, fitting the budget or not.
std::vector<Plan> candidate_plans(const PlanRequest& request, const PlannerOptions& options) {
  if (request.width <= 0 || request.height <= 0 || request.width % request.spatial_factor ||
      request.height % request.spatial_factor)
    throw Error("cannot plan for a " + std::to_string(request.width) + "x" + std::to_string(request.height) +
                " frame: the size must be a positive multiple of " + std::to_string(request.spatial_factor));
  if (request.width > kMaxFrameSide || request.height > kMaxFrameSide)
    throw Error("cannot plan for a " + std::to_string(request.width) + "x" + std::to_string(request.height) +
                " frame: each side may be at most " + std::to_string(kMaxFrameSide) + " pixels");
  for (const auto& [name, value] : {std::pair{"chunk", options.chunk}, {"max_chunk", options.max_chunk}})
    if (value < 0 || value > kMaxChunk)
      throw Error(std::string("cannot plan with ") + name + " " + std::to_string(value) +
                  " latent frames per call: at most " + std::to_string(kMaxChunk));
  if (options.tile_overlap < 0 || options.tile_overlap > kMaxTileMargin)
    throw Error("cannot plan with a tile overlap of " + std::to_string(options.tile_overlap) +
                " latent pixels: at most " + std::to_string(kMaxTileMargin));
  if (options.norm_context < 0 || options.norm_context > kMaxTileMargin)
    throw Error("cannot plan with a norm context of " + std::to_string(options.norm_context) +
                " latent pixels: at most " + std::to_string(kMaxTileMargin));
  if (options.tile && (options.tile->width > kMaxFrameSide || options.tile->height > kMaxFrameSide))
    throw Error("cannot plan with tiles of " + std::to_string(options.tile->width) + "x" +
                std::to_string(options.tile->height) + " latent pixels: each side at most " +
                std::to_string(kMaxFrameSide));
  if (!(options.margin >= 0 && options.margin < 1))
    throw Error("the memory margin must be at least 0 and below 1, got " + std::to_string(options.margin));
  const int64_t lh = request.height / request.spatial_factor, lw = request.width / request.spatial_factor;
  // Without a budget nothing is traded for memory: one latent frame per call unless --chunk says otherwise.
  const int64_t max_chunk = options.chunk > 0          ? options.chunk
                            : options.budget_bytes > 0 ? std::max<int64_t>(options.max_chunk, 1)
                                                       : 1;
  const int64_t min_chunk = options.chunk > 0 ? options.chunk : 1;

  const double per_pixel = seconds_per_pixel(request);
  const double latent_frames =
      static_cast<double>(request.latent_frames > 0 ? request.latent_frames : kAssumedLatentFrames);
  const double untiled_cost = [&] {
    const TileGrid whole = TileGrid::whole(lh, lw);
    return plan_cost(request, per_pixel, 1, whole,
                     estimate_memory(request, 1, whole, false, options.reserved_bytes));
  }();
  // What a streamed cache holds on the device besides its resident part (Note [Caches streamed slot by
  // slot]); 0 where the family's caches do not stream (a round trip's pair never does).
  const double stream_window =
      request.op == Op::kRoundtrip
          ? 0.0
          : coefficients(request, request.op).stream_window_elements *
                static_cast<double>(element_size(request.dtype) * request.width * request.height);
  // resident_eighths (untiled with offload): the share of the cache kept on the device, the rest streamed.
  auto plan_of = [&](int64_t n, const TileGrid& g, bool offload, int64_t resident_eighths = 0) {
    Plan p;
    p.op = request.op;
    p.chunk = n;
    p.tiles = g;
    p.split = g.tiled() ? SplitKind::kBlendedTiles : SplitKind::kWhole;
    p.offload = offload;
    p.budget_bytes = options.budget_bytes;
    p.budget_note = options.budget_note;
    p.estimate = estimate_memory(request, n, g, offload && g.tiled(), options.reserved_bytes);
    if (offload && !g.tiled()) {  // Note [Caches streamed slot by slot]
      p.resident_cache = p.estimate.cache * resident_eighths / 8;
      p.estimate.host_cache = p.estimate.cache - p.resident_cache;
      p.estimate.cache =
          p.resident_cache + std::min(p.estimate.host_cache, static_cast<int64_t>(std::ceil(stream_window)));
    }
    p.estimate.host = kHostBase + options.host_reserved_bytes + p.estimate.host_cache;
    // A streamed cache locks its host buffers once per run (Note [Pinned buffers kept for the next run]), and
    // as much again for the resident share when that is chosen anew after the first call (Note [Caches
    // streamed slot by slot]).
    const double pinning = offload && !g.tiled()
                               ? static_cast<double>(p.estimate.host_cache + p.resident_cache) / kPinRate
                               : 0.0;
    const double seconds = plan_cost(request, per_pixel, n, g, p.estimate) + pinning / latent_frames;
    p.cost = seconds / untiled_cost;
    p.seconds = seconds * latent_frames;
    return p;
  };
  std::vector<Plan> plans;
  // A given tile size asks for tiles, unless it covers the frame.
  const bool whole = !options.tile || (options.tile->height >= lh && options.tile->width >= lw);
  for (int64_t n = min_chunk; n <= max_chunk && whole; ++n)
    plans.push_back(plan_of(n, TileGrid::whole(lh, lw), false));
  // The whole frame with part of its cache streamed from host memory, where tiles would not be exact: the
  // published function on less memory than the cache (Note [Caches streamed slot by slot]).
  if (whole && options.offload && !request.exact_tiles && stream_window > 0)
    for (int64_t n = min_chunk; n <= max_chunk; ++n)
      for (int64_t eighths = 0; eighths < 8; ++eighths)
        plans.push_back(plan_of(n, TileGrid::whole(lh, lw), true, eighths));
  if (!options.tiling && !options.tile) return plans;
  // Tiles through time, exact or not, replace the blended tiles of BlendedTiles where the family has them:
  // they hold one tile's cache at a time, and their convolutions are exact (Note [Norms of tiles through
  // time]).
  if (request.tiles_through_time && options.tiling) {  // a split's columns (plan_band_run) stay blended
    for (Plan& p : exact_plans(request, options, min_chunk, max_chunk, untiled_cost * latent_frames))
      plans.push_back(std::move(p));
    return plans;
  }

  // Blended tiles: every rows x cols split whose tiles are at least min_tile (or the frame) on each side.
  std::vector<TileGrid> grids;
  if (options.tile) {
    grids.push_back(TileGrid::cover(lh, lw, *options.tile, options.tile_overlap));
  } else {
    const int64_t o = options.tile_overlap;
    for (int64_t rows = 1; rows <= lh; ++rows) {
      const int64_t th = rows == 1 ? lh : ceil_div(lh + (rows - 1) * o, rows);
      if (rows > 1 && (th < std::min(options.min_tile, lh) || th <= o)) break;
      for (int64_t cols = 1; cols <= lw; ++cols) {
        if (rows * cols == 1) continue;
        const int64_t tw = cols == 1 ? lw : ceil_div(lw + (cols - 1) * o, cols);
        if (cols > 1 && (tw < std::min(options.min_tile, lw) || tw <= o)) break;
        TileGrid g = TileGrid::cover(lh, lw, {th, tw}, o);
        if (g.rows == rows && g.cols == cols) grids.push_back(g);
      }
    }
  }
  for (bool offload : {false, true}) {
    if (offload && !options.offload) break;
    for (const TileGrid& g : grids) {
      if (!g.tiled()) continue;
      for (int64_t n = min_chunk; n <= max_chunk; ++n) plans.push_back(plan_of(n, g, offload));
    }
  }
  return plans;
}

// Latent pixels the norms of a grid's tile see at the least: the smallest tile with its context.
int64_t norm_seen(const TileGrid& g) {
  int64_t rows = g.latent_height, cols = g.latent_width;
  for (int64_t r = 0; r < g.rows; ++r)
    rows = std::min(rows, g.computed_rows(r).second - g.computed_rows(r).first);
  for (int64_t c = 0; c < g.cols; ++c)
    cols = std::min(cols, g.computed_cols(c).second - g.computed_cols(c).first);
  return rows * cols;
}

// The rules of Note [Planner] and Note [What a plan's norms see] among `plans` (not empty).
const Plan* choose(const std::vector<const Plan*>& plans) {
  double cheapest = plans.front()->cost;
  for (const Plan* p : plans) cheapest = std::min(cheapest, p->cost);
  const Plan* best = nullptr;  // the smallest peak among the plans within the tolerance of the cheapest
  for (const Plan* p : plans)
    if (p->cost <= cheapest * (1 + kCostTolerance) && (!best || p->estimate.total() < best->estimate.total()))
      best = p;
  // Tiles whose norms see less than the frame: the norms that see most, within kNormTolerance of the
  // cheapest (Note [What a plan's norms see]).
  if (!best->tiles.exact && best->tiles.through_time)
    for (const Plan* p : plans)
      if (p->cost <= cheapest * (1 + kNormTolerance) &&
          (norm_seen(p->tiles) > norm_seen(best->tiles) ||
           (norm_seen(p->tiles) == norm_seen(best->tiles) && p->cost < best->cost)))
        best = p;
  return best;
}

// Note [More memory is never slower]
// The rules give time for a smaller peak (kCostTolerance) and for norms that see more (kNormTolerance), so
// a larger budget could take a plan slower than a smaller budget's: the 4K encode in 16 GB took tiles whose
// norms saw more than 12 GB's and ran 4% slower (docs/benchmarks.md). So the choice is made as the budget
// grows: the plans that fit, in the order of their peaks, each step choosing by the rules among those come so
// far that cost no more than the last step's choice. The budget's plan is the last step's: it never costs
// more than what a smaller budget gets, and a larger budget's wider norms come where they cost no more.
const Plan* choose_growing(const std::vector<Plan>& fits) {
  std::vector<const Plan*> order;
  for (const Plan& p : fits) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(),
                   [](const Plan* a, const Plan* b) { return a->estimate.total() < b->estimate.total(); });
  const Plan* chosen = nullptr;
  std::vector<const Plan*> open;  // come so far, and no dearer than the last choice
  for (size_t i = 0; i < order.size();) {
    const int64_t peak = order[i]->estimate.total();
    const size_t before = open.size();
    for (; i < order.size() && order[i]->estimate.total() == peak; ++i)
      if (!chosen || order[i]->cost <= chosen->cost) open.push_back(order[i]);
    if (open.size() == before) continue;  // nothing new within the last choice's cost
    chosen = choose(open);
    std::erase_if(open, [&](const Plan* p) { return p->cost > chosen->cost; });
  }
  return chosen;
}

}  // namespace

Plan plan_run(const PlanRequest& request, const PlannerOptions& options) {
  const int64_t budget = options.budget_bytes;
  // The allocator caps reserved memory, which exceeds the allocated peak the model estimates by the
  // fragmentation of its cached blocks: plan to the budget less the margin.
  const auto usable = static_cast<int64_t>(static_cast<double>(budget) * (1.0 - options.margin));
  const int64_t host_budget = options.host_budget_bytes;
  auto fits_host = [&](const Plan& p) { return host_budget <= 0 || p.estimate.host <= host_budget; };
  if (options.budget_is_ceiling && budget > 0) {
    PlannerOptions unbudgeted = options;
    unbudgeted.budget_bytes = 0;
    unbudgeted.budget_is_ceiling = false;
    unbudgeted.host_budget_bytes = 0;
    Plan as_without = plan_run(request, unbudgeted);
    if (as_without.estimate.total() <= usable && fits_host(as_without)) {
      as_without.budget_bytes = budget;
      as_without.budget_note = options.budget_note;
      as_without.host_budget_bytes = host_budget;
      as_without.host_budget_note = options.host_budget_note;
      return as_without;
    }
  }
  std::vector<Plan> fits;
  // For a refusal: the smallest device peak within the host budget, the smallest host need of the plans
  // that fit the device, and of all plans.
  std::optional<Plan> smallest, device_host, smallest_host;
  for (const Plan& p : candidate_plans(request, options)) {
    const bool fits_device = budget <= 0 || p.estimate.total() <= usable;
    if (fits_device && fits_host(p)) fits.push_back(p);
    if (fits_host(p) && (!smallest || p.estimate.total() < smallest->estimate.total())) smallest = p;
    if (fits_device && (!device_host || p.estimate.host < device_host->estimate.host)) device_host = p;
    if (!smallest_host || p.estimate.host < smallest_host->estimate.host) smallest_host = p;
  }
  // The whole frame wins whenever it fits: tiles only add work, whatever the estimate says; streamed, within
  // kStreamedCostLimit of the untiled time, and beyond it where no tiles fit (Note [Planner]).
  auto exact = [](const Plan& p) { return !p.tiles.tiled() && (!p.offload || p.cost <= kStreamedCostLimit); };
  if (std::any_of(fits.begin(), fits.end(), exact))
    std::erase_if(fits, [&](const Plan& p) { return !exact(p); });
  else if (std::any_of(fits.begin(), fits.end(), [](const Plan& p) { return p.tiles.tiled(); }))
    std::erase_if(fits, [](const Plan& p) { return !p.tiles.tiled(); });
  if (!fits.empty()) {
    const Plan* best = choose_growing(fits);
    Plan plan = *best;
    plan.host_budget_bytes = host_budget;
    plan.host_budget_note = options.host_budget_note;
    plan.calibration = coefficients(request, request.op == Op::kRoundtrip ? Op::kDecode : request.op).note;
    return plan;
  }
  std::ostringstream s;
  // GiB to one decimal, rounded up, as a size to give: "3.2G".
  auto gib = [](double bytes) {
    std::ostringstream g;
    g << std::ceil(bytes / kGiB * 10) / 10 << "G";
    return g.str();
  };
  const OptionSpelling& spelling = options.spelling;
  if (device_host || (!smallest && smallest_host)) {
    // Plans fit the device but not the host (a host budget too small for one tile's window), or none fits
    // either: the plan that keeps least in host memory names the host budget it needs, and the device budget
    // too where the one given does not hold it.
    const Plan& p = device_host ? *device_host : *smallest_host;
    s << op_name(request.op) << " of " << request.width << "x" << request.height << " needs "
      << format_size(p.estimate.host) << " of host memory, more than the " << format_size(host_budget)
      << (options.host_budget_note.empty() ? "" : " (" + options.host_budget_note + ")") << " it may use; "
      << (spelling.host_memory.empty()
              ? "free host memory for it to use " + gib(p.estimate.host) + " or more"
              : "give " + spelling.give(spelling.host_memory, gib(p.estimate.host)) + " or more");
    if (budget > 0 && p.estimate.total() > usable)
      s << " and " << (spelling.host_memory.empty() ? "give " : "")
        << spelling.give(spelling.vram, gib(p.estimate.total() / (1.0 - options.margin))) << " or more";
    if (device_host && smallest)  // the other way out: a device budget for the host's
      s << ", or " << (spelling.host_memory.empty() ? "give " : "")
        << spelling.give(spelling.vram, gib(smallest->estimate.total() / (1.0 - options.margin)))
        << " or more";
    if (options.host_budget_given) throw UsageError(s.str());
    throw Error(s.str());
  }
  s << op_name(request.op) << " of " << request.width << "x" << request.height << " does not fit in "
    << format_size(budget) << (options.budget_note.empty() ? "" : " (" + options.budget_note + ")");
  if (smallest)
    s << ": the smallest plan (chunk " << smallest->chunk << ", "
      << (smallest->tiles.tiled()
              ? std::to_string(smallest->tiles.count()) + " " + smallest->tile_kind() + " tiles"
              : "untiled")
      << (smallest->offload ? ", caches offloaded" : "") << ") needs "
      << format_size(smallest->estimate.total())
      << (host_budget > 0 ? " (within the host's " + format_size(host_budget) + ")" : std::string())
      << "; give " << spelling.give(spelling.vram, gib(smallest->estimate.total() / (1.0 - options.margin)))
      << " or more";
  if (!options.tiling && !options.tile) s << ", or allow tiling";
  if (options.reserved_bytes > 0 && !options.reserved_note.empty())
    s << " (the plan counts " << format_size(options.reserved_bytes)
      << " held on the device besides the run: " << options.reserved_note << ")";
  throw Error(s.str());
}

int64_t smallest_budget(const PlanRequest& request, const PlannerOptions& options) {
  int64_t smallest = 0;
  for (const Plan& p : candidate_plans(request, options))
    if (smallest == 0 || p.estimate.total() < smallest) smallest = p.estimate.total();
  return static_cast<int64_t>(std::ceil(static_cast<double>(smallest) / (1.0 - options.margin)));
}

std::string split_kind_name(SplitKind kind) {
  switch (kind) {
    case SplitKind::kWhole:
      return "whole";
    case SplitKind::kBlendedTiles:
      return "blended tiles";
    case SplitKind::kBands:
      return "bands";
    case SplitKind::kExactTiles:
      break;
  }
  return "tiles through time";
}

std::string tile_norms_name(TileNorms norms) {
  switch (norms) {
    case TileNorms::kAuto:
      return "auto";
    case TileNorms::kCrop:
      return "crop";
    case TileNorms::kFrame:
      break;
  }
  return "frame";
}

bool Plan::crop_for(bool encode) const {
  const bool ran = op == Op::kRoundtrip || (op == Op::kEncode) == encode;
  return !ran || tiles.crop(encode);  // an op the plan does not run takes nothing away
}

std::optional<TileNorms> parse_tile_norms(const std::string& text) {
  if (text == "auto") return TileNorms::kAuto;
  if (text == "crop") return TileNorms::kCrop;
  if (text == "frame") return TileNorms::kFrame;
  return std::nullopt;
}

std::string Plan::summary() const {
  std::ostringstream s;
  s << "plan: " << op_name(op) << " chunk " << chunk << " latent frame" << (chunk == 1 ? "" : "s") << ", ";
  if (split == SplitKind::kExactTiles)
    s << tiles.rows << "x" << tiles.cols << " " << tile_kind() << " tiles of up to " << tiles.tile_width
      << "x" << tiles.tile_height << " latent px"
      << (tiles.exact ? std::string()
                      : " (overlap " + std::to_string(tiles.overlap) + "; norms: " + norm_statistics() + ")")
      << ", "
      << (window > 0 ? "windows of " + std::to_string(window) + " latent frames" : std::string("one window"))
      << (window_store == WindowStore::kHostFeatures ? " kept in host memory with its features"
          : window_store == WindowStore::kHostFrames ? " kept in host memory"
                                                     : "")
      << (tile_devices > 1 ? ", shared out among " + std::to_string(tile_devices) + " devices" : "");
  else if (tiles.tiled())
    s << tiles.rows << "x" << tiles.cols << " blended tiles of " << tiles.tile_width << "x"
      << tiles.tile_height << " latent px (overlap " << tiles.overlap << ")"
      << (offload ? ", caches offloaded to host" : "");
  else
    s << "untiled " << tiles.latent_width << "x" << tiles.latent_height << " latent px"
      << (offload ? ", caches streamed slot by slot from host memory (" + format_size(resident_cache) +
                        " kept on the device)"
                  : "");
  s << "; estimated peak " << format_size(estimate.total());
  if (budget_bytes > 0)
    s << " of " << format_size(budget_bytes) << " budget"
      << (budget_note.empty() ? "" : " (" + budget_note + ")");
  s << ", host " << format_size(estimate.host);
  if (host_budget_bytes > 0) s << " of " << format_size(host_budget_bytes);
  if (cost > 1.005) s << ", about " << std::fixed << std::setprecision(2) << cost << "x the untiled time";
  return s.str();
}

// Note [What a plan's norms see]
// A plan says what the statistics of its norms are taken over, the one thing besides the blend that makes a
// tiled run differ from the untiled one: untiled, bands and exact tiles (whose norms are per pixel, or whose
// families have none over the frame) the whole frame; SeedVR2's crop tiles each tile with its context at
// every resolution (Note [Crop tiles]; its decode's by default), its frame tiles the whole frame at latent
// resolution and each tile with its context above (Note [Norms of tiles through time]; its encode's by
// default; --tile-norms chooses); blended tiles (BlendedTiles) each tile alone.
// The closer a tile's statistics come to the frame's, the closer the run to the untiled one, and they come
// closer the more of the frame a tile computes: larger tiles, or a context around each. Both cost memory, the
// context also time (its pixels are computed at every resolution, then dropped). So where tiles through time
// are not exact the planner takes, among the plans that fit, within kNormTolerance of the fastest, the one
// whose smallest tile sees most (tile and context, norm_seen), trading at most that much time for
// statistics; the candidates have no context or the options' norm_context (8 latent pixels by default).
// More memory is then never slower than kNormTolerance beyond the plan of less memory.
std::string Plan::tile_kind() const {
  if (!tiles.tiled()) return "untiled";
  if (tiles.exact) return "exact";
  if (crop_for(true) && crop_for(false)) return "crop";
  if (op == Op::kRoundtrip && tiles.crop_decode) return "crop (decode), through time (encode)";
  return tiles.through_time ? "through time" : "blended";
}

std::string Plan::norm_statistics() const {
  if (!tiles.tiled() || tiles.exact) return "the whole frame";
  const std::string around = "each tile and " + std::to_string(tiles.context) + " latent px around it";
  const std::string crop = around + ", at every resolution";
  const std::string frame = around + "; the latent-resolution blocks the whole frame";
  if (crop_for(true) && crop_for(false)) return crop;
  if (op == Op::kRoundtrip && tiles.crop_decode) return "decode: " + crop + "; encode: " + frame;
  if (tiles.through_time) return frame;
  return "each tile alone";
}

nlohmann::json Plan::to_json() const {
  nlohmann::json tile_json = {{"rows", tiles.rows},
                              {"cols", tiles.cols},
                              {"tile_width", tiles.tile_width},
                              {"tile_height", tiles.tile_height},
                              {"overlap", tiles.overlap},
                              {"context", tiles.context},
                              {"crop_decode", tiles.crop_decode},
                              {"crop_encode", tiles.crop_encode},
                              {"latent_width", tiles.latent_width},
                              {"latent_height", tiles.latent_height}};
  return {{"op", op_name(op)},
          {"chunk", chunk},
          {"split", split_kind_name(split)},
          {"tiled", tiles.tiled()},
          {"tiles", tile_json},
          {"offload", offload},
          {"cache_streamed", offload && !tiles.tiled()},
          {"resident_cache_bytes", offload && !tiles.tiled() ? resident_cache : estimate.cache},
          {"budget_bytes", budget_bytes},
          {"budget_note", budget_note},
          {"estimate_bytes", estimate.total()},
          {"relative_time", cost},
          {"estimated_seconds", seconds},
          {"exact_tiles", tiles.tiled() && tiles.exact},
          {"tile_kind", tile_kind()},
          {"norm_statistics", norm_statistics()},
          {"window", window},
          {"host_window", host_window()},
          {"host_features", host_features()},
          {"tile_devices", tile_devices},
          {"host_estimate_bytes", estimate.host},
          {"host_budget_bytes", host_budget_bytes},
          {"host_budget_note", host_budget_note},
          {"estimate",
           {{"weights", estimate.weights},
            {"cache", estimate.cache},
            {"activations", estimate.activations},
            {"io", estimate.io},
            {"reserved", estimate.reserved},
            {"host_cache", estimate.host_cache},
            {"host", estimate.host}}},
          {"calibration", calibration}};
}

std::vector<BandRows> band_rows(int64_t latent_height, int64_t bands) {
  if (bands < 1) throw Error("a split run needs at least one band");
  if (latent_height < bands)
    throw Error("a frame of " + std::to_string(latent_height) + " latent rows cannot be split into " +
                std::to_string(bands) + " bands of at least one row each");
  std::vector<BandRows> rows(bands);
  const int64_t base = latent_height / bands, taller = latent_height % bands;
  int64_t first = 0;
  for (int64_t i = 0; i < bands; ++i) {
    rows[i] = {first, base + (i < taller ? 1 : 0)};
    first += rows[i].count;
  }
  return rows;
}

PlanRequest band_plan_request(const PlanRequest& whole, int64_t bands) {
  const int64_t f = whole.spatial_factor;
  const int64_t latent_height = whole.height / f;
  const int64_t tallest = band_rows(latent_height, bands).front().count;
  PlanRequest band = whole;
  band.height = std::min(latent_height, tallest + 2) * f;
  return band;
}

Plan plan_band_run(const PlanRequest& whole, int64_t bands, PlannerOptions options) {
  const int64_t f = whole.spatial_factor, latent_height = whole.height / f, latent_width = whole.width / f;
  const PlanRequest band = band_plan_request(whole, bands);
  const int64_t overlap = options.tile_overlap;
  // Where the bands do not fit whole, a family that runs exact tiles shares the one-device plan's exact
  // tiles out among the devices (Note [Exact tiles across devices]); the others cut every band into the
  // fewest blended columns that fit.
  const bool exact = whole.exact_tiles && options.tiling && !options.tile;
  // The column widths to try, widest first: the whole frame, then 2, 3, ... columns down to min_tile.
  std::vector<int64_t> widths;
  if (options.tile) {
    widths.push_back(options.tile->width);
  } else {
    widths.push_back(latent_width);
    for (int64_t n = 2; options.tiling && !exact; ++n) {
      const int64_t width = (latent_width + (n - 1) * overlap + n - 1) / n;  // n columns sharing `overlap`
      if (width < options.min_tile || width <= overlap) break;
      if (width < widths.back()) widths.push_back(width);
    }
  }
  const PlannerOptions one_device = options;
  options.tiling = false;
  options.offload = false;
  std::string refusal;
  for (const int64_t width : widths) {
    if (width < latent_width)
      options.tile = TileSize{band.height / f, width};
    else
      options.tile.reset();
    try {
      Plan plan = plan_run(band, options);
      plan.tiles = width < latent_width
                       ? TileGrid::cover(latent_height, latent_width, {latent_height, width}, overlap)
                       : TileGrid::whole(latent_height, latent_width);
      plan.split = SplitKind::kBands;  // every band cut into the grid's columns, if any
      plan.window = 0;                 // bands run chunk by chunk
      plan.window_store = WindowStore::kDevice;
      return plan;
    } catch (const Error& e) {
      refusal = e.what();
    }
  }
  if (!exact) throw Error(refusal);
  Plan plan = plan_run(whole, one_device);
  if (plan.tiles.exact && plan.tiles.tiled()) plan.tile_devices = bands;
  return plan;
}

}  // namespace vaecodec::core
