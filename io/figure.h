#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace vaecodec::io {

// Note [Figures]
// A chart is described once, as lines and texts on a pixel grid, and written either as SVG (text, exact: its
// strings are the figure's) or as PNG: the lines drawn into an RGB24 image here, the texts by FFmpeg's
// drawtext filter (libfreetype, the font found through fontconfig: DejaVu Sans, Debian's fonts-dejavu-core,
// or what fontconfig offers in its place), the image encoded by libavcodec's PNG encoder. No plotting
// library is needed, and FFmpeg's own text rendering is the one a user of ffmpeg already has.

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};

struct Figure {
  enum class Anchor { kStart, kMiddle, kEnd };  // where `x` is along the text
  struct Line {
    double x0, y0, x1, y1;
    Rgb colour;
    int width = 1;
  };
  struct Text {
    double x, y;  // y: the top of the text's line
    std::string text;
    int size = 16;  // pixels
    Rgb colour;
    Anchor anchor = Anchor::kStart;
  };
  int width = 0, height = 0;
  Rgb background{255, 255, 255};
  std::vector<Line> lines;  // drawn in order, texts over them
  std::vector<Text> texts;
};

// The figure as an SVG document.
std::string figure_svg(const Figure& figure);
// The figure as PNG bytes; `path` names the file in errors (a missing font, an encoder that fails).
std::string figure_png(const Figure& figure, const std::filesystem::path& path);

}  // namespace vaecodec::io
