// Chunk invariance (Note [Causal cache] in core/causal_cache.h): a run's result
// does not depend on how many latent frames each model call takes. A property of the algorithm, so checked in
// float64, where what is left is rounding at 1e-15 (float32's summation order varies with a convolution's
// input length, ~2e-6), for every registered family on its tiny model and golden cases.
#include <catch2/catch.hpp>

#include "core/engine.h"
#include "tests/tiny_models.h"

namespace vaecodec::test {

TEST_CASE("every family's decode does not depend on the chunk length", "[chunks]") {
  for (const TinyModel& tiny : tiny_models()) {
    INFO(tiny.family);
    auto model = load_tiny(tiny, torch::kCPU, torch::kDouble);
    const auto latent = read_tensors(tiny.folder / "cases.safetensors").at("latent").to(torch::kDouble);
    const auto reference = core::decode_latents(*model, latent, {1});
    REQUIRE(reference.size(2) == 1 + model->info().temporal_factor * (latent.size(2) - 1));
    for (int64_t chunk : {2, 3, 1000}) {
      const auto out = core::decode_latents(*model, latent, {chunk});
      REQUIRE(out.sizes() == reference.sizes());
      INFO("chunk " << chunk);
      CHECK(relative_error(out, reference) <= 1e-12);
    }
  }
}

TEST_CASE("every family's encode does not depend on the chunk length", "[chunks]") {
  for (const TinyModel& tiny : tiny_models()) {
    INFO(tiny.family);
    auto model = load_tiny(tiny, torch::kCPU, torch::kDouble);
    const auto video = read_tensors(tiny.folder / "cases.safetensors").at("video").to(torch::kDouble);
    const auto reference = core::encode_video(*model, video, {1});  // frame 0, then 4 frames at a time
    REQUIRE(reference.size(2) == 1 + (video.size(2) - 1) / model->info().temporal_factor);
    for (int64_t chunk : {2, 1000}) {  // frame 0 + 4, then 8 frames at a time; everything in one call
      const auto out = core::encode_video(*model, video, {chunk});
      REQUIRE(out.sizes() == reference.sizes());
      INFO("chunk " << chunk * 4 << " frames");
      CHECK(relative_error(out, reference) <= 1e-12);
    }
  }
}

TEST_CASE("a run reports its progress after every chunk, whatever its split", "[chunks][tiling]") {
  // The engine counts (ChunkOptions::progress), so no front end asks which split runs: an encode's input
  // frames, a decode's output frames, after every chunk, for the whole frame and for blended tiles (tiles
  // through time: test_exact_tiles.cpp).
  const TinyModel tiny = tiny_models().front();
  auto model = load_tiny(tiny, torch::kCPU, torch::kDouble);
  const int64_t tf = model->info().temporal_factor;
  const auto video = read_tensors(tiny.folder / "cases.safetensors")
                         .at("video")
                         .to(torch::kDouble)
                         .narrow(2, 0, 1 + 2 * tf);  // three latent frames: chunks of one give three reports
  const int64_t latent_h = video.size(3) / model->info().spatial_factor;
  const int64_t latent_w = video.size(4) / model->info().spatial_factor;
  for (const bool tiled : {false, true}) {
    core::ChunkOptions options{1};
    if (tiled) {
      options.tiles = core::TileGrid::cover(latent_h, latent_w, {latent_h, latent_w / 2 + 1}, 1);
      REQUIRE(options.tiles.tiled());
      options.kind = core::SplitKind::kBlendedTiles;
    }
    std::vector<int64_t> told;
    options.progress = [&told](int64_t done) { told.push_back(done); };
    INFO((tiled ? "blended tiles" : "whole"));
    const auto latents = core::encode_video(*model, video, options);
    CHECK(told == std::vector<int64_t>{1, 1 + tf, 1 + 2 * tf});
    told.clear();
    core::decode_latents(*model, latents, options);
    CHECK(told == std::vector<int64_t>{1, 1 + tf, 1 + 2 * tf});
  }
}

TEST_CASE("a plan's kind must fit its options", "[chunks][tiling]") {
  auto model = load_tiny(tiny_models().front(), torch::kCPU, torch::kDouble);
  const auto latents = torch::randn({1, model->info().latent_channels, 1, 8, 8}, torch::kDouble);
  core::ChunkOptions options{1, core::TileGrid::cover(8, 8, {8, 5}, 2)};
  REQUIRE(options.tiles.tiled());
  CHECK_THROWS_WITH(core::decode_latents(*model, latents, options),
                    Catch::Contains("a plan of kind whole has tiles that cut the frame"));
  options.kind = core::SplitKind::kBands;
  CHECK_THROWS_WITH(core::decode_latents(*model, latents, options),
                    Catch::Contains("a plan of kind bands has fewer than two places"));
}

TEST_CASE("every registered family has a tiny model with golden cases", "[chunks]") {
  const auto tiny = tiny_models();
  size_t families = 0;
  for (const auto& family : core::model_families()) families += decoder_looks_ahead(family) ? 0 : 1;
  REQUIRE(tiny.size() == families);
  for (const TinyModel& t : tiny) {
    INFO(t.family);
    const auto cases = read_tensors(t.folder / "cases.safetensors");
    CHECK(cases.count("video") == 1);
    CHECK(cases.count("latent") == 1);
  }
}

}  // namespace vaecodec::test
