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

SplitKind split_kind(const ChunkOptions& chunks, const TileGrid& grid) {
  // Tiles through time where the plan asks for them: exact parts, or SeedVR2's blended tiles, on a model
  // whose trunks are local; with bands, exact tiles are shared out among their places.
  if (chunks.runs_through_time()) return SplitKind::kExactTiles;
  if (chunks.bands.size() >= 2) return SplitKind::kBands;  // each band cut into the grid's columns, if any
  return grid.tiled() ? SplitKind::kBlendedTiles : SplitKind::kWhole;
}

}  // namespace

std::unique_ptr<Split> make_split(VaeModel& model, Device& device, Op op, const ChunkOptions& chunks,
                                  int64_t latent_height, int64_t latent_width) {
  if (op != Op::kEncode && op != Op::kDecode) throw Error("a run encodes or decodes: " + op_name(op));
  const TileGrid grid = resolve_grid(chunks.tiles, latent_height, latent_width);
  const SplitKind kind = split_kind(chunks, grid);
  // Note [Decoders that look ahead]: tiles and bands run their own chunks, which do not yet end the clip.
  if (op == Op::kDecode && model.info().decode_lag > 0 && kind != SplitKind::kWhole)
    throw Error(model.info().family +
                ": its decoder looks ahead in time; decode tiles and bands are not implemented for it yet");
  switch (kind) {
    case SplitKind::kExactTiles:
      return std::make_unique<ExactTiles>(model, device, grid, op, chunks.latent_frames, chunks.window,
                                          chunks.host_window, ExactTiles::Hooks{chunks.progress, chunks.emit},
                                          chunks.bands);  // a split whose bands do not fit
    case SplitKind::kBands:
      if (grid.tiled() && chunks.offload)
        throw Error(
            "a run split across devices keeps its columns' caches on the devices: it does not offload them");
      return std::make_unique<Bands>(chunks.bands, device, op, grid, chunks.latent_frames);
    case SplitKind::kBlendedTiles:
      return std::make_unique<BlendedTiles>(model, device, grid, op, chunks.offload, chunks.latent_frames);
    case SplitKind::kWhole:
      break;
  }
  return std::make_unique<Whole>(model, device, op, chunks.latent_frames);
}

}  // namespace vaecodec::core
