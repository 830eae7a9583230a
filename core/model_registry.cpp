#include "core/model_registry.h"

#include "core/error.h"
#include "core/seedvr2_vae.h"
#include "core/wan21_vae.h"
#include "core/wan22_vae.h"

namespace vaecodec::core {

const std::vector<ModelFamily>& model_families() {
  static const std::vector<ModelFamily> families = {
      {"wan2.2-vae",
       [](const StateDict& t) -> std::optional<nlohmann::json> {
         if (auto c = Wan22Vae::detect(t)) return c->to_json();
         return std::nullopt;
       },
       [](const nlohmann::json& config) -> std::shared_ptr<VaeModel> {
         return std::make_shared<Wan22Vae>(Wan22Config::from_json(config));
       },
       Wan22Config{}.to_json()},
      {"wan2.1-vae",
       [](const StateDict& t) -> std::optional<nlohmann::json> {
         if (auto c = Wan21Vae::detect(t)) return c->to_json();
         return std::nullopt;
       },
       [](const nlohmann::json& config) -> std::shared_ptr<VaeModel> {
         return std::make_shared<Wan21Vae>(Wan21Config::from_json(config));
       },
       Wan21Config{}.to_json()},
      {"seedvr2-vae",
       [](const StateDict& t) -> std::optional<nlohmann::json> {
         if (auto c = SeedVR2Vae::detect(t)) return c->to_json();
         return std::nullopt;
       },
       [](const nlohmann::json& config) -> std::shared_ptr<VaeModel> {
         return std::make_shared<SeedVR2Vae>(SeedVR2Config::from_json(config));
       },
       SeedVR2Config{}.to_json()},
  };
  return families;
}

const ModelFamily& find_model_family(const std::string& name) {
  for (const auto& f : model_families())
    if (f.name == name) return f;
  throw Error("unknown model '" + name + "' (known: " + model_family_names() + ")");
}

std::string model_family_names() {
  std::string names;
  for (const auto& f : model_families()) names += (names.empty() ? "" : ", ") + f.name;
  return names;
}

}  // namespace vaecodec::core
