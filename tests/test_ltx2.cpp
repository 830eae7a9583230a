// The LTX-2 VAE: the config read off the tensors, the golden cases of diffusers' AutoencoderKLLTX2Video
// (tests/data/ltx2-tiny, float64), streaming decodes that equal the whole clip, and the weight layouts.
// LibTorch before Catch: c10 defines a CHECK macro of its own, and Catch's must be the one left.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include "core/engine.h"
#include "core/models/ltx2/ltx2_config.h"
#include "core/models/ltx2/ltx2_vae.h"
#include "core/models/registry.h"
#include "core/state_dict_keys.h"
#include "core/tile_grid.h"
#include "tests/test_support.h"
#include "tests/tiles_support.h"

namespace vaecodec::test {
namespace {

std::filesystem::path ltx2_dir() {
  return data_dir() / "ltx2-tiny";
}

const std::map<std::string, torch::Tensor>& ltx2_cases() {
  static const auto cases = read_tensors(ltx2_dir() / "cases.safetensors");
  return cases;
}

// The released names and shapes, holding no memory; the statistics are real tensors (detection reads them).
core::StateDict released_shapes(const std::string& manifest) {
  core::StateDict tensors;
  const auto keys = read_json(data_dir() / manifest);
  for (const auto& [name, shape] : keys.items())
    tensors[name] = torch::ones({1}).expand(shape.get<std::vector<int64_t>>());
  return tensors;
}

// Decodes latents in chunks of the given lengths (cycled), straight through the model, then ends the clip.
torch::Tensor decode_in_chunks(core::VaeModel& model, const torch::Tensor& z, std::vector<int64_t> lengths) {
  torch::InferenceMode guard;
  core::CausalCache cache;
  std::vector<torch::Tensor> parts;
  for (int64_t at = 0, i = 0; at < z.size(2); ++i) {
    const int64_t n = std::min(lengths[i % lengths.size()], z.size(2) - at);
    parts.push_back(model.decode(z.narrow(2, at, n), cache));
    at += n;
  }
  parts.push_back(model.decode_end(cache));
  return torch::cat(parts, 2);
}

// A plan of blended tiles on `grid`, `chunk` latent frames per call.
core::ChunkOptions blended(int64_t chunk, const core::TileGrid& grid) {
  core::ChunkOptions o{chunk, grid};
  o.kind = core::SplitKind::kBlendedTiles;
  return o;
}

}  // namespace

TEST_CASE("LTX-2 configs are read off the released tensors", "[ltx2][weights]") {
  for (const auto& [manifest, tag] : {std::pair<std::string, std::string>{"ltx2-released-keys.json", "20"},
                                      {"ltx23-released-keys.json", "23"}}) {
    INFO(manifest);
    const auto tensors = released_shapes(manifest);
    auto config = core::LTX2Vae::detect(tensors);
    REQUIRE(config);
    CHECK(config->latents_mean == std::vector<float>(128, 1.0f));
    config->latents_mean.reset();
    config->latents_std.reset();
    const auto released = tag == "20" ? core::LTX2Config::released_20() : core::LTX2Config::released_23();
    CHECK(config->to_json() == released.to_json());
    CHECK(config->decode_lag() == (tag == "20" ? 173 : 108));
    CHECK(config->spatial_factor() == 32);
    CHECK(config->temporal_factor() == 8);
    // Most specific first: no other family claims them.
    for (const auto& family : core::model_families())
      if (family.name != "ltx2-vae") CHECK_FALSE(family.detect(tensors));
  }
}

TEST_CASE("the released LTX-2 models expect exactly the released tensors", "[ltx2][weights]") {
  auto model = released_model_matching("ltx2-vae", "ltx23-released-keys.json", 170);
  CHECK(model->info().latent_channels == 128);
  CHECK(model->info().decode_lag == 108);
  CHECK(model->parameter_count() == 726106225);
  model.reset();
  const auto config = core::LTX2Config::released_20().to_json();
  auto model20 = core::build_model("ltx2-vae", config);
  const auto keys = read_json(data_dir() / "ltx2-released-keys.json");
  const auto expected = model20->expected_tensors();
  REQUIRE(expected.size() == keys.size());
  for (const auto& [name, shape] : expected) {
    INFO(name);
    REQUIRE(keys.contains(name));
    CHECK(keys.at(name).get<std::vector<int64_t>>() == shape);
  }
}

TEST_CASE("the tiny LTX-2 models are recognised with their statistics and lag", "[ltx2][weights]") {
  const auto meta = read_json(ltx2_dir() / "meta.json");
  for (const std::string tag : {"20", "23"}) {
    INFO(tag);
    const auto checkpoint = core::load_checkpoint(tiny_ltx2_weights(tag));
    CHECK(checkpoint.layout == "original");
    const auto info = core::recognise_model(checkpoint);
    CHECK(info.family == "ltx2-vae");
    CHECK(info.latent_channels == 4);
    CHECK(info.spatial_factor == 32);
    CHECK(info.temporal_factor == 8);
    CHECK(info.decode_lag == meta.at("held_back_output_frames").at(tag).get<int64_t>());
    const auto mean = checkpoint.tensors.at("per_channel_statistics.mean-of-means").to(torch::kFloat);
    REQUIRE(info.latent_mean.size() == 4);
    for (int c = 0; c < 4; ++c) CHECK(info.latent_mean[c] == mean[c].item<float>());
    CHECK(info.config.at("decoder_spatial_padding_mode") == (tag == "20" ? "reflect" : "zeros"));
  }
}

TEST_CASE("LTX-2 encodes and decodes the golden cases in float64", "[ltx2][golden]") {
  const auto& cases = ltx2_cases();
  const auto video = cases.at("video").to(torch::kDouble);
  for (const std::string tag : {"20", "23"}) {
    INFO(tag);
    auto model = tiny_ltx2(tag);
    CHECK(relative_error(core::encode_video(*model, video), cases.at(tag + ".video_mu")) < 1e-10);
    CHECK(relative_error(core::encode_video(*model, video.narrow(2, 0, 1)), cases.at(tag + ".image_mu")) <
          1e-10);
    const auto latent = cases.at(tag + ".latent");
    const auto decoded = core::decode_latents(*model, latent);
    REQUIRE(decoded.sizes() == cases.at(tag + ".latent_decoded").sizes());
    CHECK(relative_error(decoded, cases.at(tag + ".latent_decoded")) < 1e-10);
    const auto image = core::decode_latents(*model, latent.narrow(2, 0, 1));
    REQUIRE(image.sizes() == cases.at(tag + ".image_decoded").sizes());
    CHECK(relative_error(image, cases.at(tag + ".image_decoded")) < 1e-10);
  }
}

TEST_CASE("LTX-2 decodes in chunks of any length as the whole clip", "[ltx2][chunks]") {
  for (const std::string tag : {"20", "23"}) {
    INFO(tag);
    auto model = tiny_ltx2(tag);
    // 2 x 2 latent pixels: reflection needs two.
    const auto z = torch::randn({1, 4, 7, 2, 2}, torch::TensorOptions().dtype(torch::kDouble));
    const auto whole = decode_in_chunks(*model, z, {7});
    REQUIRE(whole.size(2) == 1 + 8 * 6);
    for (const auto& lengths : std::vector<std::vector<int64_t>>{{1}, {2}, {3}, {1, 4}, {5, 1}, {6}}) {
      INFO("chunks of " << lengths.front() << (lengths.size() > 1 ? ", ..." : ""));
      CHECK(relative_error(decode_in_chunks(*model, z, lengths), whole) < 1e-12);
    }
    // Through the engine: the same frames for any chunk length.
    for (const int64_t chunk : {1, 2, 4}) {
      core::ChunkOptions options;
      options.latent_frames = chunk;
      CHECK(relative_error(core::decode_latents(*model, z, options), whole) < 1e-12);
    }
  }
}

TEST_CASE("an LTX-2 decode holds back exactly its lag", "[ltx2][chunks]") {
  auto model = tiny_ltx2("23");
  const int64_t lag = model->info().decode_lag;
  torch::InferenceMode guard;
  core::CausalCache cache;
  const auto z = torch::randn({1, 4, 16, 1, 2}, torch::TensorOptions().dtype(torch::kDouble));
  int64_t out = 0;
  for (int64_t i = 0; i < z.size(2); ++i) {
    out += model->decode(z.narrow(2, i, 1), cache).size(2);
    // Once enough latents have come, the frames settled are the clip's so far less the lag.
    if (1 + 8 * i >= lag) CHECK(out == 1 + 8 * i - lag);
  }
  CHECK(out + model->decode_end(cache).size(2) == 1 + 8 * 15);
}

TEST_CASE("LTX-2 decodes in blended tiles, each tile's held-back frames blended at the end",
          "[ltx2][tiling]") {
  for (const std::string tag : {"20", "23"}) {
    INFO(tag);
    auto model = tiny_ltx2(tag);
    const auto z = torch::randn({1, 4, 5, 4, 6}, torch::TensorOptions().dtype(torch::kDouble));
    const auto whole = core::decode_latents(*model, z);
    REQUIRE(whole.size(2) == 1 + 8 * 4);
    // A grid that does not cut the frame runs it whole.
    CHECK(relative_error(core::decode_latents(*model, z, blended(2, core::TileGrid::cover(4, 6, {8, 8}, 2))),
                         whole) < 1e-12);
    // 1 x 2 tiles of 4 x 4 latent pixels, and 2 x 2 of 3 x 4 (reflection needs two pixels a side).
    for (const auto& grid :
         {core::TileGrid::cover(4, 6, {4, 4}, 2), core::TileGrid::cover(4, 6, {3, 4}, 2)}) {
      INFO(grid.rows << "x" << grid.cols << " tiles");
      REQUIRE(grid.tiled());
      const auto tiled = core::decode_latents(*model, z, blended(1, grid));
      REQUIRE(tiled.sizes() == whole.sizes());
      // Each tile keeps its cache: chunks of any length give the same tiled clip.
      for (const int64_t chunk : {2, 3})
        CHECK(relative_error(core::decode_latents(*model, z, blended(chunk, grid)), tiled) < 1e-12);
      // Close, not equal: on a frame of 4 x 6 latent pixels nearly every pixel is near a tile's edge, where
      // the tile pads instead of seeing its neighbour (random latents, 2026-11-27: 0.34 and 0.48 for 2.0's
      // 1 x 2 and 2 x 2, 0.47 and 0.63 for 2.3's).
      CHECK(relative_error(tiled, whole) < 0.75);
    }
  }
}

TEST_CASE("LTX-2 encodes in chunks as the whole clip", "[ltx2][chunks]") {
  auto model = tiny_ltx2("20");
  const auto video = torch::rand({1, 3, 25, 32, 64}, torch::TensorOptions().dtype(torch::kDouble)) * 2 - 1;
  const auto whole = core::encode_video(*model, video);
  REQUIRE(whole.size(2) == 4);
  for (const int64_t chunk : {1, 2}) {
    core::ChunkOptions options;
    options.latent_frames = chunk;
    CHECK(relative_error(core::encode_video(*model, video, options), whole) < 1e-12);
  }
}

TEST_CASE("LTX-2 weights load from diffusers' names and the full checkpoint's", "[ltx2][weights]") {
  const auto original = core::load_checkpoint(tiny_ltx2_weights("23"));
  // diffusers' names by the documented rule (docs/ltx2-vae.md, "Checkpoint layouts"); 4 encoder blocks.
  auto to_diffusers = [](const std::string& name) -> std::string {
    if (name == "per_channel_statistics.mean-of-means") return "latents_mean";
    if (name == "per_channel_statistics.std-of-means") return "latents_std";
    auto p = core::split_key(name);
    const auto i = p.size() > 2 ? core::key_index(p[2]) : std::nullopt;
    if (!i || (p[1] != "down_blocks" && p[1] != "up_blocks")) return name;
    const std::string rest = core::join_key(p, 3);
    if (p[0] == "encoder") {
      if (*i == 8) return "encoder.mid_block.resnets." + core::join_key(p, 4);
      if (*i % 2 == 0)
        return "encoder.down_blocks." + std::to_string(*i / 2) + ".resnets." + core::join_key(p, 4);
      return "encoder.down_blocks." + std::to_string(*i / 2) + ".downsamplers.0." + rest;
    }
    if (*i == 0) return "decoder.mid_block.resnets." + core::join_key(p, 4);
    if (*i % 2 == 1) return "decoder.up_blocks." + std::to_string(*i / 2) + ".upsamplers.0." + rest;
    return "decoder.up_blocks." + std::to_string(*i / 2 - 1) + ".resnets." + core::join_key(p, 4);
  };
  core::StateDict diffusers = original.tensors;
  core::rename_keys(diffusers, to_diffusers);
  REQUIRE(diffusers.count("decoder.up_blocks.3.resnets.0.conv1.conv.weight"));
  CHECK(core::normalize_layout(diffusers) == "ltx2-diffusers");
  CHECK(diffusers.size() == original.tensors.size());
  for (const auto& [name, tensor] : original.tensors) {
    INFO(name);
    REQUIRE(diffusers.count(name));
    CHECK(torch::equal(diffusers.at(name), tensor));
  }

  // The full model file: the VAE under vae. beside other models, with the unused statistics.
  core::StateDict full;
  for (const auto& [name, tensor] : original.tensors) full["vae." + name] = tensor;
  full["model.diffusion_model.proj_in.weight"] = torch::zeros({2, 2});
  full["vae.per_channel_statistics.mean-of-stds"] = torch::zeros({4});
  CHECK(core::normalize_layout(full) == "ltx2-checkpoint");
  CHECK(full.size() == original.tensors.size());
  CHECK(core::LTX2Vae::detect(full));
}

TEST_CASE("random LTX-2 weights (bench --random) scale their latents by a spread near one",
          "[ltx2][weights]") {
  // randomize_parameters gives norm scales and latent spreads values in [0.8, 1.2]: a spread drawn as a small
  // weight (~0.02) would decode near-constant latents, which is not what a benchmark should time.
  auto model = tiny_ltx2("23", torch::kFloat);
  core::randomize_parameters(*model, /*seed=*/0);
  bool found = false;
  for (const auto& item : model->named_parameters()) {
    if (item.key().find("std-of-means") == std::string::npos) continue;
    found = true;
    CHECK(item.value().min().item<double>() >= 0.8);
    CHECK(item.value().max().item<double>() <= 1.2);
  }
  CHECK(found);
}

}  // namespace vaecodec::test
