#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "core/vae_model.h"

namespace vaecodec::core {

// One model family: how to recognise its checkpoints and build it from a config.
struct ModelFamily {
  std::string name;  // "wan2.1-vae", ...
  // The family's config read off a state dict in the original layout, or nullopt if the tensors are not of
  // it.
  std::function<std::optional<nlohmann::json>(const StateDict&)> detect;
  std::function<std::shared_ptr<VaeModel>(const nlohmann::json& config)> build;
  // The config of the released model (benchmarks, --random).
  nlohmann::json released_config;
};

// Every family vaecodec knows, most specific first (detection takes the first match).
const std::vector<ModelFamily>& model_families();
const ModelFamily& find_model_family(const std::string& name);  // throws listing the known names
std::string model_family_names();                               // "wan2.1-vae, ..."

}  // namespace vaecodec::core
