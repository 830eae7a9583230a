#include "io/video_filter.h"

#include <vector>

extern "C" {
#include <libavfilter/buffersink.h>
#include <libavfilter/buffersrc.h>
}

#include "core/error.h"

namespace vaecodec::io {
namespace {

// libavfilter explains a bad graph only in its log ("No such filter: 'foo'"); the code it returns says
// "Invalid argument". "--vf 'GRAPH': FFmpeg's first error line" (its code's message when it logged none).
[[noreturn]] void fail(const LogCapture& log, const std::string& graph, int code) {
  throw UsageError("--vf '" + graph +
                   "': " + (log.lines().empty() ? av_error_string(code) : log.lines().front()));
}

std::string rational_arg(AVRational q) {
  return std::to_string(q.num) + "/" + std::to_string(q.den);
}

// Makes the graph's source ("in", a buffer with `input`'s parameters) and sink ("out"), and links `graph`
// between them.
void build(AVFilterGraph* filters, const std::string& graph, const FilterInput& input,
           AVFilterContext** source, AVFilterContext** sink, const LogCapture& log) {
  std::string args =
      "video_size=" + std::to_string(input.width) + "x" + std::to_string(input.height) +
      ":pix_fmt=" + std::to_string(static_cast<int>(input.pixel_format)) +
      ":time_base=" + rational_arg(input.time_base) + ":pixel_aspect=" +
      rational_arg(input.sample_aspect_ratio.num > 0 ? input.sample_aspect_ratio : AVRational{1, 1});
  if (input.frame_rate.num > 0 && input.frame_rate.den > 0)
    args += ":frame_rate=" + rational_arg(input.frame_rate);
  int code = avfilter_graph_create_filter(source, avfilter_get_by_name("buffer"), "in", args.c_str(), nullptr,
                                          filters);
  if (code < 0) fail(log, graph, code);
  code = avfilter_graph_create_filter(sink, avfilter_get_by_name("buffersink"), "out", nullptr, nullptr,
                                      filters);
  if (code < 0) fail(log, graph, code);

  // The graph's open input is fed by "in", its open output feeds "out" (FFmpeg's doc/examples).
  FilterInOutPtr outputs(avfilter_inout_alloc()), inputs(avfilter_inout_alloc());
  if (!outputs || !inputs) throw Error("cannot build the filter graph: out of memory");
  outputs->name = av_strdup("in");
  outputs->filter_ctx = *source;
  inputs->name = av_strdup("out");
  inputs->filter_ctx = *sink;
  AVFilterInOut* open_inputs = inputs.release();
  AVFilterInOut* open_outputs = outputs.release();
  code = avfilter_graph_parse_ptr(filters, graph.c_str(), &open_inputs, &open_outputs, nullptr);
  avfilter_inout_free(&open_inputs);
  avfilter_inout_free(&open_outputs);
  if (code < 0) fail(log, graph, code);
  for (unsigned i = 0; i < filters->nb_filters; ++i) {
    const AVFilterContext* filter = filters->filters[i];
    for (unsigned p = 0; p < filter->nb_outputs; ++p)
      if (avfilter_pad_get_type(filter->output_pads, static_cast<int>(p)) != AVMEDIA_TYPE_VIDEO)
        throw UsageError("--vf '" + graph + "': the filter " + filter->filter->name +
                         " makes a stream that is not video; the graph must give one video stream");
  }
}

}  // namespace

VideoFilter::VideoFilter(const std::string& graph, const FilterInput& input) : graph_(graph) {
  LogCapture log;
  filters_.reset(avfilter_graph_alloc());
  if (!filters_) throw Error("cannot allocate a filter graph: out of memory");
  build(filters_.get(), graph, input, &source_, &sink_, log);
  const int code = avfilter_graph_config(filters_.get(), nullptr);
  if (code < 0) fail(log, graph, code);
}

void VideoFilter::push(AVFrame* frame) {
  LogCapture log;
  const int code = av_buffersrc_add_frame_flags(source_, frame, AV_BUFFERSRC_FLAG_KEEP_REF);
  if (code < 0) {
    const std::string why = av_error_string(code);
    throw Error("--vf '" + graph_ + "' failed on a frame: " + why);
  }
}

bool VideoFilter::pull(AVFrame* out) {
  const int code = av_buffersink_get_frame(sink_, out);
  if (code == AVERROR(EAGAIN) || code == AVERROR_EOF) return false;
  if (code < 0) throw Error("--vf '" + graph_ + "' failed: " + av_error_string(code));
  return true;
}

int VideoFilter::width() const {
  return av_buffersink_get_w(sink_);
}
int VideoFilter::height() const {
  return av_buffersink_get_h(sink_);
}
AVPixelFormat VideoFilter::pixel_format() const {
  return static_cast<AVPixelFormat>(av_buffersink_get_format(sink_));
}
AVRational VideoFilter::time_base() const {
  return av_buffersink_get_time_base(sink_);
}
AVRational VideoFilter::frame_rate() const {
  return av_buffersink_get_frame_rate(sink_);
}
AVRational VideoFilter::sample_aspect_ratio() const {
  return av_buffersink_get_sample_aspect_ratio(sink_);
}

void check_filter_graph(const std::string& graph) {
  // Any input will do to find unknown filters, bad options and broken links; a graph that fails only on
  // the real input's size or format is caught when the input is open.
  FilterInput probe;
  probe.width = 64;
  probe.height = 64;
  probe.pixel_format = AV_PIX_FMT_YUV420P;
  probe.time_base = {1, 25};
  probe.frame_rate = {25, 1};
  LogCapture log;
  FilterGraphPtr filters(avfilter_graph_alloc());
  if (!filters) throw Error("cannot allocate a filter graph: out of memory");
  AVFilterContext* source = nullptr;
  AVFilterContext* sink = nullptr;
  build(filters.get(), graph, probe, &source, &sink, log);
}

bool takes_pixel_format(AVPixelFormat format) {
  // What FrameToTensor converts: every layout swscale reads, in memory (io/colour.h).
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(format);
  return desc && !(desc->flags & AV_PIX_FMT_FLAG_HWACCEL) && sws_isSupportedInput(format) > 0;
}

}  // namespace vaecodec::io
