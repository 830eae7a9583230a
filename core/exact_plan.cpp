// The plans of exact tiles (Note [Exact plans]).
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/plan_model.h"

namespace vaecodec::core::plan_model {
namespace {

// Note [Exact plans]
// A plan of exact tiles (Note [Tiles through time] in core/split/exact_tiles.h) is a grid (rows x cols parts
// of the frame), a chunk length n for the trunk's calls, a window of W latent frames (the whole clip, or
// fewer with the tiles' caches parked in host memory between windows) and where the window's frames wait. Per
// op:
//   device: weights; one tile's cache and activations, scaled from the calibration (Note [Memory model]) by
//           the tile's pixels with its margins; the whole-frame part's working set at latent resolution
//           (kWholeFactor x features x chunk); the window's features (channels x latent pixels x W) and, when
//           not in host memory, the window's frames (3 x temporal_factor x W x pixels); a tile's input and
//           output for one chunk
//   host:   kHostBase, what the caller holds there (PlannerOptions::host_reserved_bytes), the window's
//           frames where they wait there (then the device holds a decode tile's frames of the window, or an
//           encode chunk of whole frames, and host memory two decode tiles' frames on their way into the
//           window) with their pinned blocks' rounding (Note [Pinned blocks] in core/plan_model.cpp), an
//           encode's frames packed where they come so (PlannerOptions::input_packed_bytes), or, for a
//           decode to an 8-bit video (PlannerOptions::output_8bit), the window in 8 bits, one tile's 8-bit
//           frames and the overlap bands' sums (Note [A window held in 8 bits] in
//           core/split/eight_bit_window.h), every tile's cache where windows are shorter than the clip
//   time:   the model's FLOPs times the grid's work (VaeModel::tile_work: the margins' extra pixels, block by
//           block) at the family's calibrated rate, the whole frame's attention (Note [Plan cost]: the
//           whole-frame part runs it untiled), kCallSeconds per model call (every tile and the
//           whole-frame part, once per chunk), and the copies of the window's frames (an encode window once
//           per tile) and parked caches at kCopyRate (on the compute stream: they add up)
//   measured: decode tiles through time (not exact: SeedVR2's) peak above the terms above by a part none of
//           them names yet (Note [Decode tiles through time, measured])
// Crop tiles (Note [Crop tiles] in core/split/exact_tiles.h) have no whole-frame part: no whole-frame working
// set or cache, the window's latents where the features would be, the model's work over each crop (no
// trunk margins beyond it) and the attention of each crop, one model call per tile and chunk; the measured
// part above is kept for their decode too until rows of their own replace it.
constexpr double kWholeFactor = 8;

// Note [Decode tiles through time, measured]
// On the H100 (docs/benchmarks.md, "SeedVR2 on the cards it is run on", released config, bf16, x81), the
// device peaks of SeedVR2's decode tiles through time exceeded the estimate above by 1.05-1.36 GiB at 1080p
// (1x2, 4x1 and 1x5 tiles; the 1x9 tiles of 8 GB ran out of memory past 6.6 GiB against 5.86) and by 3.2 GiB
// at 4K (7x2 tiles), where encode's were within 2%. The rows fit kThroughTimeDecodeBase plus
// kWholeCachePerPixel per latent pixel of the frame, and the second term is the whole-frame part's cache:
// SeedVR2's decoder keeps two frames of history for each of its ten convolutions at latent resolution (the
// middle's and the first up block's, 512 channels), 10240 values per latent pixel, 1.91e-5 GiB in bf16
// against the 1.95e-5 fitted. Those rows kept it on the device while the tiles ran. Now the clip's last
// window drops it before its tiles and earlier windows park it in host memory while theirs run (Note [The
// whole-frame cache ends with the clip] in core/split/exact_tiles.cpp), so the device holds it only while the
// whole-frame part runs: a plan's peak is the larger of that part's (the cache, its working set, the
// window's features) and the tiles' (the base and the rest), and a plan of several windows parks it with
// the tiles' caches (host memory and copies).
constexpr double kThroughTimeDecodeBase = 0.67 * (1 << 30);
constexpr double kWholeCachePerPixel = 1.95e-5 * (1 << 30) / 2;  // bytes per latent pixel and byte of dtype
// Note [Features in host memory, measured]
// A decode window's features in host memory (Note [A window's features in host memory] in
// core/split/exact_tiles.cpp) cost more than their copies: on the H100 the first plans that kept them there
// (host copies of each tile's chunk, paged, one synchronisation each) ran 1.14-1.19x their estimate where
// plans with the features on the device ran 1.03-1.08x, about 7-20 ms per tile and chunk. Each tile's chunk
// now goes up from page-locked memory without stopping the host, and kGatherSeconds is what a gather still
// costs; the planner keeps the features on the device wherever they fit, as the estimate's time then says.
constexpr double kGatherSeconds = 4e-3;
// The device's bytes a pixel while a tile unpacks a frame kept packed: the float32 planes, the upsampled
// chroma and the RGB frame (Note [An encode window as its planes] in io/chunking.cpp).
constexpr double kUnpackBytes = 36;
constexpr int64_t kMinPart = 8;    // latent pixels: a smaller part is nearly all margin
constexpr int64_t kMaxParts = 12;  // per side

struct GridWork {
  double work = 1;       // the grid's trunk work against the whole frame's
  double largest = 0;    // the largest tile's latent pixels with its margins' share (also its crop's input)
  double attention = 0;  // the op's attention per latent frame, seconds: the whole frame's, or every crop's
};

GridWork grid_work(const PlanRequest& request, const TileGrid& g, bool encode) {
  GridWork w;
  const Op op = encode ? Op::kEncode : Op::kDecode;
  const bool crop = g.crop(encode);
  double total = 0;
  for (int64_t r = 0; r < g.rows; ++r)
    for (int64_t c = 0; c < g.cols; ++c) {
      // What the tile's trunk computes: its part, or its tile and norm context (through time); a crop tile's
      // model computes its crop and no more.
      const auto [r0, r1] = g.computed_rows(r);
      const auto [c0, c1] = g.computed_cols(c);
      const Area interior{{r0, r1}, {c0, c1}};
      const double area = static_cast<double>((r1 - r0) * (c1 - c0));
      const double factor = request.tile_work && !crop ? request.tile_work(encode, interior) : 1.0;
      total += factor * area;
      w.largest = std::max(w.largest, factor * area);
      if (crop) w.attention += attention_seconds(request, op, area);
    }
  w.work = total / static_cast<double>(g.latent_height * g.latent_width);
  if (!crop)
    w.attention = attention_seconds(request, op, static_cast<double>(g.latent_height * g.latent_width));
  return w;
}

// Exact tiles: the frame in rows x cols parts of at least kMinPart, or parts of --tile's size.
std::vector<TileGrid> part_grids(const PlannerOptions& options, int64_t lh, int64_t lw) {
  std::vector<TileGrid> grids;
  if (options.tile) {
    grids.push_back(TileGrid::parts(lh, lw,
                                    std::min(lh, ceil_div(lh, std::max<int64_t>(options.tile->height, 1))),
                                    std::min(lw, ceil_div(lw, std::max<int64_t>(options.tile->width, 1)))));
    return grids;
  }
  for (int64_t rows = 1; rows <= std::min(kMaxParts, std::max<int64_t>(lh / kMinPart, 1)); ++rows)
    for (int64_t cols = 1; cols <= std::min(kMaxParts, std::max<int64_t>(lw / kMinPart, 1)); ++cols)
      if (rows * cols > 1) grids.push_back(TileGrid::parts(lh, lw, rows, cols));
  return grids;
}

// Tiles through time whose norms see less than the frame (Note [Norms of tiles through time]): cover()'s
// rows x cols tiles sharing the overlap, each larger than it and at least kMinPart, each with no context and
// with the options' norm context (plan_run chooses: Note [What a plan's norms see] in core/planner.cpp), or
// only the latter where it was given; crop tiles (Note [Crop tiles]) or the whole frame's at latent
// resolution, as the options' tile_norms say for the op.
std::vector<TileGrid> blended_grids(const PlannerOptions& options, int64_t lh, int64_t lw) {
  const bool crop_decode = options.tile_norms != TileNorms::kFrame;
  const bool crop_encode = options.tile_norms == TileNorms::kCrop;
  const int64_t o = options.tile_overlap;
  std::vector<TileSize> sizes;
  if (options.tile) {
    sizes.push_back(*options.tile);
  } else {
    for (int64_t rows = 1; rows <= kMaxParts; ++rows) {
      const int64_t th = rows == 1 ? lh : ceil_div(lh + (rows - 1) * o, rows);
      if (rows > 1 && (th <= o || th < kMinPart)) break;
      for (int64_t cols = 1; cols <= kMaxParts; ++cols) {
        const int64_t tw = cols == 1 ? lw : ceil_div(lw + (cols - 1) * o, cols);
        if (cols > 1 && (tw <= o || tw < kMinPart)) break;
        const TileGrid g = TileGrid::cover(lh, lw, {th, tw}, o);
        if (rows * cols > 1 && g.rows == rows && g.cols == cols) sizes.push_back({th, tw});
      }
    }
  }
  std::vector<int64_t> contexts{options.norm_context_fixed ? options.norm_context : 0};
  if (!options.norm_context_fixed && options.norm_context > 0) contexts.push_back(options.norm_context);
  std::vector<TileGrid> grids;
  for (const TileSize& size : sizes)
    for (int64_t context : contexts) {
      TileGrid g = TileGrid::cover_through_time(lh, lw, size, o, context);
      g.crop_decode = crop_decode;
      g.crop_encode = crop_encode;
      grids.push_back(g);
    }
  return grids;
}

}  // namespace

std::vector<Plan> exact_plans(const PlanRequest& request, const PlannerOptions& options, int64_t min_chunk,
                              int64_t max_chunk, double untiled_seconds) {
  const int64_t f = request.spatial_factor, tf = request.temporal_factor;
  const int64_t lh = request.height / f, lw = request.width / f;
  const double size = static_cast<double>(element_size(request.dtype));
  const double f2 = static_cast<double>(f * f);
  const double latent_pixels = static_cast<double>(lh * lw), pixels = latent_pixels * f2;
  const int64_t clip = request.latent_frames > 0 ? request.latent_frames : 0;
  const double frames_of_clip = clip > 0 ? static_cast<double>(clip) : kAssumedLatentFrames;

  const std::vector<TileGrid> grids =
      request.exact_tiles ? part_grids(options, lh, lw) : blended_grids(options, lh, lw);
  // Windows: the whole clip (when its length is known), and shorter ones that park the caches.
  std::vector<int64_t> windows;
  if (clip > 0) windows.push_back(0);
  for (int64_t w : {16, 8, 4})
    if (clip == 0 || w < clip) windows.push_back(w);

  const std::vector<Op> ops = ops_of(request.op);
  std::vector<Plan> plans;
  for (const TileGrid& g : grids) {
    std::vector<GridWork> work;
    bool all_crop = true;  // every op's tiles are crop tiles: no features anywhere
    for (Op op : ops) {
      work.push_back(grid_work(request, g, op == Op::kEncode));
      all_crop = all_crop && g.crop(op == Op::kEncode);
    }
    for (int64_t n = min_chunk; n <= max_chunk; ++n)
      for (int64_t window : windows)
        for (const WindowStore store :
             {WindowStore::kDevice, WindowStore::kHostFrames, WindowStore::kHostFeatures}) {
          // Features in host memory are for tiles whose norms see less than the frame alone.
          const bool features_off = store == WindowStore::kHostFeatures;
          if (features_off && (g.exact || all_crop)) continue;
          const bool host_window = store != WindowStore::kDevice;
          const double w_frames = window > 0 ? static_cast<double>(window) : frames_of_clip;
          const bool parks = window > 0 && (clip == 0 || window < clip);
          const double window_count = std::ceil(frames_of_clip / w_frames);
          MemoryEstimate e;
          e.weights = request.parameter_count * element_size(request.dtype);
          e.reserved = options.reserved_bytes;
          double cache = 0, activations = 0, io = 0, host_frames = 0, parked = 0, compute = 0, calls = 0,
                 uploads = 0, whole_phase = 0, gathers = 0, rounding = 0;
          for (size_t i = 0; i < ops.size(); ++i) {
            const Coefficients k = coefficients(request, ops[i]);
            const bool encode = ops[i] == Op::kEncode;
            const bool crop = g.crop(encode);
            // Crop tiles read (decode) or write (encode) latents where the others have features.
            const double channels = static_cast<double>(crop     ? request.latent_channels
                                                        : encode ? request.encode_features
                                                                 : request.decode_features);
            const double tile_pixels = work[i].largest * f2;
            cache += k.cache_elements * size * tile_pixels;
            const double whole_set =
                crop ? 0.0 : kWholeFactor * channels * latent_pixels * static_cast<double>(n) * size;
            activations = std::max(
                {activations, k.activation_bytes * tile_pixels * static_cast<double>(tf * n), whole_set});
            const double frames = 3.0 * static_cast<double>(tf) * w_frames * pixels * size;
            // A host window (Note [Windows in host memory] in core/split/exact_tiles.cpp): decode keeps one
            // tile's frames of the window on the device; encode uploads a chunk of whole frames for every
            // tile.
            const double staging = !host_window ? 0.0
                                   : encode     ? 3.0 * static_cast<double>(tf * n) * pixels * size
                                            : 3.0 * static_cast<double>(tf) * w_frames * tile_pixels * size;
            // The window's features; SeedVR2's decode keeps them in host memory with the window's frames
            // (Note [A window's features in host memory] in core/split/exact_tiles.cpp).
            const double features = channels * latent_pixels * w_frames * size;
            const bool host_features = features_off;
            // An encode's features in host memory: each chunk of a tile comes down as it is made, in the
            // dtype the tile writes it (float32 where tiles blend), and waits for a worker to put it in place
            // (Note [An encode window's features in host memory] in core/split/exact_tiles_encode.cpp).
            const double staged_size = std::max(size, 4.0);  // written(): float32 (float64 models: float64)
            const double tile_features =
                host_features && encode ? channels * work[i].largest * static_cast<double>(n) * staged_size
                                        : 0.0;
            // A host window's encode: the chunk as the caller handed it over, and the file pipeline's last
            // frame (kept to pad the clip's end), wait on the device while the window's first tile runs ahead
            // on it (Note [A window's edges stream] in core/split/exact_tiles.h); a device window holds them.
            const double handed = host_window && encode ? staging + 3.0 * pixels * size : 0.0;
            // A host window's encode frames kept packed (Note [Frames kept packed] in core/packed_frames.h):
            // in host memory at their packed bytes; a tile unpacks its chunk frame by frame, through
            // float32 planes and RGB (kUnpackBytes a pixel on the device).
            const bool packed = host_window && encode && options.input_packed_bytes > 0;
            const double packed_frames =
                packed ? options.input_packed_bytes * static_cast<double>(tf) * w_frames * pixels : 0.0;
            io += (packed ? kUnpackBytes * pixels : 0.0);
            io += handed + (host_features ? tile_features : features) + (host_window ? staging : frames) +
                  2.0 * 3.0 * static_cast<double>(tf * n) * tile_pixels * size +
                  channels * work[i].largest * static_cast<double>(n) * size;
            if (!encode && !g.exact) {  // Note [Decode tiles through time, measured]
              const double whole_cache = crop ? 0.0 : kWholeCachePerPixel * size * latent_pixels;
              activations += kThroughTimeDecodeBase;
              whole_phase = whole_cache +
                            kWholeFactor * channels * latent_pixels * static_cast<double>(n) * size +
                            (host_features ? 0.0 : features);
              if (parks) parked += whole_cache;
            }
            if (host_features && encode) {  // the window's and two chunks', down chunk by chunk, up once
              host_frames += features + 2.0 * tile_features;
              uploads += features * work[i].work * staged_size / size;
              rounding += 2.0 * (pinned_block(tile_features) - tile_features);
            } else if (host_features) {  // in host memory, down once and up once with the tiles' margins
              host_frames += features;
              uploads += features * work[i].work;
              gathers += static_cast<double>(g.count()) * std::ceil(frames_of_clip / static_cast<double>(n));
            }
            // A decode's window and two tiles' frames on their way into it (Note [Windows in host memory]).
            // Held in 8 bits (Note [A window held in 8 bits] in core/split/eight_bit_window.h): the window in
            // paged memory, one tile's frames in a buffer of their size, and the sums of the overlap bands.
            const bool eight = host_window && !encode && options.output_8bit && !g.exact;
            if (eight) {
              const double bands =
                  static_cast<double>(((g.rows - 1) * lw + (g.cols - 1) * lh) * g.overlap) * f2;
              host_frames +=
                  (frames + staging) / size + 3.0 * static_cast<double>(tf) * w_frames * bands * size;
            } else if (packed) {
              host_frames += packed_frames;
            } else {
              host_frames += host_window ? frames + (encode ? 0.0 : 2.0 * staging) : 0.0;
            }
            // A decode window's pinned block rounds up (Note [Pinned blocks] in core/plan_model.cpp), and so
            // does each tile's frames; an encode window's chunks are locked at their own size, and so are an
            // 8-bit window's buffers.
            if (host_window && !encode && !eight) {
              rounding += pinned_block(frames) - frames + 2.0 * (pinned_block(staging) - staging);
            }
            uploads += !host_window || !encode ? 0.0
                       : packed                ? packed_frames * static_cast<double>(g.count())
                                               : frames * static_cast<double>(g.count() - 1);
            if (parks) parked += k.cache_elements * size * pixels * work[i].work;
            compute += k.flops / k.rate * pixels * static_cast<double>(tf) * frames_of_clip * work[i].work;
            compute += work[i].attention * frames_of_clip;  // the whole frame's, or every crop's
            calls += static_cast<double>(g.count() + (crop ? 0 : 1)) *
                     std::ceil(frames_of_clip / static_cast<double>(n));
          }
          // The whole-frame part's own peak, where it is above the tiles' (Note [Decode tiles through time,
          // measured]).
          activations += std::max(0.0, whole_phase - (cache + activations + io));
          e.cache = static_cast<int64_t>(cache);
          e.activations = static_cast<int64_t>(activations);
          e.io = static_cast<int64_t>(io);
          e.host_cache = static_cast<int64_t>(parked);
          e.host =
              kHostBase + options.host_reserved_bytes + static_cast<int64_t>(host_frames + parked + rounding);
          const double copies = (host_frames * window_count + uploads * window_count +
                                 2.0 * parked * std::max(window_count - 1, 0.0)) /
                                kCopyRate;
          Plan p;
          p.op = request.op;
          p.chunk = n;
          p.tiles = g;
          // A window of the whole frame runs through time too; the whole clip in one runs chunk by chunk.
          p.split = g.tiled() || window != 0 ? SplitKind::kExactTiles : SplitKind::kWhole;
          p.window = window;
          p.window_store = store;
          p.budget_bytes = options.budget_bytes;
          p.budget_note = options.budget_note;
          p.estimate = e;
          p.seconds = compute + calls * kCallSeconds + copies + gathers * kGatherSeconds;
          p.cost = p.seconds / untiled_seconds;
          plans.push_back(p);
        }
  }
  return plans;
}

}  // namespace vaecodec::core::plan_model
