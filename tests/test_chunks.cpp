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
