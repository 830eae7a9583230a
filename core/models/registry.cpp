#include "core/models/registry.h"

#include <mutex>

#include "core/device/device.h"
#include "core/diffusers_folder.h"
#include "core/error.h"
#include "core/kernels/conv3d.h"
#include "core/models/families.h"
#include "core/state_dict_keys.h"
#include "core/untrusted_json.h"

namespace vaecodec::core {

#define VAECODEC_DECLARE_FAMILY(record) ModelFamily record();
VAECODEC_BUILTIN_MODEL_FAMILIES(VAECODEC_DECLARE_FAMILY)
#undef VAECODEC_DECLARE_FAMILY

namespace {

std::string describe_missing(const ModelFamily& f) {
  if (f.name.empty()) return "it has no name";
  if (!f.detect) return "it has no detection (detect)";
  if (!f.describe) return "it has no description of its models (describe)";
  if (!f.build) return "it cannot build a model (build)";
  for (const Op op : {Op::kEncode, Op::kDecode}) {
    bool found = false;
    for (const auto& row : f.calibration)
      found = found || (row.op == op && row.peak_gib > 0 && row.width > 0);
    if (!found)
      return "it has no memory calibration for " + op_name(op) +
             " (the planner could not budget its runs; Note [Memory model] in core/plan_model.h)";
  }
  for (const auto& layout : f.layouts)
    if (layout.name.empty() || !layout.matches || !layout.to_original)
      return "a weight layout lacks its name, its test or its renaming";
  return "";
}

struct Registry {
  std::mutex mutex;
  std::deque<ModelFamily> families;

  void add(ModelFamily family) {
    const std::string missing = describe_missing(family);
    if (!missing.empty()) throw Error("model family '" + family.name + "' cannot be registered: " + missing);
    for (const auto& f : families)
      if (f.name == family.name) throw Error("model family '" + family.name + "' is registered twice");
    families.push_back(std::move(family));
  }
};

Registry& registry() {
  static Registry* r = [] {
    auto* created = new Registry;
#define VAECODEC_ADD_FAMILY(record) created->add(record());
    VAECODEC_BUILTIN_MODEL_FAMILIES(VAECODEC_ADD_FAMILY)
#undef VAECODEC_ADD_FAMILY
    return created;
  }();
  return *r;
}

// Note [Config in the weights file]
// What the tensor shapes cannot tell (SeedVR2's norm_num_groups) may be written into a safetensors file's
// __metadata__ under "vaecodec_config", a JSON object of config keys (the CLI tests give the tiny SeedVR2
// model its 8 norm groups that way). Released files have none and get the released values.
constexpr const char* kConfigMetadataKey = "vaecodec_config";

nlohmann::json file_config(const Checkpoint& checkpoint) {
  const auto it = checkpoint.metadata.find(kConfigMetadataKey);
  if (it == checkpoint.metadata.end()) return nullptr;
  nlohmann::json config;
  try {
    config = parse_untrusted_json(it->second);
  } catch (const Error& e) {
    throw Error(checkpoint.path.string() + ": __metadata__[\"" + kConfigMetadataKey + "\"]: " + e.what());
  }
  if (!config.is_object())
    throw Error(checkpoint.path.string() + ": __metadata__[\"" + kConfigMetadataKey +
                "\"] is not a JSON object: " + json_excerpt(config));
  return config;
}

// The detected config, then the file's own keys, then the latent statistics of a diffusers folder's config
// (Note [Latent statistics in the config] in core/vae_model.h), then the caller's.
nlohmann::json with_overrides(nlohmann::json detected, const Checkpoint& checkpoint,
                              const ModelOptions& options = {}) {
  const nlohmann::json from_file = file_config(checkpoint);
  if (from_file.is_object()) detected.update(from_file);
  if (checkpoint.config.is_object())
    for (const char* key : kStatisticsKeys)
      if (const auto it = checkpoint.config.find(key); it != checkpoint.config.end() && !it->is_null())
        detected[key] = *it;
  if (options.config.is_object()) detected.update(options.config);
  return detected;
}

// The first family whose detection accepts the tensors, with its config (file and caller keys applied).
std::optional<std::pair<const ModelFamily*, nlohmann::json>> detect_family(const Checkpoint& checkpoint,
                                                                           const ModelOptions& options) {
  for (const auto& family : model_families())
    if (auto config = family.detect(checkpoint.tensors))
      return std::make_pair(&family, with_overrides(*config, checkpoint, options));
  return std::nullopt;
}

// What a family makes of a config read off a checkpoint; its config errors name the checkpoint.
template <typename Make>
auto from_config(const Checkpoint& checkpoint, Make&& make) {
  try {
    return make();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw Error(checkpoint.path.string() + ": " + e.what());
  }
}

[[noreturn]] void unknown_model(const Checkpoint& checkpoint) {
  throw Error(checkpoint.path.string() + ": not a known VAE (" + std::to_string(checkpoint.tensors.size()) +
              " tensors match none of: " + model_family_names() + ")");
}

}  // namespace

const std::deque<ModelFamily>& model_families() {
  return registry().families;
}

void register_model_family(ModelFamily family) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.add(std::move(family));
}

const ModelFamily& find_model_family(const std::string& name) {
  for (const auto& f : model_families())
    if (f.name == name) return f;
  throw UsageError("unknown model '" + name + "' (known: " + model_family_names() + ")");
}

std::string model_family_names() {
  std::string names;
  for (const auto& f : model_families()) names += (names.empty() ? "" : ", ") + f.name;
  return names;
}

const ModelFamily& default_model_family() {
  return find_model_family(VAECODEC_DEFAULT_MODEL_FAMILY);
}

std::string normalize_layout(StateDict& tensors) {
  strip_wrapper_prefixes(tensors);
  for (const auto& family : model_families())
    for (const auto& layout : family.layouts)
      if (layout.matches(tensors)) {
        layout.to_original(tensors);
        return layout.name;
      }
  return "original";
}

Checkpoint load_checkpoint(const std::filesystem::path& path) {
  Checkpoint checkpoint = read_checkpoint(path);
  try {
    checkpoint.layout = normalize_layout(checkpoint.tensors);
  } catch (const Error& e) {
    throw Error(path.string() + ": " + e.what());
  }
  return checkpoint;
}

ModelInfo recognise_model(const Checkpoint& checkpoint) {
  const auto found = detect_family(checkpoint, {});
  if (!found) unknown_model(checkpoint);
  return from_config(checkpoint, [&] { return found->first->describe(found->second); });
}

std::shared_ptr<VaeModel> build_model(const std::string& family, const nlohmann::json& config) {
  return find_model_family(family).build(config);
}

std::shared_ptr<VaeModel> build_model(const Checkpoint& checkpoint, const ModelOptions& options) {
  std::shared_ptr<VaeModel> model;
  if (!options.family.empty()) {
    const auto& family = find_model_family(options.family);
    auto config = family.detect(checkpoint.tensors);
    if (!config)
      throw Error(checkpoint.path.string() + ": the tensors do not form a " + options.family + " checkpoint");
    model =
        from_config(checkpoint, [&] { return family.build(with_overrides(*config, checkpoint, options)); });
  } else {
    const auto found = detect_family(checkpoint, options);
    if (!found) unknown_model(checkpoint);
    model = from_config(checkpoint, [&] { return found->first->build(found->second); });
  }
  model->load(checkpoint);
  place_model(*model, options);
  return model;
}

std::string choices_refusal(const std::string& family, const ModelOptions& options) {
  if (!options.choices.fp8) return "";
  if (options.choices.conv == ConvBackend::kCudnn)
    return "dtype fp8 runs on vaecodec's own convolution kernels, which --conv cudnn turns off";
  std::string why = kernels::fp8_refusal(options.device);
  if (why.empty()) why = find_model_family(family).no_fp8;
  return why.empty() ? "" : "dtype fp8: " + why + "; use bf16";
}

// Note [Channels-last on the CPU]
// The GPU runs channels-last for cuDNN and the own kernels (Note [Channels-last]). On the CPU float32
// convolutions go to oneDNN (Note [Convolutions on the CPU] in core/layers.cpp), which reads channels-last in
// place but reorders the plain layout into its own blocked one and back at every call, so float32 runs
// channels-last there too (the 2-core machine, 320x240 x49 round trip of the demonstration Wan2.1: 14.2 s
// plain, 12.7 s channels-last; SeedVR2 x17, its norm reading the layout in place: 14.2-15.0 s, 12.8 s).
// float64 (the golden tests) and the CPU's 16-bit types keep the plain layout, where LibTorch's own
// convolutions run.
void place_model(VaeModel& model, const ModelOptions& options) {
  const std::string refusal = choices_refusal(model.info().family, options);
  if (!refusal.empty()) throw UsageError(refusal);
  model.set_choices(options.choices);
  Device::of(options.device).prepare(options.dtype);
  model.to(options.device, options.dtype);
  // Note [Channels-last on the CPU]
  model.set_channels_last(
      options.channels_last.value_or(options.device.is_cuda() || options.dtype == torch::kFloat));
  model.eval();
}

}  // namespace vaecodec::core
