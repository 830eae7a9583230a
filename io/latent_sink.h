#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>

#include <torch/torch.h>

#include "core/vae_model.h"
#include "io/latent_file.h"

namespace vaecodec::io {

// Note [Latent sinks]
// `encode` reads a clip, runs it through the encoder and writes the latents with their record; what it
// writes is the sink's business, and the generic encode (io/pipeline.cpp) asks the sink at three points
// without knowing which sink it holds:
// - before anything is read: made for the model and the output, a sink refuses what it cannot write (a
//   latent file's extension, a model whose latents the file's readers do not take) and opens its output
//   where the name is known (Note [Atomic outputs]: an unwritable folder fails before any work);
// - once the clip's frame size is known, before a frame is encoded: check_frames;
// - after encoding: frames_kept, the leading frames the file keeps (the encoder is causal, so the latents of
//   the first frames are those of the clip cut there), and write, which writes and commits the file and says
//   where it went.
// Two sinks: the latent file (Note [latent files] in io/latent_file.h: .safetensors or ComfyUI's .latent by
// the output's extension), and musubi-tuner's cache (Note [musubi-tuner's latent cache] in
// io/musubi_cache.h: named by what was read, 1 + 4k frames, frames of its bucket sizes, only the families
// whose record names a musubi-tuner architecture). LatentFormat picks one (make_latent_sink).

// Which sink an encode writes to.
enum class LatentFormat {
  kVaecodec,  // a latent file, its format by the output's extension
  kMusubi,    // musubi-tuner's cache file, the output naming the folder and the clip's stem
};

// What a sink needs to know beside the model and the output.
struct LatentSinkOptions {
  LatentFormat format = LatentFormat::kVaecodec;
  torch::ScalarType cache_dtype = torch::kBFloat16;  // kMusubi: the dtype the cache stores
  // The input's cut (SourceOptions::start_us, AV_TIME_BASE): kMusubi names the window's first frame by it.
  std::optional<int64_t> start_us;
  LatentNormalization normalization;  // kVaecodec: the model's (what a .latent file records)
};

class LatentSink {
 public:
  virtual ~LatentSink() = default;
  // Throws UsageError unless frames of this size can go into the sink; `input` names the clip.
  virtual void check_frames(int64_t width, int64_t height, const std::filesystem::path& input) const {}
  // How many leading frames of a clip of `frames` frames (read from `input`) the sink keeps; warns about
  // those it leaves out.
  virtual int64_t frames_kept(int64_t frames, const std::filesystem::path& input) const { return frames; }
  // Writes `latents` [1, C, F, h, w] (normalized as the model gives them, on the CPU) with `record` and
  // commits the file; returns its path.
  virtual std::filesystem::path write(const torch::Tensor& latents, const LatentMeta& record) = 0;
};

// The sink `options.format` names, for a model of `info` writing to `output`; throws UsageError for what it
// refuses before anything is read.
std::unique_ptr<LatentSink> make_latent_sink(const core::ModelInfo& info, const std::filesystem::path& output,
                                             const LatentSinkOptions& options);

}  // namespace vaecodec::io
