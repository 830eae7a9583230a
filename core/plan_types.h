#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/memory_calibration.h"
#include "core/op.h"
#include "core/option_spelling.h"
#include "core/tile_grid.h"
#include "core/trunk.h"
#include "core/vae_model.h"

namespace vaecodec::core {

// The planner's requests, options and plans (core/planner.h plans them).

// How tiles through time that are not exact take their norms' statistics (PlannerOptions::tile_norms): crop
// tiles for the decode and frame tiles for the encode (auto), crop tiles for both, frame tiles for both.
enum class TileNorms { kAuto, kCrop, kFrame };
std::string tile_norms_name(TileNorms norms);                        // "auto", "crop", "frame"
std::optional<TileNorms> parse_tile_norms(const std::string& text);  // nullopt: none of those

// What the planner may choose from. Presets and the command line fill it; the defaults plan for no budget.
struct PlannerOptions {
  int64_t budget_bytes = 0;  // peak device memory the run must stay under; 0: no budget
  int64_t max_chunk = 8;     // the largest number of latent frames per model call the planner may pick
  int64_t chunk = 0;         // a fixed chunk length (--chunk); 0: the planner picks
  bool tiling = true;        // spatial tiles are allowed when nothing untiled fits
  int64_t tile_overlap = 8;  // latent pixels shared by neighbouring tiles (Note [Tile blending])
  // Tiles through time whose norms see the frame (Note [Norms of tiles through time] in
  // core/split/exact_tiles.h): the latent pixels each tile computes around itself, beyond the overlap it
  // writes, for its norms.
  int64_t norm_context = 8;
  // The context was given (--norm-context, vaecodec.load()'s norm_context): tiles through time take it, not
  // the planner's choice between none and it.
  bool norm_context_fixed = false;
  // What the norms of tiles through time that are not exact (SeedVR2's) take their statistics over: each
  // tile's crop, the whole model running on it (Note [Crop tiles] in core/split/exact_tiles.h), or the whole
  // frame at latent resolution and the tile with its context above it (Note [Norms of tiles through
  // time]). By default (auto) crop tiles decode and frame tiles encode, each the closer to the untiled run
  // on a trained SeedVR2 (docs/benchmarks.md, "crop tiles"). --tile-norms, vaecodec.load()'s tile_norms.
  TileNorms tile_norms = TileNorms::kAuto;
  int64_t min_tile = 32;         // the smallest tile side the planner tries, latent pixels
  bool offload = true;           // tile caches may wait in host memory between visits when they do not fit
  std::optional<TileSize> tile;  // a fixed tile size (--tile), overriding the planner's
  int64_t reserved_bytes = 0;    // device memory held outside the run, e.g. bench's resident clip
  // What reserved_bytes holds, for a refusal that counts it (e.g. "bench's clip on the device; ..."); empty:
  // the refusal does not name it.
  std::string reserved_note;
  // Host memory held outside the run: a file run's reader, writer and video encoder (Note [A file run's host
  // memory] in io/run_plan.cpp), counted in every plan's host estimate.
  int64_t host_reserved_bytes = 0;
  // A decode's frames go to an 8-bit video: a window of tiles through time in host memory waits as 8-bit RGB
  // (Note [A window held in 8 bits] in core/split/eight_bit_window.h).
  bool output_8bit = false;
  // An encode's frames may come packed, at these bytes a pixel (the reader's 8-bit Y'CbCr planes: 1.5 for
  // 4:2:0), and a window of tiles through time in host memory keeps them so (Note [Frames kept packed] in
  // core/packed_frames.h); 0: they come as RGB.
  double input_packed_bytes = 0;
  // The share of the budget kept free for the allocator's fragmentation: plans are made for the rest.
  double margin = 0.15;
  // Where the budget comes from when it was not given (e.g. "free of 79.2 GiB"), for the plan line.
  std::string budget_note;
  // Host memory the run may keep (Note [Host memory budget]): the window's frames, parked caches; 0: none
  // set (every plan fits). host_budget_note says where it comes from.
  int64_t host_budget_bytes = 0;
  std::string host_budget_note;
  bool host_budget_given = false;  // the user's (--host-memory): a plan it cannot hold is a usage error
  // A budget larger than the device's free memory is planned for anyway (--vram-force), not refused.
  bool budget_forced = false;
  // The budget is only what happens to be free (none was given): where the plan of a run without a budget
  // fits in it, that plan is taken, so a GPU with room runs as it always has; only less room makes the
  // planner trade speed for memory.
  bool budget_is_ceiling = false;
  // How the front end names the options the planner's refusals advise (Note [Option spellings] in
  // core/option_spelling.h).
  OptionSpelling spelling;
};

// The run a plan is for, made by core::plan_request (core/plan_for.h, Note [One planning entry]).
struct PlanRequest {
  std::string family;  // ModelInfo::family
  int64_t spatial_factor = 8;
  int64_t temporal_factor = 4;
  int64_t latent_channels = 16;
  int64_t parameter_count = 0;                         // weights on the device
  int64_t encode_attention = 0, decode_attention = 0;  // ModelInfo's
  Op op = Op::kDecode;
  int64_t width = 0, height = 0;  // the frame the model sees (padded), pixels
  torch::ScalarType dtype = torch::kBFloat16;
  // The family's measured peaks (ModelFamily::calibration): at least one row for each of encode and decode.
  std::vector<MemoryCalibration> calibration;
  int64_t latent_frames = 0;  // the clip's length, 0 when not known
  // Exact tiles (Note [Exact tiles] in core/trunk.h): whether the model runs them, or (SeedVR2) tiles through
  // time whose norms see less than the frame (Note [Norms of tiles through time]); the channels of its
  // features per op, and a tile's work with its margins against its interior's (VaeModel::tile_work).
  bool exact_tiles = false;
  bool tiles_through_time = false;
  int64_t encode_features = 0, decode_features = 0;
  std::function<double(bool encode, const Area& interior)> tile_work;
};

// Estimated peak device memory of a run, by part (Note [Memory model]).
struct MemoryEstimate {
  int64_t weights = 0;      // parameters
  int64_t cache = 0;        // causal caches on the device (every tile's, or three tiles' when offloaded)
  int64_t activations = 0;  // the largest model call's working set
  int64_t io = 0;           // the chunk's input and output, and the blend accumulator when tiled
  int64_t reserved = 0;     // PlannerOptions::reserved_bytes
  int64_t host_cache = 0;   // caches waiting in host memory (offloaded or parked), not part of total()
  int64_t host = 0;         // everything the run keeps in host memory: caches, the window's frames, a base
  int64_t total() const { return weights + cache + activations + io + reserved; }
};

// Where a plan's chunks run (Note [Splits] in core/split/split.h): the model over the whole frame, blended
// tiles chunk by chunk, bands across devices, or tiles through time (exact, or SeedVR2's blended ones). The
// planner names it; core::make_split makes what it names.
enum class SplitKind { kWhole, kBlendedTiles, kBands, kExactTiles };
std::string split_kind_name(SplitKind kind);  // "whole", "blended tiles", "bands", "tiles through time"

// Where a window of tiles through time waits while its tiles run: on the device; its frames in host memory
// (Note [Windows in host memory] in core/split/exact_tiles.cpp); or, decoding tiles that are not exact, its
// frames and the features its tiles read (Note [A window's features in host memory] there).
enum class WindowStore { kDevice, kHostFrames, kHostFeatures };

// What the planner chose.
struct Plan {
  Op op = Op::kDecode;
  int64_t chunk = 1;  // latent frames per model call
  SplitKind split = SplitKind::kWhole;
  TileGrid tiles;
  bool offload = false;  // tile caches live in host memory between visits; untiled: the cache streams
  // Untiled with offload: the cache's bytes that stay on the device, the rest streamed slot by slot (Note
  // [Caches streamed slot by slot] in core/split/cache_stream.h).
  int64_t resident_cache = 0;
  // Exact tiles (tiles.exact): latent frames per window (0: the whole clip) and where its frames wait.
  int64_t window = 0;
  WindowStore window_store = WindowStore::kDevice;
  bool host_window() const { return window_store != WindowStore::kDevice; }
  bool host_features() const { return window_store == WindowStore::kHostFeatures; }
  // A split across devices whose bands do not fit whole: the exact tiles are shared out among this many
  // devices (Note [Exact tiles across devices] in core/split/exact_tiles.h); 1 otherwise.
  int64_t tile_devices = 1;
  int64_t budget_bytes = 0;
  std::string budget_note;  // PlannerOptions::budget_note
  MemoryEstimate estimate;
  double cost = 1;     // estimated time against the untiled plan's (Note [Plan cost])
  double seconds = 0;  // estimated time of the clip (or of 21 latent frames when its length is unknown)
  int64_t host_budget_bytes = 0;
  std::string host_budget_note;
  std::string calibration;      // where the coefficients come from
  std::string summary() const;  // one line for stderr
  nlohmann::json to_json() const;
  // Which tiles run ("untiled", "exact", "crop", "through time", "blended") and what their norms'
  // statistics see.
  std::string tile_kind() const;
  // Whether the tiles of `encode`'s op are crop tiles where the plan runs that op (true where it does not).
  bool crop_for(bool encode) const;
  std::string norm_statistics() const;
};

}  // namespace vaecodec::core
