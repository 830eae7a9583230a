#include "core/tile_grid.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"

namespace vaecodec::core {
namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

int64_t tiles_along(int64_t extent, int64_t tile, int64_t overlap) {
  if (tile >= extent) return 1;
  return 1 + ceil_div(extent - tile, tile - overlap);
}

int64_t origin(int64_t index, int64_t count, int64_t extent, int64_t tile) {
  if (count <= 1) return 0;
  // Evenly spread, first at 0, last flush with the far edge.
  return (index * (extent - tile) + (count - 1) / 2) / (count - 1);
}

}  // namespace

TileSize parse_tile(const std::string& text) {
  long long w = 0, h = 0;
  char x = 0, extra = 0;
  TileSize t;
  if (std::sscanf(text.c_str(), "%lld%c%lld%c", &w, &x, &h, &extra) == 3 && x == 'x' && w > 0 && h > 0) {
    t.width = w;
    t.height = h;
    return t;
  }
  if (std::sscanf(text.c_str(), "%lld%c", &w, &extra) == 1 && w > 0) {
    t.width = t.height = w;
    return t;
  }
  throw UsageError("--tile " + text +
                   " is not a tile size: write 64 or WIDTHxHEIGHT, e.g. 80x48 (latent pixels)");
}

int64_t TileGrid::row_origin(int64_t r) const {
  return origin(r, rows, latent_height, tile_height);
}

int64_t TileGrid::col_origin(int64_t c) const {
  return origin(c, cols, latent_width, tile_width);
}

std::pair<int64_t, int64_t> TileGrid::part_rows(int64_t r) const {
  return {r * latent_height / rows, (r + 1) * latent_height / rows};
}

std::pair<int64_t, int64_t> TileGrid::part_cols(int64_t c) const {
  return {c * latent_width / cols, (c + 1) * latent_width / cols};
}

TileGrid TileGrid::parts(int64_t latent_height, int64_t latent_width, int64_t rows, int64_t cols) {
  if (rows < 1 || cols < 1 || rows > latent_height || cols > latent_width)
    throw Error("cannot cut " + std::to_string(latent_width) + "x" + std::to_string(latent_height) +
                " latent pixels into " + std::to_string(rows) + "x" + std::to_string(cols) + " tiles");
  TileGrid g = whole(latent_height, latent_width);
  g.rows = rows;
  g.cols = cols;
  g.tile_height = ceil_div(latent_height, rows);
  g.tile_width = ceil_div(latent_width, cols);
  g.exact = g.through_time = true;
  return g;
}

TileGrid TileGrid::cover_through_time(int64_t latent_height, int64_t latent_width, TileSize tile,
                                      int64_t overlap, int64_t context) {
  if (context < 0) throw Error("a tile's statistics context cannot be negative");
  TileGrid g = cover(latent_height, latent_width, tile, overlap);
  g.through_time = true;
  g.context = context;
  return g;
}

TileGrid TileGrid::cover_crop(int64_t latent_height, int64_t latent_width, TileSize tile, int64_t overlap,
                              int64_t margin, bool decode, bool encode) {
  TileGrid g = cover_through_time(latent_height, latent_width, tile, overlap, margin);
  g.crop_decode = decode;
  g.crop_encode = encode;
  return g;
}

std::pair<int64_t, int64_t> TileGrid::tile_rows(int64_t r) const {
  if (exact) return part_rows(r);
  return {row_origin(r), row_origin(r) + tile_height};
}

std::pair<int64_t, int64_t> TileGrid::tile_cols(int64_t c) const {
  if (exact) return part_cols(c);
  return {col_origin(c), col_origin(c) + tile_width};
}

std::pair<int64_t, int64_t> TileGrid::computed_rows(int64_t r) const {
  const auto [begin, end] = tile_rows(r);
  return {std::max<int64_t>(begin - context, 0), std::min(end + context, latent_height)};
}

std::pair<int64_t, int64_t> TileGrid::computed_cols(int64_t c) const {
  const auto [begin, end] = tile_cols(c);
  return {std::max<int64_t>(begin - context, 0), std::min(end + context, latent_width)};
}

TileGrid TileGrid::whole(int64_t latent_height, int64_t latent_width) {
  TileGrid g;
  g.latent_height = g.tile_height = latent_height;
  g.latent_width = g.tile_width = latent_width;
  return g;
}

TileGrid TileGrid::cover(int64_t latent_height, int64_t latent_width, TileSize tile, int64_t overlap) {
  if (tile.height <= 0 || tile.width <= 0) throw Error("a tile needs a positive size");
  TileGrid g = whole(latent_height, latent_width);
  g.tile_height = std::min(tile.height, latent_height);
  g.tile_width = std::min(tile.width, latent_width);
  const bool cut = g.tile_height < latent_height || g.tile_width < latent_width;
  if (!cut) return g;
  if ((g.tile_height < latent_height && g.tile_height <= overlap) ||
      (g.tile_width < latent_width && g.tile_width <= overlap))
    throw UsageError("a tile of " + std::to_string(tile.width) + "x" + std::to_string(tile.height) +
                     " latent pixels is not larger than its overlap of " + std::to_string(overlap) +
                     ": give larger tiles or a smaller overlap");
  g.overlap = overlap;
  g.rows = tiles_along(latent_height, g.tile_height, overlap);
  g.cols = tiles_along(latent_width, g.tile_width, overlap);
  return g;
}

}  // namespace vaecodec::core
