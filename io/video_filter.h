#pragma once

#include <string>

#include "io/ffmpeg_common.h"

namespace vaecodec::io {

// Note [Filter graph]
// `--vf GRAPH` runs the decoded frames through an FFmpeg filter graph (libavfilter, ffmpeg's own -vf syntax:
// "scale=832:480,fps=16") before they reach the model. The graph's output decides what the model sees and
// what the output reproduces: its size (padded to the model's multiples as any other, Note [Padding]), its
// time base and frame rate (fps=16 retimes the clip), its pixel format (the output's, unless --pix-fmt) and
// the colour tags its frames carry. Nothing is converted behind the graph's back: a graph that ends in a
// pixel format the model cannot take (one swscale cannot read, such as rgb4's packed bits, or hardware
// frames) is refused rather than converted, so that the user sees it. FFmpeg's messages for a graph that does
// not parse or configure are libav's log lines; they are caught while the graph is built and become the one
// error line.

// The stream a graph is built for: what the decoder gives it.
struct FilterInput {
  int width = 0;
  int height = 0;
  AVPixelFormat pixel_format = AV_PIX_FMT_NONE;
  AVRational time_base{1, 1};
  AVRational frame_rate{0, 1};           // 0/1: unknown
  AVRational sample_aspect_ratio{0, 1};  // 0/1: unknown
};

// A configured filter graph with one video input and one video output.
class VideoFilter {
 public:
  // Throws UsageError "--vf 'GRAPH': FFmpeg's message" for a graph that does not parse or configure, or
  // whose output is not one video stream.
  VideoFilter(const std::string& graph, const FilterInput& input);
  VideoFilter(const VideoFilter&) = delete;
  VideoFilter& operator=(const VideoFilter&) = delete;

  // Hands a decoded frame (pts in the input's time base) to the graph; null: the end of the stream.
  void push(AVFrame* frame);
  // The next filtered frame into `out` (pts in time_base()); false when the graph needs more input, or, once
  // the end was pushed, has nothing more to give.
  bool pull(AVFrame* out);

  // What comes out (known once configured).
  int width() const;
  int height() const;
  AVPixelFormat pixel_format() const;
  AVRational time_base() const;
  AVRational frame_rate() const;  // 0/1 when the graph does not say
  AVRational sample_aspect_ratio() const;
  const std::string& graph() const { return graph_; }

 private:
  std::string graph_;
  FilterGraphPtr filters_;
  AVFilterContext* source_ = nullptr;  // owned by filters_
  AVFilterContext* sink_ = nullptr;    // owned by filters_
};

// Checks that `graph` parses (filter names, options, links) without an input at hand, so that a command
// line with a bad graph fails before a model is loaded. Throws UsageError as above.
void check_filter_graph(const std::string& graph);

// Whether the model's colour conversion takes frames of `format` (Note [Filter graph]).
bool takes_pixel_format(AVPixelFormat format);

}  // namespace vaecodec::io
