#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"

namespace vaecodec::io {

// Note [latent files]
// Latents are [B, C, T, h, w] tensors. Two file formats, chosen by the extension of the path written:
//   .safetensors  vaecodec's own: tensor "latents" (float32, float16 or bfloat16: the dtype of the tensor
//                 given) and the LatentMeta record as JSON in __metadata__["vaecodec"]. The latents are the
//                 model's, as vaecodec's engine hands them over (Wan: normalized per channel; SeedVR2: raw,
//                 times the latent scale only when LatentMeta::scale_applied says so).
//   .latent       ComfyUI's Save Latent / Load Latent: tensor "latent_tensor" (float32) and the empty marker
//                 tensor "latent_format_version_0" (shape [0]); ComfyUI's LoadLatent takes a file without
//                 that marker for an old SD1 latent and multiplies it by 1 / 0.18215 (read_latents does the
//                 same). ComfyUI keeps *raw* VAE latents and normalizes them only on the way into its
//                 diffusion model, so a .latent holds raw = z * std + mean per channel (LatentNormalization)
//                 and reading normalizes back. The LatentMeta record goes into __metadata__["vaecodec"] here
//                 too, so vaecodec's own .latent files keep their timing; ComfyUI ignores it.
// A .pt / .pth file is read as torch.save wrote it (core::read_torch_tensors, the loader of weights): a bare
// tensor, or a dict holding one floating-point tensor, [B, C, T, h, w] or one clip's [C, T, h, w]; a Python
// pipeline's latents, taken as they are (vaecodec's convention, unscaled unless --latent-scale says).
// Reading a .safetensors or .latent looks at the tensors, not the extension: "latents" (vaecodec),
// "latent_tensor" (ComfyUI), a 4-D "latents_FxHxW_dtype" (musubi-tuner's cache,
// Note [musubi-tuner's latent cache]), else the file's only 5-D tensor: a bare file from a diffusion
// pipeline, taken as it is (vaecodec's convention) with a LatentMeta that knows nothing but the channel
// count.

// Everything vaecodec knows about how latents were made: enough to decode them back into the same video.
// std::optional fields and empty strings mean "unknown" (files vaecodec did not write). A bare file's frame
// rate, for one, is unknown: the caller has to ask for it (--fps).
struct LatentMeta {
  // A rational number as FFmpeg's AVRational: num / den, den > 0.
  struct Rational {
    int num = 0;
    int den = 1;
    bool operator==(const Rational&) const = default;
  };

  // Version of the JSON record; a reader refuses records newer than it knows.
  static constexpr int kFormatVersion = 1;
  int format_version = kFormatVersion;
  std::string vaecodec_version = VAECODEC_VERSION;  // the vaecodec that wrote the file

  // The model: ModelInfo::family ("wan2.1-vae", "seedvr2-vae", ...) and its config. Empty family: unknown.
  std::string family;
  nlohmann::json model_config = nlohmann::json::object();
  // Channels of the latent tensor: write_latents records the tensor's, read_latents sets it from the tensor.
  std::optional<int64_t> latent_channels;

  // Note [latent scale]
  // SeedVR2's diffusion model works on raw latents times 0.9152 (ModelInfo::latent_scale). vaecodec writes
  // raw latents by default and records the factor with scale_applied = false; with scale_applied = true,
  // write_latents stores latents * scale. read_latents divides by the scale when the file says it was
  // applied, so callers always hand over and get back the model's own latents. Wan: scale 1.
  // On the command line `encode --latent-scale` writes scaled latents (PipelineOptions::latent_scale sets
  // scale_applied) and `decode --latent-scale` says the input's latents are scaled (read_latents'
  // `stored_scale`).
  double scale = 1.0;
  bool scale_applied = false;

  // The video before and after padding to the model's sizes (multiples of the spatial factor, 1 + 4k frames).
  std::optional<int64_t> width;
  std::optional<int64_t> height;
  std::optional<int64_t> padded_width;
  std::optional<int64_t> padded_height;
  std::optional<int64_t> frames;
  std::optional<int64_t> padded_frames;

  // Timing: the stream's frame rate and time base, and the pts of every input frame in that time base (so a
  // variable frame rate survives); when both are known, pts.size() == frames. Empty pts: unknown.
  std::optional<Rational> frame_rate;
  std::optional<Rational> time_base;
  std::vector<int64_t> pts;

  // Colour tags and pixel format by FFmpeg's names (av_color_primaries_name, av_color_transfer_name,
  // av_color_space_name, av_color_range_name, av_get_pix_fmt_name): "bt709", "tv", "yuv420p". Empty: unknown.
  std::string colour_primaries;
  std::string colour_transfer;
  std::string colour_matrix;
  std::string colour_range;
  std::string chroma_location;  // "left", "center", ... (av_chroma_location_name); empty: unspecified
  std::string pixel_format;

  std::optional<bool> has_audio;  // whether the source had an audio stream
  std::string source;             // file name of the source video

  // What was done to the source before the model (Note [Cutting the input] in io/video_reader.h): --vf's
  // graph, --start and --duration in seconds, --frames. Empty or unset: nothing. The size, frames, timing
  // and colour above are those of the video after it, which is what decode gives back.
  std::string filter_graph;
  std::optional<double> start_seconds;
  std::optional<double> duration_seconds;
  std::optional<int64_t> max_frames;

  bool operator==(const LatentMeta&) const = default;
};

// The record as JSON; unknown values are written as null. Keys are the field names, except for a few groups:
// "model": {"family", "config"}, "latent_scale": {"factor", "applied"}, "frame_rate" and "time_base":
// {"num", "den"}, "colour": {"primaries", "transfer", "matrix", "range"}, "preprocessing": {"vf", "start",
// "duration", "frames"}.
nlohmann::json to_json(const LatentMeta& meta);
// Reads a record written by to_json; missing or null keys stay unknown. Throws vaecodec::Error naming the key
// for a value of the wrong type or range, and for a format_version newer than LatentMeta::kFormatVersion.
LatentMeta latent_meta_from_json(const nlohmann::json& json);
// Same, from JSON text as stored in a file; text that does not parse is an error.
LatentMeta parse_latent_meta(std::string_view text);

// Per-channel statistics of a VAE's raw latents: normalized = (raw - mean) / std. Only .latent files use it
// (see Note [latent files]). Empty: the model's latents are raw already (SeedVR2) and are stored as they are.
struct LatentNormalization {
  std::vector<double> mean;
  std::vector<double> std;
  bool empty() const { return mean.empty() && std.empty(); }
};

// Latents as read back from a file.
struct LatentFile {
  torch::Tensor latents;  // [B, C, T, h, w] float32 on the CPU: the model's latents (Note [latent scale])
  LatentMeta meta;
  bool has_meta = false;  // whether the file held vaecodec's record (false: a bare or ComfyUI-made file)
  std::string format;     // "safetensors" (vaecodec's), "latent" (ComfyUI's), "musubi", "bare" or "torch"
};

// Writes latents [B, C, T, h, w] (any device; float32, float16 or bfloat16) and their record in the format
// the extension names (.safetensors or .latent, Note [latent files]). `normalization` is used for .latent
// only and needs one mean and one std per channel (or none). Atomic: a temporary file beside `path` is
// renamed over it. Throws vaecodec::Error for another extension, rank or dtype, NaN/Inf values, a
// normalization that does not fit, or a record that contradicts itself (pts count vs frames, scale <= 0).
void write_latents(const std::filesystem::path& path, const torch::Tensor& latents, const LatentMeta& meta,
                   const LatentNormalization& normalization = {});
// The same into `file`'s temporary file (the extension checked is that of its final name); the caller
// commits it.
void write_latents(core::AtomicFile& file, const torch::Tensor& latents, const LatentMeta& meta,
                   const LatentNormalization& normalization = {});

// Whether `path` names a latent file by its extension: .safetensors or .latent, in any case.
bool is_latent_path(const std::filesystem::path& path);
// The same, for files decode reads: also torch.save's .pt and .pth.
bool is_latent_input_path(const std::filesystem::path& path);
// A UsageError when `path` starts as a video container does (MP4/MOV, Matroska, AVI, FLV, Ogg, MPEG-TS): a
// video given to decode by mistake is named as such instead of failing as a malformed latent file.
void check_not_video(const std::filesystem::path& path);

// Reads latents written by write_latents, by ComfyUI's Save Latent, or a bare safetensors file holding one
// 5-D tensor. A .latent's raw latents are normalized with `normalization` (empty: taken as they are). Throws
// vaecodec::Error for a file without a 5-D latent tensor, NaN/Inf values, or a record that does not parse.
// `stored_scale`, when given, is the caller's word that the latents are stored times that factor (`vaecodec
// decode --latent-scale`, Note [latent scale]): a file whose record says so is read as usual, one whose
// record says they are stored unscaled is an error, and a file without a record is divided by it (and its
// meta then says so).
LatentFile read_latents(const std::filesystem::path& path, const LatentNormalization& normalization = {},
                        std::optional<double> stored_scale = std::nullopt);

// Throws vaecodec::Error when latents do not fit a model: made by another family (when the record knows it)
// or with another channel count (when known). `path` names the latent file in the message.
void check_latents_match(const LatentMeta& meta, const std::string& family, int64_t latent_channels,
                         const std::string& path);

}  // namespace vaecodec::io
