// The SeedVR2 model: the released architecture's tensors, the config read off a checkpoint, chunk invariance
// and the older attention names. Its golden cases run in test_golden.cpp.
// LibTorch before Catch: c10 defines a CHECK macro of its own, and Catch's must be the one left.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include "core/engine.h"
#include "core/models/registry.h"
#include "core/models/seedvr2/seedvr2_blocks.h"
#include "core/models/seedvr2/seedvr2_vae.h"
#include "core/safetensors.h"
#include "core/vae_model.h"
#include "tests/gpu_support.h"
#include "tests/test_support.h"

namespace vaecodec::test {
namespace {

std::filesystem::path seedvr2_dir() {
  return data_dir() / "seedvr2-tiny";
}

// The tiny model as the golden test builds it: 8 norm groups, which its tensors cannot tell.
std::shared_ptr<core::VaeModel> tiny_seedvr2_from(const std::filesystem::path& file,
                                                  torch::ScalarType dtype = torch::kFloat) {
  core::ModelOptions options;
  options.dtype = dtype;
  options.config = read_json(seedvr2_dir() / "meta.json").at("config");
  return core::build_model(core::load_checkpoint(file), options);
}

// The tiny model in float32 (its chunk invariance, in float64, is every family's: tests/test_chunks.cpp).
std::shared_ptr<core::VaeModel> tiny_seedvr2() {
  return tiny_seedvr2_from(seedvr2_dir() / "weights.safetensors");
}

const std::map<std::string, torch::Tensor>& tiny_cases() {
  static const auto cases = read_tensors(seedvr2_dir() / "cases.safetensors");
  return cases;
}

// A state dict with the released names and shapes whose tensors take no memory (detection reads shapes only).
core::StateDict released_shapes() {
  core::StateDict tensors;
  const auto manifest = read_json(data_dir() / "seedvr2-released-keys.json");
  for (const auto& [name, shape] : manifest.items())
    tensors[name] = torch::zeros({1}).expand(shape.get<std::vector<int64_t>>());
  return tensors;
}

// A per-frame GroupNorm with random affine parameters.
std::shared_ptr<core::FrameGroupNorm> random_group_norm(int64_t channels, int64_t groups) {
  auto norm = std::make_shared<core::FrameGroupNorm>(channels, groups);
  torch::NoGradGuard no_grad;
  for (auto& p : norm->parameters()) p.copy_(torch::randn_like(p));
  return norm;
}

}  // namespace

TEST_CASE("the released SeedVR2 model expects exactly the released tensors", "[seedvr2][weights]") {
  auto model = released_model_matching("seedvr2-vae", "seedvr2-released-keys.json", 250);
  const auto& info = model->info();
  CHECK(info.family == "seedvr2-vae");
  CHECK(info.latent_channels == 16);
  CHECK(info.spatial_factor == 8);
  CHECK(info.temporal_factor == 4);
  CHECK(info.latent_scale == Approx(0.9152));
  CHECK(info.latent_mean.empty());
  CHECK(info.latent_std.empty());
}

TEST_CASE("a SeedVR2 state dict is recognised and its config read off the shapes", "[seedvr2][weights]") {
  SECTION("released") {
    const auto tensors = released_shapes();
    const auto config = core::SeedVR2Vae::detect(tensors);
    REQUIRE(config);
    CHECK(config->to_json() == core::find_model_family("seedvr2-vae").released_config);
    // Detection goes through the families most specific first: no other family claims it.
    for (const auto& family : core::model_families())
      CHECK(family.detect(tensors).has_value() == (family.name == "seedvr2-vae"));
  }
  SECTION("tiny: every key but the norm groups, which default to the released 32") {
    const auto meta = read_json(seedvr2_dir() / "meta.json").at("config");
    const auto checkpoint = core::load_checkpoint(seedvr2_dir() / "weights.safetensors");
    const auto config = core::SeedVR2Vae::detect(checkpoint.tensors);
    REQUIRE(config);
    auto expected = meta;
    expected["norm_num_groups"] = 32;
    CHECK(config->to_json() == expected);
    CHECK(tiny_seedvr2()->info().config == meta);  // with the override of ModelOptions::config
  }
  SECTION("a Wan2.1 checkpoint is not taken for SeedVR2") {
    const auto wan = core::load_checkpoint(data_dir() / "wan21-tiny" / "weights.safetensors");
    CHECK_FALSE(core::SeedVR2Vae::detect(wan.tensors));
  }
}

TEST_CASE("a named family overrides detection, a weights file may state its config", "[seedvr2][weights]") {
  const auto meta = read_json(seedvr2_dir() / "meta.json").at("config");
  const auto tensors = read_tensors(seedvr2_dir() / "weights.safetensors");
  TempDir dir;
  SECTION("the family of ModelOptions") {
    core::ModelOptions options;
    options.config = meta;
    options.family = "seedvr2-vae";
    const auto checkpoint = core::load_checkpoint(seedvr2_dir() / "weights.safetensors");
    CHECK(core::build_model(checkpoint, options)->info().family == "seedvr2-vae");
    options.family = "wan2.1-vae";
    REQUIRE_THROWS_WITH(core::build_model(checkpoint, options),
                        Catch::Contains("do not form a wan2.1-vae checkpoint"));
  }
  SECTION("__metadata__ vaecodec_config gives what the shapes cannot tell") {
    core::write_safetensors(dir / "stated.safetensors", tensors,
                            {{"vaecodec_config", R"({"norm_num_groups": 8})"}});
    const auto checkpoint = core::load_checkpoint(dir / "stated.safetensors");
    CHECK(core::recognise_model(checkpoint).config == meta);
    const auto model = core::build_model(checkpoint);
    CHECK(model->info().config == meta);
    const auto& latent = tiny_cases().at("latent");
    CHECK(torch::equal(core::decode_latents(*model, latent), core::decode_latents(*tiny_seedvr2(), latent)));
  }
  SECTION("without it the released 32 groups do not fit the tiny model, and the error says so") {
    REQUIRE_THROWS_WITH(core::build_model(core::load_checkpoint(seedvr2_dir() / "weights.safetensors")),
                        Catch::Contains("32 norm groups"));
  }
  SECTION("a stated config that is not a JSON object is an error naming the file") {
    core::write_safetensors(dir / "bad.safetensors", tensors, {{"vaecodec_config", "[8"}});
    REQUIRE_THROWS_WITH(core::build_model(core::load_checkpoint(dir / "bad.safetensors")),
                        Catch::Contains("bad.safetensors") && Catch::Contains("vaecodec_config"));
  }
}

TEST_CASE("SeedVR2 configs the model does not implement are refused", "[seedvr2]") {
  auto config = core::SeedVR2Config{}.to_json();
  config["use_quant_conv"] = true;
  REQUIRE_THROWS_WITH(core::SeedVR2Config::from_json(config), Catch::Contains("use_quant_conv true"));
  config = core::SeedVR2Config{}.to_json();
  config["norm_num_groups"] = 24;  // 128 channels do not split into 24 groups
  REQUIRE_THROWS_WITH(core::build_model("seedvr2-vae", config), Catch::Contains("24 norm groups"));
}

TEST_CASE("on CUDA the fused per-frame GroupNorm matches float64", "[seedvr2][gpu]") {
  if (!cuda_here()) return;
  torch::manual_seed(0);
  struct Shape {
    int64_t b, c, t, h, w, groups;
  };
  // 16-byte packs (C = 32, 128), single elements (C = 12), many blocks per frame (90x160), batch > 1.
  for (const Shape s : {Shape{2, 32, 3, 7, 5, 8}, Shape{1, 12, 2, 9, 11, 4}, Shape{1, 128, 2, 90, 160, 32}}) {
    for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
      INFO("shape " << s.b << "x" << s.c << "x" << s.t << "x" << s.h << "x" << s.w << " groups " << s.groups
                    << " " << c10::toString(dtype));
      auto norm = random_group_norm(s.c, s.groups);
      // Values off centre, as activations are: the statistics must not lose the variance to the mean.
      const auto x = (torch::randn({s.b, s.c, s.t, s.h, s.w}) * 0.5 + 3.0)
                         .to(torch::kCUDA, dtype)
                         .contiguous(torch::MemoryFormat::ChannelsLast3d);
      // The composite path in float64, from the very values the kernel reads.
      const auto expected = norm->forward(x.cpu().to(torch::kDouble), /*silu=*/true);
      norm->to(torch::kCUDA);
      // bf16 output rounding alone is ~2e-3 relative; float32 agrees to float32 rounding.
      const double tolerance = dtype == torch::kFloat ? 1e-5 : 5e-3;
      const auto direct = norm->forward(x, /*silu=*/true);
      CHECK(direct.is_contiguous(torch::MemoryFormat::ChannelsLast3d));
      CHECK(relative_error(direct.cpu().to(torch::kDouble), expected) <= tolerance);
      // Into the tail of a causal buffer: other frame and batch strides than x's.
      auto buffer = torch::zeros({s.b, s.c, s.t + 2, s.h, s.w},
                                 x.options().memory_format(torch::MemoryFormat::ChannelsLast3d));
      norm->forward_silu_into(x, buffer.narrow(2, 2, s.t));
      CHECK(relative_error(buffer.narrow(2, 2, s.t).cpu().to(torch::kDouble), expected) <= tolerance);
      CHECK(buffer.narrow(2, 0, 2).abs().max().item<double>() == 0);  // the head is left alone
    }
  }
}

TEST_CASE("SeedVR2 frame 0 alone is one latent frame and decodes to one frame", "[seedvr2][chunks]") {
  auto model = tiny_seedvr2();
  const auto z = core::encode_video(*model, tiny_cases().at("video").narrow(2, 0, 1));
  CHECK(z.sizes().vec() == std::vector<int64_t>{1, 16, 1, 8, 6});
  CHECK(z.scalar_type() == torch::kFloat);
  CHECK(core::decode_latents(*model, z).sizes().vec() == std::vector<int64_t>{1, 3, 1, 64, 48});
}

TEST_CASE("SeedVR2 checkpoints with the older attention names load the same model", "[seedvr2][weights]") {
  static const std::vector<std::pair<std::string, std::string>> kOldNames = {
      {".to_q.", ".query."}, {".to_k.", ".key."}, {".to_v.", ".value."}, {".to_out.0.", ".proj_attn."}};
  std::map<std::string, torch::Tensor> renamed;
  for (const auto& [name, tensor] : read_tensors(seedvr2_dir() / "weights.safetensors")) {
    std::string old_name = name;
    for (const auto& [from, to] : kOldNames)
      if (auto p = old_name.find(from); p != std::string::npos) old_name.replace(p, from.size(), to);
    renamed["vae." + old_name] = tensor;
  }
  REQUIRE(renamed.count("vae.encoder.mid_block.attentions.0.proj_attn.weight") == 1);
  TempDir dir;
  core::write_safetensors(dir / "legacy.safetensors", renamed);
  CHECK(core::load_checkpoint(dir / "legacy.safetensors").layout == "seedvr2-legacy-attention");

  const auto& latent = tiny_cases().at("latent");
  const auto from_legacy = core::decode_latents(*tiny_seedvr2_from(dir / "legacy.safetensors"), latent);
  CHECK(torch::equal(from_legacy, core::decode_latents(*tiny_seedvr2(), latent)));
}

}  // namespace vaecodec::test
