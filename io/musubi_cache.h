#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <torch/torch.h>

#include "core/atomic_file.h"
#include "core/models/model_family.h"
#include "core/vae_model.h"
#include "io/latent_file.h"

namespace vaecodec::io {

// Note [musubi-tuner's latent cache]
// kohya-ss/musubi-tuner trains Wan2.1/2.2-14B LoRAs from a cache directory of per-clip .safetensors files
// that its own caching script writes (dataset/cache_io.py, save_latent_cache_wan;
// dataset/image_video_dataset.py). `vaecodec encode --format musubi` writes the same files, so that a folder
// of raw clips becomes a cache the trainer accepts:
// - name: `{stem}_{start:05d}-{frames:03d}_{width:04d}x{height:04d}_wan.safetensors`; the trainer finds its
//   files by the `_wan.safetensors` ending, splits the name at '_', reads the size from the second-to-last
//   part and the frame count from the third-to-last, and takes what precedes as the item key: its
//   text-encoder cache must be `{stem}_wan_te.safetensors` in the same folder (made by its
//   wan_cache_text_encoder_outputs.py; vaecodec makes no text embeddings).
// - one tensor `latents_{F}x{H}x{W}_{dtype}` of shape [C, F, H, W] (no batch axis), dtype by torch's name
//   ("bfloat16", the trainer's default; "float16", "float32"). The latents are normalized per channel,
//   (z - mean) / std, as Wan's own VAE.encode gives them and as vaecodec's engine hands them over.
// - metadata (strings): architecture "wan", width and height, frame_count, format_version "1.0.1"; and
//   vaecodec's own record (Note [latent files]) under "vaecodec", which the trainer ignores and which lets
//   `vaecodec decode` read the file back.
// - frames: the trainer's windows hold 1 + 4k frames. A clip of another length is cut to the longest 1 + 4k
//   frames it begins with, as musubi-tuner's own "full" frame extraction does; the encoder is causal (latent
//   frame j depends on frames up to 4j only), so the latents kept are exactly those of the frames kept, and
//   a warning says what was left out.
// - size: its buckets are multiples of 16 pixels (the 14B model's 2x2 patches of 8x latents); frames of
//   another size would carry vaecodec's padding into the training set, so they are refused: resize or crop
//   with --vf.
// - width and height in the name and metadata are those of the frames encoded (after --vf), start is the
//   index of the first frame taken at the graph's frame rate (0 without --start).
// Only the Wan2.1 VAE (16 channels; Wan2.1 and Wan2.2-14B) makes latents this trainer's Wan models take: a
// family's record says so (ModelFamily::musubi_architecture "wan"), and check_musubi_model refuses the
// others. `encode --format musubi` writes one file per clip through its latent sink (Note [Latent sinks] in
// io/latent_sink.h), which asks the checks and the writer below.
// `encode --dataset-config` writes the same files with the windows and sizes the trainer's dataset rules give
// (Note [musubi-tuner's dataset rules] in io/musubi_dataset.h), and two more shapes of them: an image's cache
// (no window in its name, no frame_count), and a clip's with its control clip's latents beside its own.

struct MusubiItem {
  std::string stem;         // the clip's file name without extension
  int64_t start_frame = 0;  // index of the first frame taken
  int64_t frames = 0;       // frames in the window, 1 + 4k
  int64_t width = 0, height = 0;
  // An image's cache (Note [musubi-tuner's dataset rules] in io/musubi_dataset.h): named
  // `{stem}_{width:04d}x{height:04d}_wan.safetensors`, no frame_count in its metadata.
  bool image = false;
};

// The trainer's item key: `{stem}_{start:05d}-{frames:03d}` for a clip's window, `{stem}` for an image.
std::string musubi_item_key(const MusubiItem& item);
// The cache file's name for `item` (no folder).
std::string musubi_file_name(const MusubiItem& item);

// The cache file of the clip named `stem` in `folder`, when one exists: a name musubi_file_name gives for
// that stem with any window and size (what was read decides them, so a finished file is found by its
// pattern).
std::optional<std::filesystem::path> find_musubi_cache(const std::filesystem::path& folder,
                                                       const std::string& stem);

// The frames a window of `available` frames keeps: the longest 1 + 4k not above it.
int64_t musubi_frame_count(int64_t available);

// Throws UsageError unless the family's models make latents musubi-tuner's Wan trainer takes: its record
// names the architecture "wan" (ModelFamily::musubi_architecture).
void check_musubi_family(const core::ModelFamily& family);
// The same for the family of the model `info` describes; a family the registry does not know is refused.
void check_musubi_model(const core::ModelInfo& info);
// Throws UsageError unless frames of this size make a musubi-tuner bucket; `input` names the clip.
void check_musubi_size(int64_t width, int64_t height, const std::filesystem::path& input);

// Writes the cache file into `file` (Note [Atomic outputs]; the caller commits it): latents [1, C, F, H, W]
// (normalized, any float dtype) stored as `dtype` in [C, F, H, W], with musubi-tuner's metadata and
// vaecodec's `record`; a control clip's latents of the same shape, when defined, beside them as
// "latents_control_{F}x{H}x{W}_{dtype}".
void write_musubi_cache(core::AtomicFile& file, const torch::Tensor& latents, const MusubiItem& item,
                        const LatentMeta& record, torch::ScalarType dtype,
                        const torch::Tensor& control = torch::Tensor());

}  // namespace vaecodec::io
