#include "io/latent_record.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "io/colour.h"

namespace vaecodec::io {
namespace fs = std::filesystem;
namespace {

bool valid(AVRational q) {
  return q.num > 0 && q.den > 0;
}

// What --vf and the cut did, for the latents' record.
void record_source_options(const SourceOptions& source, LatentMeta& meta) {
  auto seconds = [](int64_t us) { return static_cast<double>(us) / AV_TIME_BASE; };
  meta.filter_graph = source.filter_graph;
  if (source.start_us) meta.start_seconds = seconds(*source.start_us);
  if (source.duration_us) meta.duration_seconds = seconds(*source.duration_us);
  meta.max_frames = source.max_frames;
}

std::string name_of(const char* name) {
  return name ? name : "";
}

LatentMeta::Rational rational(AVRational q) {
  return {q.num, q.den};
}
AVRational rational(LatentMeta::Rational q) {
  return {q.num, q.den};
}

// The record's values go to the video encoder and muxer; one that contradicts itself would fail there, and
// the message would blame the encoder. It is refused here, as the latent file's fault.
[[noreturn]] void bad_record(const fs::path& input, const std::string& what) {
  throw Error(input.string() + ": the latent file's record is inconsistent: " + what +
              " (make the latent file again with vaecodec encode)");
}

}  // namespace

LatentMeta latent_record(const core::ModelInfo& info, const VideoFormat& format, const Geometry& geometry,
                         int64_t frames, std::vector<int64_t> pts, const SourceOptions& source,
                         bool scale_applied, bool has_audio, const fs::path& input) {
  LatentMeta meta;
  meta.family = info.family;
  meta.model_config = info.config;
  meta.scale = info.latent_scale;
  meta.scale_applied = scale_applied;
  meta.width = format.width;
  meta.height = format.height;
  meta.padded_width = geometry.padded_width;
  meta.padded_height = geometry.padded_height;
  meta.frames = frames;
  meta.padded_frames = padded_frame_count(frames, info.temporal_factor);
  if (valid(format.frame_rate)) meta.frame_rate = rational(format.frame_rate);
  meta.time_base = rational(format.time_base);
  meta.pts = std::move(pts);
  meta.colour_primaries = name_of(av_color_primaries_name(format.colour.primaries));
  meta.colour_transfer = name_of(av_color_transfer_name(format.colour.transfer));
  meta.colour_matrix = name_of(av_color_space_name(format.colour.matrix));
  meta.colour_range = name_of(av_color_range_name(format.colour.range));
  if (format.chroma_location != AVCHROMA_LOC_UNSPECIFIED)
    meta.chroma_location = name_of(av_chroma_location_name(format.chroma_location));
  meta.pixel_format = pixel_format_name(format.pixel_format);
  meta.has_audio = has_audio;
  meta.source = input.filename().string();
  record_source_options(source, meta);
  return meta;
}

DecodePlan plan_decode(const LatentFile& file, const core::ModelInfo& info, const fs::path& input,
                       AVRational fps) {
  const LatentMeta& meta = file.meta;
  const torch::Tensor& z = file.latents;
  if (z.size(0) != 1)
    throw Error(input.string() + " holds a batch of " + std::to_string(z.size(0)) +
                " videos; decode takes one");
  const int64_t padded_w = z.size(4) * info.spatial_factor, padded_h = z.size(3) * info.spatial_factor;
  const int64_t padded_frames = 1 + info.temporal_factor * (z.size(2) - 1);

  DecodePlan plan;
  VideoFormat& f = plan.format;
  f.width = static_cast<int>(meta.width.value_or(padded_w));
  f.height = static_cast<int>(meta.height.value_or(padded_h));
  plan.frames = meta.frames.value_or(padded_frames);
  if (f.width <= 0 || f.height <= 0 || f.width > padded_w || f.height > padded_h || plan.frames <= 0 ||
      plan.frames > padded_frames)
    throw Error(input.string() + ": its record (" + std::to_string(f.width) + "x" + std::to_string(f.height) +
                ", " + std::to_string(plan.frames) + " frames) does not fit its latents (" +
                std::to_string(padded_w) + "x" + std::to_string(padded_h) + ", at most " +
                std::to_string(padded_frames) + " frames)");

  if (meta.time_base && meta.time_base->num <= 0)
    bad_record(input, "time base " + std::to_string(meta.time_base->num) + "/" +
                          std::to_string(meta.time_base->den) + " is not positive");
  if (meta.frame_rate && meta.frame_rate->num <= 0)
    bad_record(input, "frame rate " + std::to_string(meta.frame_rate->num) + "/" +
                          std::to_string(meta.frame_rate->den) + " is not positive");
  if (meta.time_base && meta.pts.size() == static_cast<size_t>(plan.frames)) {
    // A billion seconds (32 years) either side of zero: far beyond any video, short of the muxers' overflows.
    const double tick = static_cast<double>(meta.time_base->num) / meta.time_base->den;
    for (size_t i = 0; i < meta.pts.size(); ++i)
      if (std::abs(static_cast<double>(meta.pts[i]) * tick) > 1e9)
        bad_record(input, "the pts of frame " + std::to_string(i) + " (" + std::to_string(meta.pts[i]) +
                              ") lies more than 1e9 seconds from zero");
    for (size_t i = 1; i < meta.pts.size(); ++i) {
      int64_t step = 0;
      if (meta.pts[i] <= meta.pts[i - 1] || __builtin_sub_overflow(meta.pts[i], meta.pts[i - 1], &step))
        bad_record(input, "the pts of frame " + std::to_string(i) + " (" + std::to_string(meta.pts[i]) +
                              ") does not follow that of frame " + std::to_string(i - 1) + " (" +
                              std::to_string(meta.pts[i - 1]) + ")");
    }
    f.time_base = rational(*meta.time_base);
    plan.pts = meta.pts;
  }
  if (meta.frame_rate) f.frame_rate = rational(*meta.frame_rate);
  if (!valid(f.frame_rate) && valid(fps)) f.frame_rate = fps;
  if (plan.pts.empty()) {
    // No timing in the file: frames at a constant rate, pts counted in frame durations.
    if (!valid(f.frame_rate))
      throw Error(input.string() + " does not say its frame rate; pass --fps (for example --fps 16)");
    f.time_base = av_inv_q(f.frame_rate);
    for (int64_t i = 0; i < plan.frames; ++i) plan.pts.push_back(i);
  }
  const int64_t step = valid(f.frame_rate) ? av_rescale_q(1, av_inv_q(f.frame_rate), f.time_base) : 0;
  for (size_t i = 0; i < plan.pts.size(); ++i)
    plan.durations.push_back(i + 1 < plan.pts.size() ? plan.pts[i + 1] - plan.pts[i]
                                                     : (step > 0 ? step : (i ? plan.durations.back() : 0)));

  const AVPixelFormat pix = av_get_pix_fmt(meta.pixel_format.c_str());
  f.pixel_format = pix != AV_PIX_FMT_NONE ? pix : AV_PIX_FMT_YUV420P;
  f.colour = colour_tags_from_names(meta.colour_primaries, meta.colour_transfer, meta.colour_matrix,
                                    meta.colour_range);
  const int location = av_chroma_location_from_name(meta.chroma_location.c_str());
  if (location > 0) f.chroma_location = static_cast<AVChromaLocation>(location);
  return plan;
}

}  // namespace vaecodec::io
