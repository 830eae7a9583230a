// The kinds of split, chosen and made (Note [Splits] in core/split/split.h).
#include <memory>
#include <string>

#include "core/error.h"
#include "core/split/bands.h"
#include "core/split/blended_tiles.h"
#include "core/split/exact_tiles.h"
#include "core/split/split.h"
#include "core/split/whole.h"

namespace vaecodec::core {

namespace {

// The options must fit the kind their plan names: a plan is made for one kind, and a hand-made ChunkOptions
// that says otherwise is a caller's mistake, not a choice to make here (ExactTiles checks its own grid).
void check_kind(const ChunkOptions& chunks, const TileGrid& grid) {
  switch (chunks.kind) {
    case SplitKind::kWhole:
      if (grid.tiled()) throw Error("a plan of kind whole has tiles that cut the frame");
      if (grid.through_time && chunks.window != 0) throw Error("a plan of kind whole has windows");
      return;
    case SplitKind::kBlendedTiles:
      if (grid.through_time) throw Error("a plan of kind blended tiles has tiles through time");
      return;
    case SplitKind::kBands:
      if (chunks.bands.size() < 2) throw Error("a plan of kind bands has fewer than two places");
      if (grid.through_time) throw Error("a plan of kind bands has tiles through time");
      return;
    case SplitKind::kExactTiles:
      return;
  }
}

}  // namespace

torch::Tensor Split::push_packed(std::shared_ptr<const PackedFrames>) {
  throw Error("this split does not keep packed frames");
}

bool keeps_packed_frames(Op op, const ChunkOptions& chunks) {
  return op == Op::kEncode && chunks.kind == SplitKind::kExactTiles &&
         chunks.window_store != WindowStore::kDevice;
}

std::unique_ptr<Split> make_split(VaeModel& model, Device& device, Op op, const ChunkOptions& chunks,
                                  int64_t latent_height, int64_t latent_width) {
  if (op != Op::kEncode && op != Op::kDecode) throw Error("a run encodes or decodes: " + op_name(op));
  const TileGrid grid = resolve_grid(chunks.tiles, latent_height, latent_width);
  check_kind(chunks, grid);
  const SplitKind kind = chunks.kind;
  // Every kind ends the caches it runs a decoder that looks ahead with when the clip ends: Note [Held-back
  // frames of a split] (blended_tiles.cpp), Note [Held-back frames of exact tiles] (exact_tiles.cpp).
  std::unique_ptr<ChunkedSplit> chunked;
  switch (kind) {
    case SplitKind::kExactTiles:  // reports its own progress, inside its windows
      return std::make_unique<ExactTiles>(model, device, grid, op, chunks.latent_frames, chunks.window,
                                          chunks.window_store,
                                          ExactTiles::Hooks{chunks.progress, chunks.emit, chunks.emit_8bit},
                                          chunks.bands);  // a split whose bands do not fit
    case SplitKind::kBands:
      if (grid.tiled() && chunks.offload)
        throw Error(
            "a run split across devices keeps its columns' caches on the devices: it does not offload them");
      chunked = std::make_unique<Bands>(chunks.bands, device, op, grid, chunks.latent_frames);
      break;
    case SplitKind::kBlendedTiles:
      if (grid.tiled()) {  // a grid that does not cut this frame runs it whole
        chunked =
            std::make_unique<BlendedTiles>(model, device, grid, op, chunks.offload, chunks.latent_frames);
        break;
      }
      [[fallthrough]];
    case SplitKind::kWhole:
      chunked = std::make_unique<Whole>(
          model, device, op, chunks.latent_frames,
          chunks.offload ? std::optional<int64_t>(chunks.resident_cache) : std::nullopt);
      break;
  }
  chunked->report_to(chunks.progress);
  return chunked;
}

}  // namespace vaecodec::core
