#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <catch2/catch.hpp>

#include "core/chunk_options.h"
#include "core/device/device.h"
#include "core/engine.h"
#include "core/models/registry.h"
#include "core/tile_grid.h"
#include "tests/test_support.h"

// What the exact-tile and LTX-2 tests share: a cut of the frame into exact tiles through time, a decode whose
// frames go to `emit` on the GPU, and the tiny LTX-2 models (tests/data/ltx2-tiny, left out of tiny_models():
// tests/tiny_models.h).

namespace vaecodec::test {

// Exact tiles against the whole frame in float64: the same function, so equal up to float64's rounding of
// other shapes. The tiles' convolutions are matrix products of other sizes than the whole frame's, and the
// BLAS may block them differently (here they agree to 1e-16; on one fresh CI machine a cut differed by
// between 1e-12 and 5e-11). A mistake in a tile's margin or cache shows at 1e-6 and above.
constexpr double kTilesExact = 1e-10;

// Exact tiles through time: rows x cols parts, `chunk` latent frames per trunk call, windows of `window`
// latent frames (0: the whole clip).
struct Cut {
  int64_t rows, cols, chunk, window;
};

inline core::ChunkOptions exact(const Cut& c, int64_t latent_height, int64_t latent_width,
                                bool host = false) {
  core::ChunkOptions o;
  o.latent_frames = c.chunk;
  o.tiles = core::TileGrid::parts(latent_height, latent_width, c.rows, c.cols);
  o.window = c.window;
  o.window_store = host ? core::WindowStore::kHostFrames : core::WindowStore::kDevice;
  o.kind = core::SplitKind::kExactTiles;
  return o;
}

// `latents` (on a GPU) decoded under `o` as a stream of one latent frame per push, every frame handed to
// o.emit on the device (push and finish return nothing then); the frames emitted, joined in order.
inline torch::Tensor decode_emitted_on_gpu(core::VaeModel& model, const torch::Tensor& latents,
                                           core::ChunkOptions o) {
  std::vector<torch::Tensor> emitted;
  o.emit = [&emitted](const torch::Tensor& f) {
    CHECK(f.device().is_cuda());
    emitted.push_back(f.clone());
  };
  core::Run run(model, core::Device::of(latents.device()), core::Op::kDecode, o);
  for (int64_t t = 0; t < latents.size(2); ++t) CHECK_FALSE(run.push(latents.narrow(2, t, 1)).defined());
  CHECK_FALSE(run.finish().defined());
  REQUIRE_FALSE(emitted.empty());
  return torch::cat(emitted, 2);
}

// Multiplies by `factor` the parameters of `model` under the module `prefix` ("decoder.head."): a change
// that shows only where that module ran on this model (Note [Exact tiles across devices]). Throws when no
// parameter is there.
inline void scale_parameters(core::VaeModel& model, const std::string& prefix, double factor) {
  torch::NoGradGuard no_grad;
  int64_t scaled = 0;
  for (auto& p : model.named_parameters())
    if (p.key().rfind(prefix, 0) == 0) {
      p.value().mul_(factor);
      ++scaled;
    }
  if (scaled == 0) throw std::runtime_error("no parameter under " + prefix);
}

// The tiny LTX-2 of config `tag` ("20": 2.0, "23": 2.3/2.5), its weights file and the model.
inline std::filesystem::path tiny_ltx2_weights(const std::string& tag) {
  return data_dir() / "ltx2-tiny" / ("weights-" + tag + ".safetensors");
}

inline std::shared_ptr<core::VaeModel> tiny_ltx2(const std::string& tag,
                                                 torch::ScalarType dtype = torch::kDouble,
                                                 torch::Device device = torch::kCPU) {
  core::ModelOptions options;
  options.dtype = dtype;
  options.device = device;
  return core::build_model(core::load_checkpoint(tiny_ltx2_weights(tag)), options);
}

}  // namespace vaecodec::test
