#include "core/planner.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/sizes.h"

namespace vaecodec::core {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Note [Plan cost]
// The planner ranks the plans that fit by a time model, in seconds per latent frame:
//   compute  = the model's FLOPs for the tiles' pixels (overlaps count twice) at kComputeRate, plus
//              kCallSeconds per model call (one per tile per chunk)
//   transfer = offloaded only: every tile's cache goes up and comes back once per chunk, so
//              (host cache) / chunk each way at kCopyRate; the two directions run on their own streams,
//              beside the model (Note [Offloaded caches]), so the plan takes the longer of compute and
//              transfer and kOverlapLoss of the shorter (copies and kernels share the memory bus and the
//              host's cores)
// The rates are the H100's (Wan2.1 decode runs at about 265 TFLOP/s; the offloaded plans' extra time measured
// 37-40 GB/s of cache copies, docs/benchmarks.md). Only their ratio matters for the choice, and consumer
// cards have a similar one (less compute, and PCIe 4.0 instead of 5.0). The model is coarse on purpose: it
// only has to tell plans apart whose costs differ by tens of percent (tile overlap, cache copies), and where
// two plans cost within kCostTolerance of each other the one with the smaller peak wins.
constexpr double kComputeRate = 250e12;  // FLOP/s
constexpr double kCopyRate = 35e9;       // bytes/s, host <-> device
constexpr double kCallSeconds = 2e-3;    // fixed cost of one model call
constexpr double kOverlapLoss = 0.3;
constexpr double kCostTolerance = 0.03;

// Note [Memory model]
// The peak device memory of a run, in parts (MemoryEstimate):
//   weights     = parameters x dtype size (the whole model: encoder and decoder are loaded together)
//   cache       = cache_elements x dtype size x the pixels of every tile (each carries its own causal cache;
//                 offloaded, three tiles': Note [Offloaded caches]), summed over encoder and decoder for a
//                 round trip
//   activations = a x (pixels of one tile) x (frames in flight: temporal_factor x chunk), the largest model
//                 call's working set (the larger of encoder and decoder for a round trip)
//   io          = the chunk's input and output in the model dtype, and a float32 accumulator when tiled
//   reserved    = what the caller holds on the device besides the run (bench keeps the whole clip there)
// cache_elements is structural: the channels x history frames of every causal layer, per output pixel. It
// does not depend on the GPU and is checked against the model's real cache on the CPU
// (tests/test_planner.cpp). `a` is calibrated from one measured peak per (family, op, dtype): the
// measurement's other parts are subtracted and the rest divided by its pixels and frames in flight.
// Everything scales linearly in pixels and chunk length; that is the assumption the GPU runs check
// (docs/memory.md).
int64_t element_size(torch::ScalarType dtype) {
  return static_cast<int64_t>(c10::elementSize(dtype));
}

// The calibration row for a single op (encode or decode), with a note on how it applies.
struct Coefficients {
  double cache_elements = 0;    // per pixel
  double activation_bytes = 0;  // per pixel and frame in flight, in the request's dtype
  double flops = 0;             // per pixel and frame
  std::string note;
};

Coefficients coefficients(const PlanRequest& request, Op op) {
  // Every registered family has a row for each op (register_model_family checks it) and the request carries
  // them: the request's dtype, else one scaled by element size from the family's own measurement.
  const MemoryCalibration* row = nullptr;
  std::string note;
  for (const auto& c : request.calibration)
    if (c.op == op && c.dtype == request.dtype) row = &c;
  if (row) note = row->source;
  if (!row) {
    for (const auto& c : request.calibration)
      if (c.op == op && (!row || c.dtype == torch::kBFloat16)) row = &c;
    if (!row) throw Error("no memory calibration of " + op_name(op) + " for " + request.family);
    note = std::string("derived from ") +
           (row->dtype == torch::kBFloat16 ? "bf16" : c10::toString(row->dtype)) + " (" + row->source + ")";
  }
  Coefficients k;
  k.cache_elements = row->cache_elements;
  k.note = note;
  // Split the measured peak of the calibration run into its parts and keep what is left for activations.
  const double size = static_cast<double>(element_size(row->dtype));
  const double pixels = static_cast<double>(row->width * row->height);
  const double weights = static_cast<double>(row->parameters) * size;
  const double cache = row->cache_elements * size * pixels;
  const double frames = static_cast<double>(request.temporal_factor * row->chunk);
  const double io = (3.0 + 3.0) * frames * pixels * size;  // the chunk in and out, one frame set each
  const double rest = row->peak_gib * kGiB - row->resident_gib * kGiB - weights - cache - io;
  k.activation_bytes =
      std::max(rest, 0.0) / (pixels * frames) * (static_cast<double>(element_size(request.dtype)) / size);
  k.flops = row->tflop * 1e12 / (pixels * static_cast<double>(row->frames));
  return k;
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Sum of the tiles' pixels (with overlaps), in latent pixels.
int64_t tiled_area(const TileGrid& g) {
  return g.count() * g.tile_height * g.tile_width;
}

}  // namespace

PlanRequest PlanRequest::of(const ModelInfo& info, std::vector<MemoryCalibration> calibration,
                            int64_t parameter_count, Op op, int64_t width, int64_t height,
                            torch::ScalarType dtype) {
  PlanRequest r;
  r.calibration = std::move(calibration);
  r.family = info.family;
  r.spatial_factor = info.spatial_factor;
  r.temporal_factor = info.temporal_factor;
  r.latent_channels = info.latent_channels;
  r.parameter_count = parameter_count;
  r.op = op;
  r.width = width;
  r.height = height;
  r.dtype = dtype;
  return r;
}

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

// The model's FLOPs per pixel and frame of the request (both networks for a round trip).
double flops_per_pixel(const PlanRequest& request) {
  double flops = 0;
  for (Op op : {Op::kEncode, Op::kDecode})
    if (request.op == op || request.op == Op::kRoundtrip) flops += coefficients(request, op).flops;
  return flops;
}

// The plan's time per latent frame (Note [Plan cost]); `flops` from flops_per_pixel.
double plan_cost(const PlanRequest& request, double flops, int64_t chunk, const TileGrid& tiles,
                 const MemoryEstimate& estimate) {
  const double f2 = static_cast<double>(request.spatial_factor * request.spatial_factor);
  const double pixels = static_cast<double>(tiled_area(tiles)) * f2;
  const double frames = static_cast<double>(request.temporal_factor);
  const double compute = flops * pixels * frames / kComputeRate +
                         kCallSeconds * static_cast<double>(tiles.count()) / static_cast<double>(chunk);
  const double transfer = static_cast<double>(estimate.host_cache) / static_cast<double>(chunk) / kCopyRate;
  return std::max(compute, transfer) + kOverlapLoss * std::min(compute, transfer);
}

// Note [Planner]
// Every candidate - the whole frame or a grid of tiles (every rows x cols split whose tiles are at least
// min_tile), each chunk length up to max_chunk, caches on the device or offloaded - gets a memory estimate
// (Note [Memory model]) and a time (Note [Plan cost]). Of those whose estimate fits the usable part of the
// budget, the cheapest wins; within kCostTolerance of it, the smallest peak. So the whole frame wins whenever
// it fits (tiles only add work), chunks stay at one latent frame unless offloaded copies make longer ones
// pay, and a plan with few wide tiles and offloaded caches competes fairly with one of many small tiles whose
// caches all stay on the device. Temporal chunks never cut the causal cache, so none of this changes the
// result except the spatial tiles' blend (Note [Tile blending]).
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
  if (options.tile_overlap < 0 || options.tile_overlap > kMaxFrameSide)
    throw Error("cannot plan with a tile overlap of " + std::to_string(options.tile_overlap) +
                " latent pixels: at most " + std::to_string(kMaxFrameSide));
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

  std::vector<TileGrid> grids;
  if (options.tile) {
    grids.push_back(TileGrid::cover(lh, lw, *options.tile, options.tile_overlap));
  } else {
    grids.push_back(TileGrid::whole(lh, lw));
    if (options.tiling) {
      // Every rows x cols split whose tiles are at least min_tile (or the frame) on each side.
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
  }

  const double flops = flops_per_pixel(request);
  const double untiled_cost = [&] {
    const TileGrid whole = TileGrid::whole(lh, lw);
    return plan_cost(request, flops, 1, whole,
                     estimate_memory(request, 1, whole, false, options.reserved_bytes));
  }();
  std::vector<Plan> plans;
  for (bool offload : {false, true}) {
    if (offload && !options.offload) break;
    for (const TileGrid& g : grids) {
      if (offload && !g.tiled()) continue;  // one tile: its cache is always in use
      for (int64_t n = min_chunk; n <= max_chunk; ++n) {
        Plan p;
        p.op = request.op;
        p.chunk = n;
        p.tiles = g;
        p.offload = offload;
        p.budget_bytes = options.budget_bytes;
        p.budget_note = options.budget_note;
        p.estimate = estimate_memory(request, n, g, offload, options.reserved_bytes);
        p.cost = plan_cost(request, flops, n, g, p.estimate) / untiled_cost;
        plans.push_back(p);
      }
    }
  }
  return plans;
}

}  // namespace

Plan plan_run(const PlanRequest& request, const PlannerOptions& options) {
  const int64_t budget = options.budget_bytes;
  // The allocator caps reserved memory, which exceeds the allocated peak the model estimates by the
  // fragmentation of its cached blocks: plan to the budget less the margin.
  const auto usable = static_cast<int64_t>(static_cast<double>(budget) * (1.0 - options.margin));
  if (options.budget_is_ceiling && budget > 0) {
    PlannerOptions unbudgeted = options;
    unbudgeted.budget_bytes = 0;
    unbudgeted.budget_is_ceiling = false;
    Plan as_without = plan_run(request, unbudgeted);
    if (as_without.estimate.total() <= usable) {
      as_without.budget_bytes = budget;
      as_without.budget_note = options.budget_note;
      return as_without;
    }
  }
  std::vector<Plan> fits;
  std::optional<Plan> smallest;
  for (const Plan& p : candidate_plans(request, options)) {
    if (budget <= 0 || p.estimate.total() <= usable) fits.push_back(p);
    if (!smallest || p.estimate.total() < smallest->estimate.total()) smallest = p;
  }
  if (!fits.empty()) {
    double cheapest = fits.front().cost;
    for (const Plan& p : fits) cheapest = std::min(cheapest, p.cost);
    const Plan* best = nullptr;  // the smallest peak among the plans within the tolerance of the cheapest
    for (const Plan& p : fits)
      if (p.cost <= cheapest * (1 + kCostTolerance) && (!best || p.estimate.total() < best->estimate.total()))
        best = &p;
    Plan plan = *best;
    plan.calibration = coefficients(request, request.op == Op::kRoundtrip ? Op::kDecode : request.op).note;
    return plan;
  }
  std::ostringstream s;
  s << op_name(request.op) << " of " << request.width << "x" << request.height << " does not fit in "
    << format_size(budget) << (options.budget_note.empty() ? "" : " (" + options.budget_note + ")");
  if (smallest)
    s << ": the smallest plan (chunk " << smallest->chunk << ", "
      << (smallest->tiles.tiled() ? std::to_string(smallest->tiles.count()) + " tiles" : "untiled")
      << (smallest->offload ? ", caches offloaded" : "") << ") needs "
      << format_size(smallest->estimate.total()) << "; give --vram "
      << std::ceil(smallest->estimate.total() / (1.0 - options.margin) / kGiB * 10) / 10 << "G or more";
  if (!options.tiling && !options.tile) s << ", or allow tiling";
  throw Error(s.str());
}

int64_t smallest_budget(const PlanRequest& request, const PlannerOptions& options) {
  int64_t smallest = 0;
  for (const Plan& p : candidate_plans(request, options))
    if (smallest == 0 || p.estimate.total() < smallest) smallest = p.estimate.total();
  return static_cast<int64_t>(std::ceil(static_cast<double>(smallest) / (1.0 - options.margin)));
}

std::string Plan::summary() const {
  std::ostringstream s;
  s << "plan: " << op_name(op) << " chunk " << chunk << " latent frame" << (chunk == 1 ? "" : "s") << ", ";
  if (tiles.tiled())
    s << tiles.rows << "x" << tiles.cols << " tiles of " << tiles.tile_width << "x" << tiles.tile_height
      << " latent px (overlap " << tiles.overlap << ")" << (offload ? ", caches offloaded to host" : "");
  else
    s << "untiled " << tiles.latent_width << "x" << tiles.latent_height << " latent px";
  s << "; estimated peak " << format_size(estimate.total());
  if (budget_bytes > 0)
    s << " of " << format_size(budget_bytes) << " budget"
      << (budget_note.empty() ? "" : " (" + budget_note + ")");
  if (cost > 1.005) s << ", about " << std::fixed << std::setprecision(1) << cost << "x the untiled time";
  return s.str();
}

nlohmann::json Plan::to_json() const {
  nlohmann::json tile_json = {{"rows", tiles.rows},
                              {"cols", tiles.cols},
                              {"tile_width", tiles.tile_width},
                              {"tile_height", tiles.tile_height},
                              {"overlap", tiles.overlap},
                              {"latent_width", tiles.latent_width},
                              {"latent_height", tiles.latent_height}};
  return {{"op", op_name(op)},
          {"chunk", chunk},
          {"tiled", tiles.tiled()},
          {"tiles", tile_json},
          {"offload", offload},
          {"budget_bytes", budget_bytes},
          {"budget_note", budget_note},
          {"estimate_bytes", estimate.total()},
          {"relative_time", cost},
          {"estimate",
           {{"weights", estimate.weights},
            {"cache", estimate.cache},
            {"activations", estimate.activations},
            {"io", estimate.io},
            {"reserved", estimate.reserved},
            {"host_cache", estimate.host_cache}}},
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
  // The column widths to try, widest first: the whole frame, then 2, 3, ... columns down to min_tile.
  std::vector<int64_t> widths;
  if (options.tile) {
    widths.push_back(options.tile->width);
  } else {
    widths.push_back(latent_width);
    for (int64_t n = 2; options.tiling; ++n) {
      const int64_t width = (latent_width + (n - 1) * overlap + n - 1) / n;  // n columns sharing `overlap`
      if (width < options.min_tile || width <= overlap) break;
      if (width < widths.back()) widths.push_back(width);
    }
  }
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
      return plan;
    } catch (const Error& e) {
      refusal = e.what();
    }
  }
  throw Error(refusal);
}

}  // namespace vaecodec::core
