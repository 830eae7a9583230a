#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "core/memory_calibration.h"
#include "core/op.h"
#include "core/vae_model.h"

namespace vaecodec::core {

// Note [Model families]
// A model family is one folder under core/models/ and one record, ModelFamily, that the generic code asks for
// everything family-specific: the loader for its weight-name layouts, detection for its config read off the
// tensor shapes, the planner for its memory calibration, `bench`, `plan` and `inspect` for its released
// config and description. Nothing outside core/models/<family>/ names a family; docs/architecture.md walks
// through adding one. Records are checked when they are registered (register_model_family): a family that
// cannot be planned for (no calibration of encode and decode) or that has no detection is refused there, not
// at the first run that needs it.

// Another naming scheme of a family's weights (Note [Wan weight layouts] in core/models/wan/wan_layouts.cpp).
struct WeightLayout {
  std::string name;  // "diffusers", "seedvr2-legacy-attention", ...
  // Whether the (wrapper-stripped) tensors are written in this layout.
  std::function<bool(const StateDict&)> matches;
  // Renames the tensors to the family's original names (the names its model registers); throws Error when two
  // tensors land on one name.
  std::function<void(StateDict&)> to_original;
};

// Everything vaecodec knows about one model family.
struct ModelFamily {
  std::string name;         // "wan2.1-vae", ...; ModelInfo::family of its models
  std::string description;  // one line for `inspect` and `info`
  // The config of the released model (benchmarks, `plan`, --random).
  nlohmann::json released_config;
  // The family's config read off a state dict in its original layout, or nullopt if the tensors are not of
  // it. Must not build the model (inspect and recognise_model call it on every file).
  std::function<std::optional<nlohmann::json>(const StateDict&)> detect;
  // What a model of `config` is (latent channels, factors, statistics), without building it.
  std::function<ModelInfo(const nlohmann::json& config)> describe;
  // The model of `config`, with uninitialised weights on the CPU in float32.
  std::function<std::shared_ptr<VaeModel>(const nlohmann::json& config)> build;
  // Other names its weights circulate under; tried in order after the original names.
  std::vector<WeightLayout> layouts;
  // At least one row each for encode and decode; other dtypes are derived from a row by element size.
  std::vector<MemoryCalibration> calibration;
  // Why its models cannot run the fp8 convolutions (Note [FP8 convolutions] in core/kernels/conv3d.cpp), in a
  // few words; empty when they can. place_model refuses RunChoices::fp8 with it.
  std::string no_fp8;
  // What musubi-tuner calls the architecture whose cache holds this family's latents ("wan"; the
  // `_{architecture}.safetensors` ending of its cache files, Note [musubi-tuner's latent cache] in
  // io/musubi_cache.h); empty when musubi-tuner trains no model on them. `encode --format musubi` refuses
  // a family whose architecture is not one it writes.
  std::string musubi_architecture;
};

// Fills a record's detect, describe and build from a model class with `static std::optional<Config>
// detect(const StateDict&)` and `static ModelInfo describe(const Config&)`, constructed from its Config, and
// a Config with to_json and from_json (what the built-in families have).
template <typename Vae, typename Config>
void set_model_functions(ModelFamily& family) {
  family.detect = [](const StateDict& tensors) -> std::optional<nlohmann::json> {
    if (auto config = Vae::detect(tensors)) return config->to_json();
    return std::nullopt;
  };
  family.describe = [](const nlohmann::json& config) { return Vae::describe(Config::from_json(config)); };
  family.build = [](const nlohmann::json& config) -> std::shared_ptr<VaeModel> {
    return std::make_shared<Vae>(Config::from_json(config));
  };
}

}  // namespace vaecodec::core
