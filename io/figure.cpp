#include "io/figure.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

extern "C" {
#include <libavfilter/buffersink.h>
#include <libavfilter/buffersrc.h>
#include <libavutil/opt.h>
}

#include "core/error.h"
#include "io/ffmpeg_common.h"

namespace vaecodec::io {
namespace {

std::string hex(Rgb c) {
  char text[8];
  std::snprintf(text, sizeof(text), "#%02x%02x%02x", c.r, c.g, c.b);
  return text;
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", v);
  return text;
}

std::string xml_escaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// The RGB24 image of the figure's lines, in an AVFrame the filter graph takes.
FramePtr draw_lines(const Figure& figure, const std::filesystem::path& path) {
  FramePtr frame = make_frame();
  frame->format = AV_PIX_FMT_RGB24;
  frame->width = figure.width;
  frame->height = figure.height;
  frame->pts = 0;
  check_av(av_frame_get_buffer(frame.get(), 0), "cannot allocate the image of", path);
  auto set = [&](int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= figure.width || y >= figure.height) return;
    uint8_t* p = frame->data[0] + size_t(y) * size_t(frame->linesize[0]) + size_t(x) * 3;
    p[0] = c.r;
    p[1] = c.g;
    p[2] = c.b;
  };
  for (int y = 0; y < figure.height; ++y)
    for (int x = 0; x < figure.width; ++x) set(x, y, figure.background);
  for (const Figure::Line& line : figure.lines) {
    // Bresenham's steps, a square pen `width` pixels wide.
    int x0 = int(std::lround(line.x0)), y0 = int(std::lround(line.y0));
    const int x1 = int(std::lround(line.x1)), y1 = int(std::lround(line.y1));
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int error = dx + dy;
    for (;;) {
      for (int i = 0; i < line.width; ++i)
        for (int j = 0; j < line.width; ++j)
          set(x0 + i - line.width / 2, y0 + j - line.width / 2, line.colour);
      if (x0 == x1 && y0 == y1) break;
      const int e2 = 2 * error;
      if (e2 >= dy) {
        error += dy;
        x0 += sx;
      }
      if (e2 <= dx) {
        error += dx;
        y0 += sy;
      }
    }
  }
  return frame;
}

[[noreturn]] void text_failed(const std::filesystem::path& path, const LogCapture& log, int code) {
  throw Error("cannot draw the text of " + path.string() + ": " +
              (log.lines().empty() ? av_error_string(code) : log.lines().front()) +
              " (FFmpeg's drawtext filter and a font, e.g. Debian's fonts-dejavu-core; or write .svg)");
}

// Each text through one drawtext filter, options set one by one (no filter-graph escaping of the strings;
// expansion off, so '%' is a character).
FramePtr draw_texts(const Figure& figure, FramePtr image, const std::filesystem::path& path) {
  LogCapture log;
  FilterGraphPtr graph(avfilter_graph_alloc());
  if (!graph) throw Error("cannot allocate a filter graph: out of memory");
  const std::string args =
      "video_size=" + std::to_string(figure.width) + "x" + std::to_string(figure.height) +
      ":pix_fmt=" + std::to_string(int(AV_PIX_FMT_RGB24)) + ":time_base=1/1:pixel_aspect=1/1";
  AVFilterContext* source = nullptr;
  int code = avfilter_graph_create_filter(&source, avfilter_get_by_name("buffer"), "in", args.c_str(),
                                          nullptr, graph.get());
  if (code < 0) text_failed(path, log, code);
  const AVFilter* drawtext = avfilter_get_by_name("drawtext");
  if (!drawtext)
    throw Error("cannot draw the text of " + path.string() + ": this FFmpeg has no drawtext filter");
  AVFilterContext* previous = source;
  for (size_t i = 0; i < figure.texts.size(); ++i) {
    const Figure::Text& t = figure.texts[i];
    AVFilterContext* filter =
        avfilter_graph_alloc_filter(graph.get(), drawtext, ("text" + std::to_string(i)).c_str());
    if (!filter) throw Error("cannot allocate a filter graph: out of memory");
    const std::string anchor = t.anchor == Figure::Anchor::kStart    ? ""
                               : t.anchor == Figure::Anchor::kMiddle ? "-tw/2"
                                                                     : "-tw";
    const std::pair<const char*, std::string> options[] = {{"font", "DejaVu Sans"},
                                                           {"expansion", "none"},
                                                           {"text", t.text},
                                                           {"fontsize", std::to_string(t.size)},
                                                           {"fontcolor", "0x" + hex(t.colour).substr(1)},
                                                           {"x", number(t.x) + anchor},
                                                           {"y", number(t.y)}};
    for (const auto& [name, value] : options) {
      code = av_opt_set(filter, name, value.c_str(), AV_OPT_SEARCH_CHILDREN);
      if (code < 0) text_failed(path, log, code);
    }
    code = avfilter_init_str(filter, nullptr);
    if (code < 0) text_failed(path, log, code);
    code = avfilter_link(previous, 0, filter, 0);
    if (code < 0) text_failed(path, log, code);
    previous = filter;
  }
  AVFilterContext* sink = nullptr;
  code = avfilter_graph_create_filter(&sink, avfilter_get_by_name("buffersink"), "out", nullptr, nullptr,
                                      graph.get());
  if (code >= 0) code = avfilter_link(previous, 0, sink, 0);
  if (code >= 0) code = avfilter_graph_config(graph.get(), nullptr);
  if (code >= 0) code = av_buffersrc_add_frame_flags(source, image.get(), AV_BUFFERSRC_FLAG_KEEP_REF);
  if (code >= 0) code = av_buffersrc_add_frame(source, nullptr);
  FramePtr out = make_frame();
  if (code >= 0) code = av_buffersink_get_frame(sink, out.get());
  if (code < 0) text_failed(path, log, code);
  if (out->format != AV_PIX_FMT_RGB24 || out->width != figure.width || out->height != figure.height)
    throw Error("cannot draw the text of " + path.string() + ": the filter graph changed the image's format");
  return out;
}

}  // namespace

std::string figure_svg(const Figure& figure) {
  std::string svg =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
      std::to_string(figure.width) + "\" height=\"" + std::to_string(figure.height) + "\" viewBox=\"0 0 " +
      std::to_string(figure.width) + " " + std::to_string(figure.height) +
      "\" font-family=\"DejaVu Sans, Verdana, sans-serif\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"" + hex(figure.background) + "\"/>\n";
  for (const Figure::Line& l : figure.lines)
    svg += "<line x1=\"" + number(l.x0) + "\" y1=\"" + number(l.y0) + "\" x2=\"" + number(l.x1) + "\" y2=\"" +
           number(l.y1) + "\" stroke=\"" + hex(l.colour) + "\" stroke-width=\"" + std::to_string(l.width) +
           "\"/>\n";
  for (const Figure::Text& t : figure.texts) {
    const char* anchor = t.anchor == Figure::Anchor::kStart    ? "start"
                         : t.anchor == Figure::Anchor::kMiddle ? "middle"
                                                               : "end";
    // y is the top of the line; SVG places the baseline, about 0.8 of the size below it.
    svg += "<text x=\"" + number(t.x) + "\" y=\"" + number(t.y + 0.8 * t.size) + "\" font-size=\"" +
           std::to_string(t.size) + "\" fill=\"" + hex(t.colour) + "\" text-anchor=\"" + anchor + "\">" +
           xml_escaped(t.text) + "</text>\n";
  }
  return svg + "</svg>\n";
}

std::string figure_png(const Figure& figure, const std::filesystem::path& path) {
  FramePtr image = draw_texts(figure, draw_lines(figure, path), path);
  const AVCodec* codec = avcodec_find_encoder(AV_CODEC_ID_PNG);
  if (!codec) throw Error(path.string() + ": this FFmpeg has no PNG encoder");
  CodecContextPtr context(avcodec_alloc_context3(codec));
  if (!context) throw Error("cannot allocate the PNG encoder");
  context->width = figure.width;
  context->height = figure.height;
  context->pix_fmt = AV_PIX_FMT_RGB24;
  context->time_base = AVRational{1, 1};
  check_av(avcodec_open2(context.get(), codec, nullptr), "cannot open the PNG encoder for", path);
  image->pts = 0;
  std::string bytes;
  PacketPtr packet = make_packet();
  auto drain = [&] {
    for (;;) {
      const int code = avcodec_receive_packet(context.get(), packet.get());
      if (code == AVERROR(EAGAIN) || code == AVERROR_EOF) return;
      check_av(code, "the PNG encoder failed on", path);
      bytes.append(reinterpret_cast<const char*>(packet->data), size_t(packet->size));
      av_packet_unref(packet.get());
    }
  };
  check_av(avcodec_send_frame(context.get(), image.get()), "the PNG encoder refused the image of", path);
  drain();
  check_av(avcodec_send_frame(context.get(), nullptr), "cannot flush the PNG encoder of", path);
  drain();
  if (bytes.empty()) throw Error(path.string() + ": the PNG encoder gave no image");
  return bytes;
}

}  // namespace vaecodec::io
