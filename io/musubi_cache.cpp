#include "io/musubi_cache.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>

#include "core/error.h"
#include "core/json_text.h"
#include "core/models/registry.h"
#include "core/safetensors.h"

namespace vaecodec::io {
namespace {

// Note [musubi-tuner's latent cache]: the trainer's names and values.
constexpr const char* kArchitecture = "wan";
constexpr const char* kFormatVersion = "1.0.1";
constexpr int64_t kBucketStep = 16;

// torch's name of a dtype, as str(torch.bfloat16) ends: the suffix of the tensor's key.
std::string torch_dtype_name(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kBFloat16:
      return "bfloat16";
    case torch::kHalf:
      return "float16";
    case torch::kFloat:
      return "float32";
    default:
      throw Error(std::string("musubi-tuner's cache holds bfloat16, float16 or float32 latents, not ") +
                  c10::toString(dtype));
  }
}

}  // namespace

std::string musubi_item_key(const MusubiItem& item) {
  if (item.image) return item.stem;
  char window[48];
  std::snprintf(window, sizeof window, "_%05lld-%03lld", static_cast<long long>(item.start_frame),
                static_cast<long long>(item.frames));
  return item.stem + window;
}

std::string musubi_file_name(const MusubiItem& item) {
  char size[48];
  std::snprintf(size, sizeof size, "_%04lldx%04lld_", static_cast<long long>(item.width),
                static_cast<long long>(item.height));
  return musubi_item_key(item) + size + kArchitecture + ".safetensors";
}

std::optional<std::filesystem::path> find_musubi_cache(const std::filesystem::path& folder,
                                                       const std::string& stem) {
  static const std::regex kWindow("_[0-9]{5,}-[0-9]{3,}_[0-9]{4,}x[0-9]{4,}_");
  const std::string suffix = std::string(kArchitecture) + ".safetensors";
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= stem.size() + suffix.size() || name.compare(0, stem.size(), stem) != 0 ||
        !name.ends_with(suffix) || !entry.is_regular_file(error))
      continue;
    const std::string window = name.substr(stem.size(), name.size() - stem.size() - suffix.size());
    if (std::regex_match(window, kWindow)) return entry.path();
  }
  return std::nullopt;
}

int64_t musubi_frame_count(int64_t available) {
  return available < 1 ? 0 : 1 + 4 * ((available - 1) / 4);
}

namespace {

[[noreturn]] void refuse_family(const std::string& family) {
  throw UsageError(
      "--format musubi writes musubi-tuner's Wan cache, which holds latents of the Wan2.1 VAE "
      "(Wan2.1 and Wan2.2-14B); these weights are " +
      family);
}

}  // namespace

void check_musubi_family(const core::ModelFamily& family) {
  if (family.musubi_architecture != kArchitecture) refuse_family(family.name);
}

void check_musubi_model(const core::ModelInfo& info) {
  const auto& families = core::model_families();
  const auto family = std::find_if(families.begin(), families.end(),
                                   [&](const core::ModelFamily& f) { return f.name == info.family; });
  if (family == families.end()) refuse_family(info.family);
  check_musubi_family(*family);
}

void check_musubi_size(int64_t width, int64_t height, const std::filesystem::path& input) {
  if (width % kBucketStep == 0 && height % kBucketStep == 0) return;
  auto down = [](int64_t v) { return std::max<int64_t>(kBucketStep, v / kBucketStep * kBucketStep); };
  throw UsageError(
      "--format musubi: the frames of " + input.string() + " are " + std::to_string(width) + "x" +
      std::to_string(height) + ", but musubi-tuner's buckets are multiples of 16 pixels; resize or " +
      "crop them, e.g. --vf scale=" + std::to_string(down(width)) + ":" + std::to_string(down(height)));
}

void write_musubi_cache(core::AtomicFile& file, const torch::Tensor& latents, const MusubiItem& item,
                        const LatentMeta& record, torch::ScalarType dtype, const torch::Tensor& control) {
  const std::string where = file.final_path().string();
  auto stored = [&](const torch::Tensor& t, const char* what) {
    if (t.dim() != 5 || t.size(0) != 1)
      throw Error(where + ": musubi-tuner's cache holds one clip's " + what + " [1, C, F, H, W]");
    if (!torch::isfinite(t).all().item<bool>())
      throw Error(where + ": the " + what + " hold NaN or Inf values; nothing was written");
    return t[0].to(torch::kCPU, dtype).contiguous();  // [C, F, H, W]
  };
  const torch::Tensor z = stored(latents, "latents");
  const std::string shape = std::to_string(z.size(1)) + "x" + std::to_string(z.size(2)) + "x" +
                            std::to_string(z.size(3)) + "_" + torch_dtype_name(dtype);
  std::map<std::string, torch::Tensor> tensors = {{"latents_" + shape, z}};
  if (control.defined()) {
    const torch::Tensor c = stored(control, "control latents");
    if (c.sizes() != z.sizes())
      throw Error(where + ": the control clip's latents differ in shape from the clip's");
    tensors["latents_control_" + shape] = c;
  }
  LatentMeta meta = record;
  meta.latent_channels = z.size(0);
  std::map<std::string, std::string> metadata = {
      {"architecture", kArchitecture},
      {"width", std::to_string(item.width)},
      {"height", std::to_string(item.height)},
      {"format_version", kFormatVersion},
      {"vaecodec", core::json_text(to_json(meta))},
  };
  if (!item.image) metadata["frame_count"] = std::to_string(item.frames);
  core::write_safetensors(file, tensors, metadata);
}

}  // namespace vaecodec::io
