#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace vaecodec::core {

// A spatial tile size in latent pixels.
struct TileSize {
  int64_t height = 0, width = 0;
};
TileSize parse_tile(const std::string& text);  // "64" (square) or "48x80" (WIDTHxHEIGHT), latent pixels

// How a frame is cut into tiles, in latent pixels. Tiles have one size; their origins spread evenly so that
// neighbours share at least `overlap` pixels. 1 x 1 covers the frame: no tiling.
struct TileGrid {
  int64_t latent_height = 0, latent_width = 0;  // the whole frame
  int64_t tile_height = 0, tile_width = 0;
  int64_t overlap = 0;
  int64_t rows = 1, cols = 1;
  // Exact tiles (Note [Exact tiles] in core/trunk.h): the tiles partition the frame, no overlap, no blend;
  // tile_height/width are the largest part's.
  bool exact = false;
  // Tiles through time (Note [Tiles through time] in core/split/exact_tiles.h): exact ones, or (a family
  // whose norms see the whole frame) the blended tiles of cover(), each computing `context` latent pixels
  // around itself that it does not write, for its norms' statistics (Note [Norms of tiles through time]).
  bool through_time = false;
  int64_t context = 0;
  // Crop tiles (Note [Crop tiles] in core/split/exact_tiles.h), for the decode and for the encode: tiles
  // through time that run the whole model on their crop - the tile and `context` latent pixels around it -
  // every norm over that crop.
  bool crop_decode = false, crop_encode = false;
  bool crop(bool encode) const { return encode ? crop_encode : crop_decode; }
  bool tiled() const { return rows * cols > 1; }
  int64_t count() const { return rows * cols; }
  // Origin of row r / column c.
  int64_t row_origin(int64_t r) const;
  int64_t col_origin(int64_t c) const;
  // Exact tiles: the latent rows [first, end) of part r of `rows` near-equal parts, and columns alike.
  std::pair<int64_t, int64_t> part_rows(int64_t r) const;
  std::pair<int64_t, int64_t> part_cols(int64_t c) const;
  static TileGrid parts(int64_t latent_height, int64_t latent_width, int64_t rows, int64_t cols);
  // The whole frame as one tile.
  static TileGrid whole(int64_t latent_height, int64_t latent_width);
  // Tiles of (at most) `tile` with `overlap`; a side at least as large as the frame is not cut.
  static TileGrid cover(int64_t latent_height, int64_t latent_width, TileSize tile, int64_t overlap);
  // The same tiles run through time with `context` latent pixels of statistics around each.
  static TileGrid cover_through_time(int64_t latent_height, int64_t latent_width, TileSize tile,
                                     int64_t overlap, int64_t context);
  // The same tiles as crop tiles for the ops named, each with `margin` latent pixels around it in its crop.
  static TileGrid cover_crop(int64_t latent_height, int64_t latent_width, TileSize tile, int64_t overlap,
                             int64_t margin, bool decode = true, bool encode = true);
  // Tile r, c's rectangle, latent pixels: exact parts, or cover()'s tiles with their overlaps.
  std::pair<int64_t, int64_t> tile_rows(int64_t r) const;
  std::pair<int64_t, int64_t> tile_cols(int64_t c) const;
  // What its trunk computes: the tile and `context` around it, clipped to the frame.
  std::pair<int64_t, int64_t> computed_rows(int64_t r) const;
  std::pair<int64_t, int64_t> computed_cols(int64_t c) const;
};

}  // namespace vaecodec::core
