// One clip split across devices in horizontal bands (Note [Bands across devices] in core/band_split.h): the
// split run equals the one-device run for all three families, encode and decode, at odd sizes, with any
// chunking; without the exchanges it would not; a failing band stops the others instead of leaving them
// waiting. On the CPU the bands are threads on the one CPU device, which runs the same exchanges as GPUs do.
#include <torch/cuda.h>
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "core/band_split.h"
#include "core/device/device.h"
#include "core/engine.h"
#include "core/error.h"
#include "core/models/registry.h"
#include "tests/test_support.h"

namespace vaecodec::test {
namespace {

struct Family {
  const char* folder;
  int64_t factor;  // pixels per latent row
};
constexpr Family kFamilies[] = {{"wan21-tiny", 8}, {"wan22-tiny", 16}, {"seedvr2-tiny", 8}};

// The tiny model as the golden tests build it (SeedVR2's norm groups come from its meta.json: the tensors
// cannot tell them).
std::shared_ptr<core::VaeModel> load(const Family& family, torch::Device device, torch::ScalarType dtype) {
  core::ModelOptions options;
  options.device = device;
  options.dtype = dtype;
  options.config = read_json(data_dir() / family.folder / "meta.json").at("config");
  return core::build_model(core::load_checkpoint(data_dir() / family.folder / "weights.safetensors"),
                           options);
}

// `n` models of the family on `device`, and their places.
struct Bands {
  std::vector<std::shared_ptr<core::VaeModel>> models;
  std::vector<core::BandPlace> places;
  Bands(const Family& family, int64_t n, torch::Device device, torch::ScalarType dtype) {
    for (int64_t i = 0; i < n; ++i) {
      models.push_back(load(family, device, dtype));
      places.push_back({models.back().get(), &core::Device::of(device)});
    }
  }
};

core::ChunkOptions split(const Bands& bands, int64_t chunk) {
  core::ChunkOptions options;
  options.latent_frames = chunk;
  options.bands = bands.places;
  return options;
}

// Frames [1, 3, frames, height, width] in [-1, 1]: smooth structure plus noise, so that every row differs.
torch::Tensor video(int64_t frames, int64_t height, int64_t width, torch::ScalarType dtype) {
  torch::manual_seed(7);
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  auto y = torch::linspace(0, 3, height, opts).view({1, 1, 1, height, 1});
  auto x = torch::linspace(0, 4, width, opts).view({1, 1, 1, 1, width});
  auto t = torch::arange(frames, opts).view({1, 1, frames, 1, 1});
  auto picture = torch::sin(x + 0.4 * t) * torch::cos(y - 0.3 * t) * 0.6 +
                 0.3 * torch::rand({1, 3, frames, height, width}, opts) - 0.15;
  return picture.clamp(-1, 1).to(dtype);
}

}  // namespace

TEST_CASE("band rows: near-equal whole latent rows, the taller bands first", "[bands]") {
  auto rows = core::band_rows(7, 3);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].first == 0);
  CHECK(rows[0].count == 3);
  CHECK(rows[1].first == 3);
  CHECK(rows[1].count == 2);
  CHECK(rows[2].first == 5);
  CHECK(rows[2].count == 2);
  rows = core::band_rows(90, 8);
  int64_t next = 0;
  for (const auto& r : rows) {
    CHECK(r.first == next);
    CHECK((r.count == 11 || r.count == 12));
    next += r.count;
  }
  CHECK(next == 90);
  CHECK_THROWS_WITH(core::band_rows(2, 3), Catch::Contains("2 latent rows cannot be split into 3 bands"));
}

// For every family in float64 and float32: `run(family, model, chunks)` on one device against the same with
// the frame split into 2 and 3 bands of that many more models, at `chunk` latent frames per call.
template <typename Run>
void check_split_equals_whole(int64_t chunk, Run run) {
  for (const auto& family : kFamilies) {
    for (auto dtype : {torch::kDouble, torch::kFloat}) {
      auto model = load(family, torch::kCPU, dtype);
      const auto whole = run(family, *model, core::ChunkOptions{chunk});
      for (int64_t n : {2, 3}) {
        Bands bands(family, n, torch::kCPU, dtype);
        const auto banded = run(family, *model, split(bands, chunk));
        INFO(family.folder << " " << c10::toString(dtype) << ", " << n << " bands");
        REQUIRE(banded.sizes() == whole.sizes());
        CHECK(relative_error(banded, whole) <= (dtype == torch::kDouble ? 1e-12 : 1e-5));
      }
    }
  }
}

TEST_CASE("a split decode equals the one-device decode, every family, float64 and float32", "[bands]") {
  check_split_equals_whole(2, [](const Family&, core::VaeModel& model, const core::ChunkOptions& chunks) {
    // 7 latent rows (odd) by 5 columns, 4 latent frames.
    torch::manual_seed(3);
    const auto latents =
        torch::randn({1, model.info().latent_channels, 4, 7, 5}, torch::TensorOptions().dtype(model.dtype()));
    return core::decode_latents(model, latents, chunks);
  });
}

TEST_CASE("a split encode equals the one-device encode, every family, float64 and float32", "[bands]") {
  check_split_equals_whole(1, [](const Family& family, core::VaeModel& model,
                                 const core::ChunkOptions& chunks) {
    // 5 latent rows, 3 latent columns, 9 frames.
    return core::encode_video(model, video(9, 5 * family.factor, 3 * family.factor, model.dtype()), chunks);
  });
}

TEST_CASE("a split run does not depend on its chunking, and streams like the one-device run",
          "[bands][chunks]") {
  const Family& family = kFamilies[0];
  auto model = load(family, torch::kCPU, torch::kDouble);
  torch::manual_seed(5);
  auto latents = torch::randn({1, 16, 5, 6, 4}, torch::kDouble);
  const auto whole = core::decode_latents(*model, latents, {1});
  Bands bands(family, 2, torch::kCPU, torch::kDouble);
  // Fed one latent frame at a time into a run of chunk 3: the pushes and the chunks do not line up.
  core::DecodeRun run(*model, core::Device::of(torch::kCPU), split(bands, 3));
  std::vector<torch::Tensor> parts;
  for (int64_t i = 0; i < latents.size(2); ++i)
    if (auto out = run.push(latents.narrow(2, i, 1)); out.defined()) parts.push_back(out);
  if (auto out = run.finish(); out.defined()) parts.push_back(out);
  const auto streamed = torch::cat(parts, 2);
  REQUIRE(streamed.sizes() == whole.sizes());
  CHECK(relative_error(streamed, whole) <= 1e-12);
}

TEST_CASE("without the exchanges the bands would not match: each band alone differs", "[bands]") {
  // The check above can fail: bands decoded as separate pictures (zero padding at their edges, attention over
  // their own pixels) are far from the one-device rows.
  const Family& family = kFamilies[0];
  auto model = load(family, torch::kCPU, torch::kDouble);
  torch::manual_seed(3);
  auto latents = torch::randn({1, 16, 2, 6, 5}, torch::kDouble);
  const auto whole = core::decode_latents(*model, latents, {2});
  const auto top = core::decode_latents(*model, latents.narrow(3, 0, 3), {2});
  const auto bottom = core::decode_latents(*model, latents.narrow(3, 3, 3), {2});
  CHECK(relative_error(torch::cat({top, bottom}, 3), whole) > 1e-3);
}

TEST_CASE("a failing band stops the split run with its own error, and the others do not hang", "[bands]") {
  // Band 1 holds a Wan2.2 model given Wan2.1 latents: its first convolution refuses the channel count while
  // band 0 waits for it at its first exchange.
  auto wan21 = load(kFamilies[0], torch::kCPU, torch::kFloat);
  auto wan22 = load(kFamilies[1], torch::kCPU, torch::kFloat);
  core::ChunkOptions options;
  options.bands = {{wan21.get(), &core::Device::of(torch::kCPU)},
                   {wan22.get(), &core::Device::of(torch::kCPU)}};
  auto latents = torch::randn({1, 16, 1, 4, 4});
  try {
    core::decode_latents(*wan21, latents, options);
    FAIL("the split run did not fail");
  } catch (const std::exception& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("another band") == std::string::npos);  // the failing band's own error
  }
}

TEST_CASE("a split run refuses what it cannot do", "[bands]") {
  auto model = load(kFamilies[0], torch::kCPU, torch::kFloat);
  Bands bands(kFamilies[0], 3, torch::kCPU, torch::kFloat);
  CHECK_THROWS_WITH(core::decode_latents(*model, torch::randn({1, 16, 1, 2, 4}), split(bands, 1)),
                    Catch::Contains("cannot be split into 3 bands"));
  auto shared = split(bands, 1);
  shared.bands[1].model = shared.bands[0].model;
  CHECK_THROWS_WITH(core::decode_latents(*model, torch::randn({1, 16, 1, 6, 4}), shared),
                    Catch::Contains("share one model"));
  auto tiled = split(bands, 1);
  tiled.tiles = core::TileGrid::cover(6, 4, {3, 4}, 1);
  CHECK_THROWS_WITH(core::decode_latents(*model, torch::randn({1, 16, 1, 6, 4}), tiled),
                    Catch::Contains("tiles"));
}

TEST_CASE("on CUDA, a split decode and encode equal the one-device run (two bands per GPU, and across GPUs)",
          "[bands][gpu]") {
  REQUIRE(torch::cuda::is_available());
  const int64_t gpus = static_cast<int64_t>(torch::cuda::device_count());
  for (const auto& family : kFamilies) {
    for (auto [height, width] : {std::pair<int64_t, int64_t>{256, 256}, {208, 176}}) {
      const int64_t rows = height / family.factor, cols = width / family.factor;
      for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
        const torch::Device gpu0(torch::kCUDA, 0);
        auto model = load(family, gpu0, dtype);
        auto reference = load(family, torch::kCPU, torch::kFloat);
        torch::manual_seed(11);
        auto latents = torch::randn({1, model->info().latent_channels, 3, rows, cols});
        const auto frames = video(9, height, width, torch::kFloat);
        const auto decoded = core::decode_latents(*reference, latents, {2});
        const auto encoded = core::encode_video(*reference, frames, {1});
        const auto one_gpu_decoded = core::decode_latents(*model, latents.to(gpu0, dtype), {2});
        const auto one_gpu_encoded = core::encode_video(*model, frames.to(gpu0, dtype), {1});
        // Two bands on GPU 0, then one band per GPU when there are several.
        std::vector<std::vector<torch::Device>> layouts = {{gpu0, gpu0}};
        if (gpus >= 2) layouts.push_back({gpu0, torch::Device(torch::kCUDA, 1)});
        for (const auto& layout : layouts) {
          std::vector<std::shared_ptr<core::VaeModel>> models;
          core::ChunkOptions options;
          options.latent_frames = 2;
          for (const auto& d : layout) {
            models.push_back(load(family, d, dtype));
            options.bands.push_back({models.back().get(), &core::Device::of(d)});
          }
          INFO(family.folder << " " << width << "x" << height << " " << c10::toString(dtype) << " on "
                             << layout.back().str());
          // float32: the one-GPU run to rounding; bf16: the golden tests' bound against float32.
          const bool f32 = dtype == torch::kFloat;
          const double bound = f32 ? 1e-5 : 5e-2;
          const auto split_decode = core::decode_latents(*model, latents.to(gpu0, dtype), options);
          REQUIRE(split_decode.device() == gpu0);
          CHECK(relative_error(split_decode, f32 ? one_gpu_decoded : decoded) <= bound);
          options.latent_frames = 1;
          const auto split_encode = core::encode_video(*model, frames.to(gpu0, dtype), options);
          CHECK(relative_error(split_encode, f32 ? one_gpu_encoded : encoded) <= bound);
        }
      }
    }
  }
}

}  // namespace vaecodec::test
