#include "io/latent_sink.h"

#include <string>

#include "core/atomic_file.h"
#include "core/error.h"
#include "io/ffmpeg_common.h"
#include "io/log.h"
#include "io/musubi_cache.h"

namespace vaecodec::io {
namespace fs = std::filesystem;

namespace {

// A latent file (Note [latent files]): every frame, any size, the format by the output's extension.
class LatentFileSink : public LatentSink {
 public:
  LatentFileSink(const fs::path& output, LatentNormalization normalization)
      : file_(checked(output)), normalization_(std::move(normalization)) {}

  fs::path write(const torch::Tensor& latents, const LatentMeta& record) override {
    write_latents(file_, latents, record, normalization_);
    file_.commit();
    return file_.final_path();
  }

 private:
  static const fs::path& checked(const fs::path& output) {
    if (!is_latent_path(output))
      throw UsageError("latent file " + output.string() + " must end in .safetensors or .latent");
    return output;
  }

  core::AtomicFile file_;  // opened at once (Note [Atomic outputs])
  LatentNormalization normalization_;
};

// musubi-tuner's cache file (Note [musubi-tuner's latent cache]): named by the window and size read, so it is
// opened once they are known.
class MusubiCacheSink : public LatentSink {
 public:
  MusubiCacheSink(const core::ModelInfo& info, fs::path output, const LatentSinkOptions& options)
      : output_(std::move(output)), options_(options) {
    check_musubi_model(info);
  }

  void check_frames(int64_t width, int64_t height, const fs::path& input) const override {
    check_musubi_size(width, height, input);
  }

  int64_t frames_kept(int64_t frames, const fs::path& input) const override {
    const int64_t kept = musubi_frame_count(frames);
    if (kept < frames)
      warn(input.string() + ": took the first " + std::to_string(kept) + " of its " + std::to_string(frames) +
           " frames (musubi-tuner trains on 1 + 4k frames)");
    return kept;
  }

  fs::path write(const torch::Tensor& latents, const LatentMeta& record) override {
    MusubiItem item;
    item.stem = output_.filename().string();
    const std::optional<LatentMeta::Rational> rate = record.frame_rate;
    if (options_.start_us && rate)
      item.start_frame = av_rescale_q(*options_.start_us, AV_TIME_BASE_Q, AVRational{rate->den, rate->num});
    item.frames = record.frames.value();
    item.width = record.width.value();
    item.height = record.height.value();
    core::AtomicFile file(output_.parent_path() / musubi_file_name(item));
    write_musubi_cache(file, latents, item, record, options_.cache_dtype);
    file.commit();
    return file.final_path();
  }

 private:
  fs::path output_;  // the folder and the clip's stem
  LatentSinkOptions options_;
};

}  // namespace

std::unique_ptr<LatentSink> make_latent_sink(const core::ModelInfo& info, const fs::path& output,
                                             const LatentSinkOptions& options) {
  switch (options.format) {
    case LatentFormat::kMusubi:
      return std::make_unique<MusubiCacheSink>(info, output, options);
    case LatentFormat::kVaecodec:
      break;
  }
  return std::make_unique<LatentFileSink>(output, options.normalization);
}

}  // namespace vaecodec::io
