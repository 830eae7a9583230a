// The Wan2.2 (48-channel) model: the released architecture's tensors, recognition before Wan2.1 and chunk
// invariance. Its golden cases run in test_golden.cpp.
#include <catch2/catch.hpp>

#include "core/engine.h"
#include "core/error.h"
#include "core/models/registry.h"
#include "core/models/wan21/wan21_vae.h"
#include "core/models/wan22/wan22_vae.h"
#include "core/vae_model.h"
#include "tests/test_support.h"

namespace vaecodec::test {
namespace {

std::filesystem::path wan22_dir() {
  return data_dir() / "wan22-tiny";
}

// Chunk invariance is a property of the algorithm: checked in float64, where what is left is rounding at
// 1e-15, not float32's summation order (which varies with a convolution's input length).
std::shared_ptr<core::VaeModel> tiny_wan22(torch::ScalarType dtype = torch::kFloat) {
  core::ModelOptions options;
  options.dtype = dtype;
  return core::build_model(core::load_checkpoint(wan22_dir() / "weights.safetensors"), options);
}

const std::map<std::string, torch::Tensor>& wan22_cases() {
  static const auto cases = read_tensors(wan22_dir() / "cases.safetensors");
  return cases;
}

}  // namespace

TEST_CASE("the released Wan2.2 model expects exactly the released tensors", "[wan22]") {
  auto model = released_model_matching("wan2.2-vae", "wan22-released-keys.json", 196);
  const auto& info = model->info();
  CHECK(info.family == "wan2.2-vae");
  CHECK(info.latent_channels == 48);
  CHECK(info.spatial_factor == 16);
  CHECK(info.temporal_factor == 4);
  const auto meta = read_json(wan22_dir() / "meta.json");
  CHECK(info.latent_mean == meta.at("latent_mean").get<std::vector<float>>());
  CHECK(info.latent_std == meta.at("latent_std").get<std::vector<float>>());
}

TEST_CASE("a Wan2.2 checkpoint is recognised as Wan2.2, with its config", "[wan22]") {
  const auto checkpoint = core::load_checkpoint(wan22_dir() / "weights.safetensors");
  CHECK_FALSE(core::Wan21Vae::detect(checkpoint.tensors).has_value());
  const auto info = core::recognise_model(checkpoint);
  CHECK(info.family == "wan2.2-vae");
  CHECK(info.config == read_json(wan22_dir() / "meta.json").at("config"));
  const auto wan21 = core::load_checkpoint(data_dir() / "wan21-tiny" / "weights.safetensors");
  CHECK_FALSE(core::Wan22Vae::detect(wan21.tensors).has_value());
}

TEST_CASE("Wan2.2 refuses a chunk that splits the time-halving stages' frame pairs", "[wan22][chunks]") {
  auto model = tiny_wan22();
  torch::InferenceMode guard;
  core::CausalCache cache;
  const auto video = wan22_cases().at("video");
  model->encode(video.narrow(2, 0, 1), cache);
  REQUIRE_THROWS_WITH(model->encode(video.narrow(2, 1, 2), cache), Catch::Contains("halves time"));
}

}  // namespace vaecodec::test
