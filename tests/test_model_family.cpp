// A model family is one record (Note [Model families]): a family registered here, at run time, by a test that
// touches nothing else, is detected from its weights, loaded, planned for and run file to file by the CLI.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "app/commands.h"
#include "core/error.h"
#include "core/models/registry.h"
#include "core/plan_for.h"
#include "core/safetensors.h"
#include "io/latent_file.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

// The pass-through VAE with one weight, a gain on the decoded frames, so that its checkpoint has a tensor to
// detect it by and to load.
class GainVae : public PassThroughVae {
 public:
  GainVae() {
    info_ = PassThroughVae::info();
    info_.family = "gain-pass-through";
    gain_ = register_parameter("gain", torch::zeros({1}), /*requires_grad=*/false);
  }
  const core::ModelInfo& info() const override { return info_; }
  torch::Tensor decode_chunk(const torch::Tensor& z, core::CausalCache& cache) override {
    return PassThroughVae::decode_chunk(z, cache) * gain_.to(z.scalar_type());
  }

 private:
  core::ModelInfo info_;
  torch::Tensor gain_;
};

core::ModelFamily gain_family() {
  core::ModelFamily f;
  f.name = "gain-pass-through";
  f.description = "a test family: the pass-through VAE times one gain";
  f.released_config = nlohmann::json::object();
  f.detect = [](const core::StateDict& tensors) -> std::optional<nlohmann::json> {
    const auto it = tensors.find("gain");
    if (tensors.size() != 1 || it == tensors.end() || it->second.numel() != 1) return std::nullopt;
    return nlohmann::json::object();
  };
  f.describe = [](const nlohmann::json&) { return GainVae().info(); };
  f.build = [](const nlohmann::json&) -> std::shared_ptr<core::VaeModel> {
    return std::make_shared<GainVae>();
  };
  // Another naming scheme: the same weight under "scale".
  f.layouts = {{"scale-named",
                [](const core::StateDict& t) { return t.size() == 1 && t.count("scale") == 1; },
                [](core::StateDict& t) {
                  t = {{"gain", t.at("scale")}};
                }}};
  f.calibration = {
      {core::Op::kDecode, torch::kFloat, 0, 1, 64, 64, 9, 1, 0.25, 0, 1e-3, "a test row: decode"},
      {core::Op::kEncode, torch::kFloat, 0, 1, 64, 64, 9, 1, 0.125, 0, 1e-3, "a test row: encode"}};
  return f;
}

void register_gain_family() {
  static const bool registered = (core::register_model_family(gain_family()), true);
  (void)registered;
}

// The CLI, in this process (so that it sees the family registered here).
int run_in_process(std::vector<std::string> args) {
  args.insert(args.begin(), "vaecodec");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return app::run_cli(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("a registered family is detected, loaded, planned for and run by the CLI", "[family]") {
  register_gain_family();
  ScratchDir dir;
  const auto weights = dir / "gain.safetensors";
  core::write_safetensors(weights, {{"scale", torch::ones({1})}});

  // The loader: its layout renamed, its family recognised without building, then built and loaded.
  const core::Checkpoint checkpoint = core::load_checkpoint(weights);
  CHECK(checkpoint.layout == "scale-named");
  CHECK(core::recognise_model(checkpoint).family == "gain-pass-through");
  const auto model = core::build_model(checkpoint);
  CHECK(model->info().family == "gain-pass-through");
  CHECK(model->named_parameters()["gain"].item<float>() == 1.0f);

  // The planner: the family's own calibration, not another family's.
  const core::Plan plan =
      core::plan_run(core::plan_request(model->info(), 1, torch::kFloat, core::Op::kDecode, 64, 64), {});
  CHECK(plan.calibration == "a test row: decode");

  // The CLI: inspect, then encode and decode file to file.
  CHECK(run_in_process({"inspect", weights.string()}) == 0);
  const auto clip = make_clip(dir / "in.mkv", kTestsrc + "32x24:rate=24 -frames:v 9 -pix_fmt gbrp -c:v ffv1");
  const auto latents = dir / "z.safetensors", out = dir / "out.mkv";
  REQUIRE(run_in_process({"encode", clip.string(), "-o", latents.string(), "--weights", weights.string(),
                          "--device", "cpu", "--quiet"}) == 0);
  const io::LatentFile file = io::read_latents(latents);
  CHECK(file.meta.family == "gain-pass-through");
  CHECK(file.latents.size(1) == model->info().latent_channels);
  REQUIRE(run_in_process({"decode", latents.string(), "-o", out.string(), "--weights", weights.string(),
                          "--device", "cpu", "--codec", "ffv1", "--quiet"}) == 0);
  CHECK(probe(out).frames() == 9);
  CHECK(psnr(read_rgb(clip), read_rgb(out)) > 80.0);  // the pass-through is exact: only the I/O path is left
}

TEST_CASE("a family that the planner or the loader could not use is refused at registration", "[family]") {
  core::ModelFamily uncalibrated = gain_family();
  uncalibrated.name = "uncalibrated";
  uncalibrated.calibration.pop_back();  // no encode row
  CHECK_THROWS_WITH(core::register_model_family(uncalibrated),
                    Catch::Contains("'uncalibrated' cannot be registered") &&
                        Catch::Contains("no memory calibration for encode"));
  core::ModelFamily undetectable = gain_family();
  undetectable.name = "undetectable";
  undetectable.detect = nullptr;
  CHECK_THROWS_WITH(core::register_model_family(undetectable), Catch::Contains("no detection"));
  core::ModelFamily twice = gain_family();
  twice.name = core::default_model_family().name;
  CHECK_THROWS_WITH(core::register_model_family(twice), Catch::Contains("registered twice"));
  // None of them was added.
  for (const auto& f : core::model_families()) CHECK(f.name != "uncalibrated");
}

TEST_CASE("every registered family has a record the generic code can use", "[family]") {
  REQUIRE(core::model_families().size() >= 3);
  for (const core::ModelFamily& family : core::model_families()) {
    INFO(family.name);
    CHECK(!family.description.empty());
    // Its released config describes a model of the family without building it, and builds one that agrees.
    const core::ModelInfo described = family.describe(family.released_config);
    CHECK(described.family == family.name);
    const auto model = family.build(family.released_config);
    CHECK(model->info().family == family.name);
    CHECK(model->info().latent_channels == described.latent_channels);
    CHECK(model->info().spatial_factor == described.spatial_factor);
    CHECK(model->info().temporal_factor == described.temporal_factor);
    CHECK(model->info().latent_mean == described.latent_mean);
    // Its own released tensors are detected as its own, with the released config.
    core::StateDict tensors;
    for (const auto& [name, shape] : model->expected_tensors()) tensors[name] = torch::empty(shape);
    auto detected = family.detect(tensors);
    REQUIRE(detected.has_value());
    // Keys read off the tensors' values (LTX-2's latent statistics, per_channel_statistics) are not part of
    // what the shapes tell, and these tensors are uninitialised: compared where the released config has them.
    for (const char* key : {"latents_mean", "latents_std"})
      if (!family.released_config.contains(key)) detected->erase(key);
    CHECK(*detected == family.released_config);
  }
}

}  // namespace vaecodec::test
