#include "io/latent_file.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/json_text.h"
#include "core/safetensors.h"
#include "core/sizes.h"
#include "core/untrusted_json.h"

namespace vaecodec::io {
namespace {

// __metadata__ key of the LatentMeta record, in both formats.
constexpr const char* kMetaKey = "vaecodec";
constexpr const char* kLatentsName = "latents";
constexpr const char* kComfyLatentName = "latent_tensor";
constexpr const char* kComfyVersionMarker = "latent_format_version_0";
// ComfyUI's LoadLatent divides files without kComfyVersionMarker by SD1's scale factor.
constexpr double kComfyLegacyScale = 0.18215;

std::string lower_extension(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

// --- JSON record: reading one key at a time, every error naming the key ---

[[noreturn]] void bad_key(const std::string& key, const std::string& expected, const nlohmann::json& value) {
  throw Error("latent metadata: '" + key + "' must be " + expected + ", not " + value.dump());
}

const nlohmann::json* find_key(const nlohmann::json& object, const std::string& key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<int64_t> optional_count(const nlohmann::json& object, const std::string& key,
                                      const std::string& full_key) {
  const nlohmann::json* value = find_key(object, key);
  if (!value) return std::nullopt;
  if (!value->is_number_integer() || value->get<int64_t>() < 0) {
    bad_key(full_key, "a non-negative integer", *value);
  }
  return value->get<int64_t>();
}

std::string optional_string(const nlohmann::json& object, const std::string& key,
                            const std::string& full_key) {
  const nlohmann::json* value = find_key(object, key);
  if (!value) return {};
  if (!value->is_string()) bad_key(full_key, "a string", *value);
  return value->get<std::string>();
}

const nlohmann::json* optional_object(const nlohmann::json& object, const std::string& key) {
  const nlohmann::json* value = find_key(object, key);
  if (value && !value->is_object()) bad_key(key, "an object", *value);
  return value;
}

std::optional<LatentMeta::Rational> optional_rational(const nlohmann::json& object, const std::string& key) {
  const nlohmann::json* value = optional_object(object, key);
  if (!value) return std::nullopt;
  const nlohmann::json* num = find_key(*value, "num");
  const nlohmann::json* den = find_key(*value, "den");
  auto fits_int = [](const nlohmann::json* v) {
    return v && v->is_number_integer() && v->get<int64_t>() >= INT_MIN && v->get<int64_t>() <= INT_MAX;
  };
  if (!fits_int(num) || !fits_int(den) || den->get<int64_t>() <= 0) {
    bad_key(key, "{\"num\": int, \"den\": int > 0}", *value);
  }
  return LatentMeta::Rational{num->get<int>(), den->get<int>()};
}

nlohmann::json rational_json(const std::optional<LatentMeta::Rational>& r) {
  if (!r) return nullptr;
  return {{"num", r->num}, {"den", r->den}};
}

template <typename T>
nlohmann::json or_null(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json string_or_null(const std::string& value) {
  return value.empty() ? nlohmann::json(nullptr) : nlohmann::json(value);
}

// Contradictions within a record, whoever made it.
void check_meta(const LatentMeta& meta) {
  if (!std::isfinite(meta.scale) || meta.scale <= 0) {
    throw Error("latent metadata: the latent scale must be a positive number, not " +
                std::to_string(meta.scale));
  }
  if (!meta.pts.empty() && meta.frames && static_cast<int64_t>(meta.pts.size()) != *meta.frames) {
    throw Error("latent metadata: " + std::to_string(meta.pts.size()) + " pts listed for " +
                std::to_string(*meta.frames) + " frames");
  }
}

// --- tensors ---

// Scalar types a latent file may hold.
bool is_latent_dtype(torch::ScalarType dtype) {
  return dtype == torch::kFloat || dtype == torch::kHalf || dtype == torch::kBFloat16 ||
         dtype == torch::kDouble;
}

void check_finite(const torch::Tensor& latents, const std::string& where) {
  if (torch::isnan(latents).any().item<bool>()) throw Error(where + ": latents contain NaN");
  if (torch::isinf(latents).any().item<bool>()) throw Error(where + ": latents contain Inf");
}

// Per-channel [1, C, 1, 1, 1] tensors of a normalization, checked against the channel count.
std::pair<torch::Tensor, torch::Tensor> channel_stats(const LatentNormalization& normalization,
                                                      int64_t channels, const std::string& where) {
  const auto means = static_cast<int64_t>(normalization.mean.size());
  const auto stds = static_cast<int64_t>(normalization.std.size());
  if (means != channels || stds != channels) {
    throw Error(where + ": the latent normalization has " + std::to_string(means) + " means and " +
                std::to_string(stds) + " stds, but the latents have " + std::to_string(channels) +
                " channels");
  }
  for (double s : normalization.std) {
    if (!std::isfinite(s) || s == 0) {
      throw Error(where + ": the latent normalization has a std of " + std::to_string(s));
    }
  }
  auto as_tensor = [&](const std::vector<double>& v) {
    return torch::tensor(v, torch::kDouble).view({1, channels, 1, 1, 1});
  };
  return {as_tensor(normalization.mean), as_tensor(normalization.std)};
}

// The one tensor of a file that holds the latents, and the format that says so.
std::pair<std::string, std::string> find_latent_tensor(const core::SafetensorsFile& file,
                                                       const std::string& where) {
  const auto& entries = file.entries();
  if (entries.count(kLatentsName)) return {kLatentsName, "safetensors"};
  if (entries.count(kComfyLatentName)) return {kComfyLatentName, "latent"};
  // musubi-tuner's cache (io/musubi_cache.h): "latents_FxHxW_dtype", [C, F, H, W].
  for (const auto& [name, entry] : entries)
    if (name.rfind("latents_", 0) == 0 && entry.shape.size() == 4 && name.find('x') != std::string::npos)
      return {name, "musubi"};
  std::vector<std::string> five_d;
  std::string listing;
  for (const auto& [name, entry] : entries) {
    if (entry.shape.size() == 5) five_d.push_back(name);
    listing += (listing.empty() ? "" : ", ") + ("'" + name + "' " + core::shape_string(entry.shape));
  }
  if (five_d.size() == 1) return {five_d.front(), "bare"};
  if (five_d.empty()) {
    throw Error(where + ": no latent tensor: expected '" + kLatentsName + "', '" + kComfyLatentName +
                "' or one 5-D tensor, found " + (listing.empty() ? "no tensors" : listing));
  }
  std::string names;
  for (const auto& name : five_d) names += (names.empty() ? "'" : ", '") + name + "'";
  throw Error(where + ": no latent tensor: expected '" + kLatentsName + "' or '" + kComfyLatentName +
              "', and more than one 5-D tensor to choose from (" + names + ")");
}

bool is_torch_path(const std::filesystem::path& path) {
  const std::string ext = lower_extension(path);
  return ext == ".pt" || ext == ".pth";
}

// Latents a Python pipeline saved with torch.save (Note [latent files]): a bare tensor, or a dict holding one
// floating-point tensor of 4 or 5 dimensions; [C, T, h, w] is one clip.
LatentFile read_torch_latents(const std::filesystem::path& path, std::optional<double> stored_scale) {
  const std::string where = path.string();
  const core::StateDict tensors = core::read_torch_tensors(path);
  std::vector<std::string> candidates;
  std::string listing;
  for (const auto& [name, tensor] : tensors) {
    if (tensor.is_floating_point() && (tensor.dim() == 4 || tensor.dim() == 5)) candidates.push_back(name);
    listing += (listing.empty() ? "" : ", ") + ("'" + name + "' " + core::shape_string(tensor.sizes()));
  }
  if (candidates.size() != 1)
    throw Error(where + ": expected one floating-point latent tensor of 4 or 5 dimensions ([C, T, h, w] or " +
                "[B, C, T, h, w]), found " + (listing.empty() ? "no tensors" : listing));
  torch::Tensor values = tensors.at(candidates.front());
  if (values.dim() == 4) values = values.unsqueeze(0);
  check_finite(values, where);
  LatentFile result;
  result.format = "torch";
  result.meta.vaecodec_version.clear();  // nothing is known of its making
  values = values.to(torch::kDouble);
  if (stored_scale) {
    if (!(*stored_scale > 0)) throw Error(where + ": a latent scale must be positive");
    values = values / *stored_scale;
    result.meta.scale = *stored_scale;
    result.meta.scale_applied = true;
  }
  result.latents = values.to(torch::kFloat).contiguous();
  result.meta.latent_channels = result.latents.size(1);
  return result;
}

}  // namespace

bool is_latent_input_path(const std::filesystem::path& path) {
  return is_latent_path(path) || is_torch_path(path);
}

nlohmann::json to_json(const LatentMeta& meta) {
  nlohmann::json pts = nullptr;
  if (!meta.pts.empty()) pts = meta.pts;
  return {
      {"format_version", meta.format_version},
      {"vaecodec_version", string_or_null(meta.vaecodec_version)},
      {"model", {{"family", string_or_null(meta.family)}, {"config", meta.model_config}}},
      {"latent_channels", or_null(meta.latent_channels)},
      {"latent_scale", {{"factor", meta.scale}, {"applied", meta.scale_applied}}},
      {"width", or_null(meta.width)},
      {"height", or_null(meta.height)},
      {"padded_width", or_null(meta.padded_width)},
      {"padded_height", or_null(meta.padded_height)},
      {"frames", or_null(meta.frames)},
      {"padded_frames", or_null(meta.padded_frames)},
      {"frame_rate", rational_json(meta.frame_rate)},
      {"time_base", rational_json(meta.time_base)},
      {"pts", pts},
      {"colour",
       {{"primaries", string_or_null(meta.colour_primaries)},
        {"transfer", string_or_null(meta.colour_transfer)},
        {"matrix", string_or_null(meta.colour_matrix)},
        {"range", string_or_null(meta.colour_range)},
        {"chroma_location", string_or_null(meta.chroma_location)}}},
      {"pixel_format", string_or_null(meta.pixel_format)},
      {"has_audio", or_null(meta.has_audio)},
      {"source", string_or_null(meta.source)},
      {"preprocessing",
       {{"vf", string_or_null(meta.filter_graph)},
        {"start", or_null(meta.start_seconds)},
        {"duration", or_null(meta.duration_seconds)},
        {"frames", or_null(meta.max_frames)}}},
  };
}

LatentMeta latent_meta_from_json(const nlohmann::json& json) {
  if (!json.is_object()) throw Error("latent metadata: expected a JSON object, not " + json.dump());
  LatentMeta meta;

  const nlohmann::json* version = find_key(json, "format_version");
  if (!version) throw Error("latent metadata: no format_version");
  if (!version->is_number_integer() || version->get<int64_t>() < 1) {
    bad_key("format_version", "a positive integer", *version);
  }
  if (version->get<int64_t>() > LatentMeta::kFormatVersion) {
    throw Error("latent metadata: format version " + version->dump() +
                " is newer than this vaecodec reads (" + std::to_string(LatentMeta::kFormatVersion) +
                "); a newer vaecodec wrote it");
  }
  meta.format_version = version->get<int>();
  meta.vaecodec_version = optional_string(json, "vaecodec_version", "vaecodec_version");

  if (const nlohmann::json* model = optional_object(json, "model")) {
    meta.family = optional_string(*model, "family", "model.family");
    if (const nlohmann::json* config = find_key(*model, "config")) meta.model_config = *config;
  }
  meta.latent_channels = optional_count(json, "latent_channels", "latent_channels");

  if (const nlohmann::json* scale = optional_object(json, "latent_scale")) {
    if (const nlohmann::json* factor = find_key(*scale, "factor")) {
      if (!factor->is_number()) bad_key("latent_scale.factor", "a number", *factor);
      meta.scale = factor->get<double>();
    }
    if (const nlohmann::json* applied = find_key(*scale, "applied")) {
      if (!applied->is_boolean()) bad_key("latent_scale.applied", "true or false", *applied);
      meta.scale_applied = applied->get<bool>();
    }
  }

  meta.width = optional_count(json, "width", "width");
  meta.height = optional_count(json, "height", "height");
  meta.padded_width = optional_count(json, "padded_width", "padded_width");
  meta.padded_height = optional_count(json, "padded_height", "padded_height");
  meta.frames = optional_count(json, "frames", "frames");
  meta.padded_frames = optional_count(json, "padded_frames", "padded_frames");
  meta.frame_rate = optional_rational(json, "frame_rate");
  meta.time_base = optional_rational(json, "time_base");

  if (const nlohmann::json* pts = find_key(json, "pts")) {
    if (!pts->is_array()) bad_key("pts", "an array of integers", *pts);
    meta.pts.reserve(pts->size());
    for (const auto& value : *pts) {
      if (!value.is_number_integer()) bad_key("pts", "an array of integers", value);
      meta.pts.push_back(value.get<int64_t>());
    }
  }

  if (const nlohmann::json* colour = optional_object(json, "colour")) {
    meta.colour_primaries = optional_string(*colour, "primaries", "colour.primaries");
    meta.colour_transfer = optional_string(*colour, "transfer", "colour.transfer");
    meta.colour_matrix = optional_string(*colour, "matrix", "colour.matrix");
    meta.colour_range = optional_string(*colour, "range", "colour.range");
    meta.chroma_location = optional_string(*colour, "chroma_location", "colour.chroma_location");
  }
  meta.pixel_format = optional_string(json, "pixel_format", "pixel_format");
  if (const nlohmann::json* audio = find_key(json, "has_audio")) {
    if (!audio->is_boolean()) bad_key("has_audio", "true or false", *audio);
    meta.has_audio = audio->get<bool>();
  }
  meta.source = optional_string(json, "source", "source");
  if (const nlohmann::json* pre = optional_object(json, "preprocessing")) {
    meta.filter_graph = optional_string(*pre, "vf", "preprocessing.vf");
    for (const auto& [key, field] :
         {std::pair{"start", &meta.start_seconds}, {"duration", &meta.duration_seconds}}) {
      if (const nlohmann::json* value = find_key(*pre, key)) {
        if (!value->is_number() || value->get<double>() < 0)
          bad_key(std::string("preprocessing.") + key, "a non-negative number of seconds", *value);
        *field = value->get<double>();
      }
    }
    meta.max_frames = optional_count(*pre, "frames", "preprocessing.frames");
  }

  check_meta(meta);
  return meta;
}

LatentMeta parse_latent_meta(std::string_view text) {
  nlohmann::json json;
  try {
    json = core::parse_untrusted_json(text);
  } catch (const Error& e) {
    throw Error(std::string("latent metadata is ") + e.what());
  }
  return latent_meta_from_json(json);
}

bool is_latent_path(const std::filesystem::path& path) {
  const std::string ext = lower_extension(path);
  return ext == ".safetensors" || ext == ".latent";
}

void write_latents(const std::filesystem::path& path, const torch::Tensor& latents, const LatentMeta& meta,
                   const LatentNormalization& normalization) {
  core::AtomicFile file(path);
  write_latents(file, latents, meta, normalization);
  file.commit();
}

void write_latents(core::AtomicFile& file, const torch::Tensor& latents, const LatentMeta& meta,
                   const LatentNormalization& normalization) {
  const std::filesystem::path& path = file.final_path();
  const std::string where = path.string();
  const std::string ext = lower_extension(path);
  if (!is_latent_path(path)) {
    throw Error(where + ": unknown latent file extension '" + path.extension().string() +
                "' (expected .safetensors or .latent)");
  }
  if (!latents.defined() || latents.dim() != 5) {
    throw Error(where + ": latents must be [B, C, T, h, w], not " +
                (latents.defined() ? core::shape_string(latents.sizes()) : std::string("an empty tensor")));
  }
  const torch::ScalarType dtype = latents.scalar_type();
  if (dtype != torch::kFloat && dtype != torch::kHalf && dtype != torch::kBFloat16) {
    throw Error(where + ": latents are " + std::string(c10::toString(dtype)) +
                "; only float32, float16 and bfloat16 latents are written");
  }
  if (latents.numel() == 0)
    throw Error(where + ": no latents to write: shape " + core::shape_string(latents.sizes()));
  check_finite(latents, where);

  LatentMeta record = meta;
  record.latent_channels = latents.size(1);
  try {
    check_meta(record);
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
  const double scale = record.scale_applied ? record.scale : 1.0;

  std::map<std::string, torch::Tensor> tensors;
  torch::Tensor values = latents.detach().to(torch::kCPU);
  if (ext == ".safetensors") {
    if (scale != 1.0) values = (values.to(torch::kDouble) * scale).to(dtype);
    tensors[kLatentsName] = values.contiguous();
  } else {
    // Note [latent files]: ComfyUI holds raw latents, in float32.
    values = values.to(torch::kDouble);
    if (!normalization.empty()) {
      auto [mean, std] = channel_stats(normalization, latents.size(1), where);
      values = values * std + mean;
    }
    tensors[kComfyLatentName] = (values * scale).to(torch::kFloat).contiguous();
    tensors[kComfyVersionMarker] = torch::empty({0}, torch::kFloat);
  }
  core::write_safetensors(file, tensors, {{kMetaKey, core::json_text(to_json(record))}});
}

void check_not_video(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return;  // a FIFO would block: the reader refuses it
  std::ifstream in(path, std::ios::binary);
  unsigned char head[12] = {};
  in.read(reinterpret_cast<char*>(head), sizeof(head));
  if (in.gcount() < static_cast<std::streamsize>(sizeof(head))) return;
  auto at = [&](size_t offset, std::string_view magic) {
    return std::memcmp(head + offset, magic.data(), magic.size()) == 0;
  };
  // The signatures of the containers people keep videos in: MP4/MOV, Matroska/WebM, AVI, FLV, Ogg, MPEG-TS.
  const bool video = at(4, "ftyp") || at(0, "\x1a\x45\xdf\xa3") || (at(0, "RIFF") && at(8, "AVI ")) ||
                     at(0, "FLV") || at(0, "OggS") || (head[0] == 0x47 && !is_latent_input_path(path));
  if (video)
    throw UsageError(
        path.string() +
        " is a video, not latents (decode reads .safetensors, .latent and .pt files); did you mean "
        "roundtrip or encode?");
}

LatentFile read_latents(const std::filesystem::path& path, const LatentNormalization& normalization,
                        std::optional<double> stored_scale) {
  check_not_video(path);
  if (is_torch_path(path)) return read_torch_latents(path, stored_scale);
  const std::string where = path.string();
  core::SafetensorsFile file(path);

  LatentFile result;
  const auto meta_it = file.metadata().find(kMetaKey);
  if (meta_it != file.metadata().end()) {
    try {
      result.meta = parse_latent_meta(meta_it->second);
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
    result.has_meta = true;
  } else {
    // Nothing is known about a file vaecodec did not write, not even which vaecodec it was.
    result.meta.vaecodec_version.clear();
  }
  if (stored_scale) {
    if (!(*stored_scale > 0)) throw Error(where + ": a latent scale must be positive");
    if (result.has_meta && !result.meta.scale_applied)
      throw Error(where +
                  ": its record says the latents are stored unscaled; decode it without --latent-scale");
    if (!result.has_meta) {
      result.meta.scale = *stored_scale;
      result.meta.scale_applied = true;
    }
  }

  const auto [name, format] = find_latent_tensor(file, where);
  result.format = format;
  const core::SafetensorsFile::Entry& entry = file.entries().at(name);
  const bool musubi = format == "musubi";  // [C, F, H, W]: one clip without its batch axis
  if (entry.shape.size() != (musubi ? 4u : 5u)) {
    throw Error(where + ": tensor '" + name + "' has shape " + core::shape_string(entry.shape) +
                ", but latents are [B, C, T, h, w]");
  }
  if (!is_latent_dtype(entry.dtype)) {
    throw Error(where + ": tensor '" + name + "' is " + std::string(c10::toString(entry.dtype)) +
                "; latents must be floating point");
  }

  torch::Tensor values = file.load(name);
  if (musubi) values = values.unsqueeze(0);
  check_finite(values, where);
  values = values.to(torch::kDouble);
  if (format == "latent") {
    if (!file.entries().count(kComfyVersionMarker)) values = values / kComfyLegacyScale;
    if (result.meta.scale_applied) values = values / result.meta.scale;
    if (!normalization.empty()) {
      auto [mean, std] = channel_stats(normalization, values.size(1), where);
      values = (values - mean) / std;
    }
  } else if (result.meta.scale_applied) {
    values = values / result.meta.scale;
  }
  result.latents = values.to(torch::kFloat);
  result.meta.latent_channels = entry.shape[musubi ? 0 : 1];
  return result;
}

void check_latents_match(const LatentMeta& meta, const std::string& family, int64_t latent_channels,
                         const std::string& path) {
  if (!meta.family.empty() && meta.family != family) {
    throw Error(path + ": latents were made by " + meta.family + ", but the weights are " + family);
  }
  if (meta.latent_channels && *meta.latent_channels != latent_channels) {
    throw Error(path + ": latents have " + std::to_string(*meta.latent_channels) + " channels, but the " +
                family + " weights expect " + std::to_string(latent_channels));
  }
}

}  // namespace vaecodec::io
