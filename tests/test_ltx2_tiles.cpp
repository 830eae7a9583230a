// LTX-2 in exact tiles through time (Note [LTX-2 exact tiles] in core/models/ltx2/ltx2_vae.h, Note
// [Held-back frames of exact tiles] in core/split/exact_tiles.cpp): what a tile's trunk reads, encodes and
// decodes cut into tiles, chunks and windows that equal the whole clip, the decoder's held-back frames handed
// on once each and in order, the progress, and the planner's plans. The tiny models of tests/data/ltx2-tiny
// (2.0: reflection, residual upsamplers; 2.3: zeros) in float64, on frames larger than the tiles' margins.
// LibTorch before Catch: c10 defines a CHECK macro of its own, and Catch's must be the one left.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/device/device.h"
#include "core/engine.h"
#include "core/models/ltx2/ltx2_config.h"
#include "core/models/registry.h"
#include "core/plan_for.h"
#include "tests/gpu_support.h"
#include "tests/test_support.h"
#include "tests/tiles_support.h"

namespace vaecodec::test {
namespace {

// A clip and how it is cut: latent rows, columns and frames, the tiles, chunks and window, and whether the
// window's frames wait in host memory (Note [Windows in host memory]).
// The tiny decoders' trunks read 4 (2.0) and 5 (2.3) latent pixels past a tile, the encoders' 4.4 before
// and 6.1 after it: a side of 12 (14 to encode) cut in two keeps cuts inside the frame at every layer, and
// frames thin along the other side keep the float64 convolutions quick. Grids 1x2, 2x1, 2x2 and with thin
// tiles (3 rows in 2: one row, then two; 4 columns in 3: 1, 1, 2), chunks of 1, 2 and 3 latent frames,
// windows of 1, 2 and all of them (0).
struct Case {
  int64_t rows, cols, latents;
  Cut cut;
  bool host = false;
};

// One line naming a case.
std::string describe(const Case& c) {
  return std::to_string(c.cols) + "x" + std::to_string(c.rows) + " latent pixels x" +
         std::to_string(c.latents) + ", tiles " + std::to_string(c.cut.rows) + "x" +
         std::to_string(c.cut.cols) + ", chunk " + std::to_string(c.cut.chunk) + ", window " +
         std::to_string(c.cut.window) + (c.host ? ", host window" : "");
}

// Output frames settled once `latents` latent frames have come, before the clip ends.
int64_t settled(const core::ModelInfo& info, int64_t latents) {
  return latents == 0 ? 0 : std::max<int64_t>(1 + info.temporal_factor * (latents - 1) - info.decode_lag, 0);
}

}  // namespace

TEST_CASE("LTX-2's trunks: what a tile reads, and the features between them and the whole frame",
          "[ltx2][exact]") {
  for (const std::string tag : {"20", "23"}) {
    INFO(tag);
    auto model = tiny_ltx2(tag);
    CHECK(model->tiles_through_time());
    CHECK(model->exact_tiles());
    // Decode, 2.0: rows [64, 96) of the trunk's output (x8; x4 more by unpatchifying) read [63, 97) before
    // conv_out, [61, 99) before the last res_x, [29, 51) and [27, 53) at x4, [12, 28) and [10, 30) at x2, and
    // [4, 16) at latent resolution. 2.3 has a temporal upsampler's conv (one more pixel) at x4: [3, 17).
    const core::Area interior{{8, 12}, {8, 12}};
    const core::Span decode = tag == "20" ? core::Span{4, 16} : core::Span{3, 17};
    CHECK(model->tile_input(false, interior, 20, 20) == core::Area{decode, decode});
    if (tag == "20")
      CHECK(model->tile_input(false, {{0, 4}, {16, 20}}, 20, 20) == core::Area{{0, 8}, {12, 20}});
    // Encode (both): latent rows [8, 12) fold rows [14, 28) at /16 (kDown2, margin 1: [15, 27) rounded to
    // even), which read [12, 30); [22, 64), [20, 66), [19, 67) and [17, 69) at /8; [32, 142) and [30, 144) at
    // /4; conv_in [29, 145) of the patches, x4 pixels.
    CHECK(model->tile_input(true, interior, 20, 20) == core::Area{{116, 580}, {116, 580}});
    CHECK(model->tile_work(false, interior, 20, 20) > 1.5);
  }
  // The released models: the features are the middle's, 1024 channels to decode; to encode, the last
  // downsampler's output (2048 in 2.0, 1024 in 2.3).
  for (const auto& [config, encode_features] :
       {std::pair{core::LTX2Config::released_20(), 2048}, std::pair{core::LTX2Config::released_23(), 1024}}) {
    auto model = core::build_model("ltx2-vae", config.to_json());
    CHECK(model->exact_tiles());
    CHECK(model->feature_channels(false) == 1024);
    CHECK(model->feature_channels(true) == encode_features);
    if (encode_features != 2048) continue;
    // 2.0's decoder trunk (three upsamplers, five ResBlocks after each) reads 11 latent pixels past a tile,
    // against 22 had conv_in and the middle's 5 ResBlocks been in it. Its encoder trunk: latent rows [20, 24)
    // read [8a - 89, 8b + 103) of the patches at /4, [284, 1180) pixels.
    const core::Area interior{{20, 24}, {20, 24}};
    CHECK(model->tile_input(false, interior, 60, 60) == core::Area{{9, 35}, {9, 35}});
    CHECK(model->tile_input(true, interior, 60, 60) == core::Area{{284, 1180}, {284, 1180}});
  }
}

TEST_CASE("LTX-2 decodes in exact tiles through time as the whole clip, for every grid, chunk and window",
          "[ltx2][exact]") {
  // 4 latent frames: 25 frames, fewer than either lag, so every frame is held back until the clip ends and
  // the first windows settle no features at all.
  const std::vector<Case> cases{{12, 12, 4, {1, 2, 1, 0}}, {12, 12, 4, {2, 1, 2, 1}},
                                {12, 12, 4, {2, 2, 3, 2}}, {12, 12, 4, {2, 2, 1, 1}, true},
                                {3, 12, 4, {2, 2, 1, 2}},  {12, 4, 4, {1, 3, 3, 0}}};
  for (const std::string tag : {"20", "23"}) {
    auto model = tiny_ltx2(tag);
    torch::manual_seed(1);
    std::map<std::vector<int64_t>, std::pair<torch::Tensor, torch::Tensor>> clips;  // latents, whole decode
    for (const Case& c : cases) {
      INFO(tag << ": " << describe(c));
      auto& [z, whole] = clips[{c.rows, c.cols, c.latents}];
      if (!z.defined()) {
        z = torch::randn({1, 4, c.latents, c.rows, c.cols}, torch::kDouble);
        whole = core::decode_latents(*model, z);
        REQUIRE(whole.size(2) == 1 + 8 * (c.latents - 1));
      }
      const auto tiled = core::decode_latents(*model, z, exact(c.cut, c.rows, c.cols, c.host));
      REQUIRE(tiled.sizes() == whole.sizes());
      CHECK(relative_error(tiled, whole) <= 1e-12);
    }
  }
}

TEST_CASE("LTX-2 encodes in exact tiles through time as the whole clip, for every grid, chunk and window",
          "[ltx2][exact]") {
  // The encoders of 2.0 and 2.3 differ only in the last downsampler's width: 2.3 runs the 2x2 and thin grids.
  const std::vector<Case> cases{{2, 14, 4, {1, 2, 1, 0}},
                                {2, 14, 4, {1, 2, 3, 1}},
                                {14, 2, 4, {2, 1, 2, 2}},
                                {8, 8, 2, {2, 2, 2, 1}, true},
                                {3, 12, 3, {2, 2, 1, 2}}};
  for (const std::string tag : {"20", "23"}) {
    auto model = tiny_ltx2(tag);
    torch::manual_seed(2);
    std::map<std::vector<int64_t>, std::pair<torch::Tensor, torch::Tensor>> clips;  // frames, whole encode
    for (const Case& c : cases) {
      if (tag == "23" && c.cut.rows * c.cut.cols < 4) continue;
      INFO(tag << ": " << describe(c));
      const int64_t frames = 1 + 8 * (c.latents - 1);
      auto& [video, whole] = clips[{c.rows, c.cols, c.latents}];
      if (!video.defined()) {
        video = torch::rand({1, 3, frames, c.rows * 32, c.cols * 32}, torch::kDouble) * 2 - 1;
        whole = core::encode_video(*model, video);
        REQUIRE(whole.size(2) == c.latents);
      }
      std::vector<int64_t> seen;
      core::ChunkOptions o = exact(c.cut, c.rows, c.cols, c.host);
      o.progress = [&seen](int64_t done) { seen.push_back(done); };
      const auto tiled = core::encode_video(*model, video, o);
      REQUIRE(tiled.sizes() == whole.sizes());
      CHECK(relative_error(tiled, whole) <= 1e-12);
      // The clip's frames, counted as they go.
      REQUIRE_FALSE(seen.empty());
      CHECK(std::is_sorted(seen.begin(), seen.end()));
      CHECK(seen.back() == frames);
    }
  }
}

TEST_CASE("an LTX-2 decode in exact tiles hands every frame on once and in order, the held-back ones last",
          "[ltx2][exact]") {
  // 12 latent frames (89 frames) outlast both lags (53 and 72 frames): windows short of the clip settle
  // frames before it ends, and the rest come when it does. Frames 2 latent rows high, cut in columns.
  const int64_t n = 12, rows = 2, cols = 12;
  for (const std::string tag : {"20", "23"}) {
    auto model = tiny_ltx2(tag);
    const core::ModelInfo& info = model->info();
    torch::manual_seed(3);
    const auto z = torch::randn({1, 4, n, rows, cols}, torch::kDouble);
    const auto whole = core::decode_latents(*model, z);
    const int64_t total = 1 + 8 * (n - 1);
    REQUIRE(whole.size(2) == total);
    for (const Cut& c : std::vector<Cut>{{1, 2, 1, 2}, {1, 3, 3, 1}, {1, 2, 2, 0}}) {
      INFO(tag << ": tiles " << c.rows << "x" << c.cols << ", chunk " << c.chunk << ", window " << c.window);
      std::vector<torch::Tensor> emitted;
      std::vector<int64_t> seen;
      core::ChunkOptions o = exact(c, rows, cols);
      o.emit = [&emitted](const torch::Tensor& frames) { emitted.push_back(frames.clone()); };
      o.progress = [&seen](int64_t frames) { seen.push_back(frames); };
      core::Run run(*model, core::Device::of(torch::kCPU), core::Op::kDecode, o);
      auto handed = [&] {
        int64_t frames = 0;
        for (const torch::Tensor& e : emitted) frames += e.size(2);
        return frames;
      };
      for (int64_t t = 0; t < n; ++t) {
        CHECK_FALSE(run.push(z.narrow(2, t, 1)).defined());
        // A window runs once a latent frame past it has come; its frames are those its latents settle.
        const int64_t windows_done = c.window == 0 ? 0 : t / c.window;
        CHECK(handed() == settled(info, windows_done * c.window));
      }
      const int64_t before_end = handed();
      if (c.window > 0) CHECK(before_end > 0);  // both lags are shorter than the clip
      CHECK_FALSE(run.finish().defined());
      for (const torch::Tensor& e : emitted) CHECK(e.size(2) > 0);
      // Each frame once, in order: the pieces are the whole clip's frames one after the other.
      const auto tiled = torch::cat(emitted, 2);
      REQUIRE(tiled.size(2) == total);
      CHECK(relative_error(tiled, whole) <= 1e-12);
      CHECK(total - before_end >= info.decode_lag);  // the held-back frames came at the end
      // Progress counts the clip's frames: never past them, in order, all of them at the end.
      REQUIRE_FALSE(seen.empty());
      CHECK(std::is_sorted(seen.begin(), seen.end()));
      CHECK(seen.back() == total);
      // Without emit, the frames come back from push and finish.
      if (c.window != 1) continue;
      o.emit = {};
      o.progress = {};
      CHECK(relative_error(core::decode_latents(*model, z, o), whole) <= 1e-12);
    }
  }
}

TEST_CASE("LTX-2's exact tiles shared out among devices equal the one-device run", "[ltx2][exact][bands]") {
  // Note [Exact tiles across devices]: on the CPU the places are threads, each with its own model; the
  // whole-frame part runs in bands across them (Note [Whole-frame part in bands]), its held-back frames
  // ended in every band. 2 and 3 places; 3 latent rows on 3 places make bands of one row (2.0's reflection
  // through the halo at both edges), 2 rows on 3 places two such bands and a place without one.
  struct Shared {
    int64_t places;
    Case c;
  };
  const std::vector<Shared> cases{{2, {8, 8, 4, {2, 2, 1, 2}}},
                                  {3, {8, 8, 4, {2, 1, 2, 0}}},
                                  {3, {3, 8, 5, {1, 3, 1, 2}}},
                                  {3, {2, 8, 4, {1, 3, 3, 1}}}};
  for (const std::string tag : {"20", "23"}) {
    auto model = tiny_ltx2(tag);
    for (const auto& [n, c] : cases) {
      INFO(tag << ", " << n << " places, " << describe(c));
      torch::manual_seed(4);
      const auto z = torch::randn({1, 4, c.latents, c.rows, c.cols}, torch::kDouble);
      const auto video = torch::rand({1, 3, 9, c.rows * 32, c.cols * 32}, torch::kDouble) * 2 - 1;
      const auto decoded = core::decode_latents(*model, z);
      const auto encoded = core::encode_video(*model, video);
      std::vector<std::shared_ptr<core::VaeModel>> models;
      std::vector<core::BandPlace> places;
      for (int64_t i = 0; i < n; ++i) {
        models.push_back(tiny_ltx2(tag));
        places.push_back({models.back().get(), &core::Device::of(torch::kCPU)});
      }
      core::ChunkOptions o = exact(c.cut, c.rows, c.cols);
      o.bands = places;
      const auto tiled = core::decode_latents(*model, z, o);
      REQUIRE(tiled.sizes() == decoded.sizes());
      CHECK(relative_error(tiled, decoded) <= 1e-12);
      CHECK(relative_error(core::encode_video(*model, video, o), encoded) <= 1e-12);
      // The last band's whole-frame layers changed, on a place that is not the run's own: the frames and the
      // latents change, which they would not if the whole-frame part ran on the first place alone.
      const auto last = static_cast<size_t>(std::min(n, c.rows) - 1);
      scale_parameters(*models[last], "decoder.conv_in.", 1.01);
      CHECK(relative_error(core::decode_latents(*model, z, o), decoded) > 1e-6);
      scale_parameters(*models[last], "encoder.conv_out.", 1.01);
      CHECK(relative_error(core::encode_video(*model, video, o), encoded) > 1e-6);
    }
  }
}

TEST_CASE("on CUDA, LTX-2's exact tiles park their caches between windows and hand frames to emit there",
          "[gpu][ltx2][exact]") {
  // Windows of 1 and 2 latent frames over 4: every tile's cache, and the whole-frame part's held-back
  // features, go to host memory between windows and come back (Note [Held-back frames of exact tiles]); the
  // window on the device or in host memory; a decode's frames reach `emit` on the device, the held-back ones
  // at finish(). float32 on the GPU: the tiles' convolutions see other shapes than the whole frame's, so
  // equal to cuDNN's rounding, not bit for bit.
  if (!cuda_here()) return;
  const torch::Device gpu(torch::kCUDA, 0);
  constexpr int64_t kSide = 14;  // cut in two, every layer's cut stays inside the frame (see Case)
  for (const std::string tag : {"20", "23"}) {
    auto model = tiny_ltx2(tag, torch::kFloat, gpu);
    REQUIRE(model->exact_tiles());
    torch::manual_seed(5);
    const auto latents = torch::randn({1, 4, 4, kSide, kSide}).to(gpu);
    const auto frames = (torch::rand({1, 3, 17, kSide * 32, kSide * 32}) * 2 - 1).to(gpu);
    const auto whole = core::decode_latents(*model, latents, {1});
    const auto whole_latents = core::encode_video(*model, frames, {1});
    for (const bool host : {false, true})
      for (const Cut& c : std::vector<Cut>{{2, 2, 1, 1}, {2, 1, 2, 2}}) {
        INFO(tag << ": tiles " << c.rows << "x" << c.cols << ", chunk " << c.chunk << ", window " << c.window
                 << (host ? ", host window" : ""));
        core::ChunkOptions o = exact(c, kSide, kSide, host);
        CHECK(relative_error(core::encode_video(*model, frames, o), whole_latents) <= 1e-5);
        const auto tiled = decode_emitted_on_gpu(*model, latents, o);
        REQUIRE(tiled.sizes() == whole.sizes());
        CHECK(relative_error(tiled, whole) <= 1e-5);
      }
  }
}

TEST_CASE("the planner plans LTX-2's exact tiles where the whole frame does not fit",
          "[ltx2][planner][exact]") {
  for (const auto& config : {core::LTX2Config::released_20(), core::LTX2Config::released_23()}) {
    auto model = core::build_model("ltx2-vae", config.to_json());  // uninitialised: shapes only
    for (const core::Op op : {core::Op::kDecode, core::Op::kEncode}) {
      INFO(config.decoder_padding << " " << core::op_name(op));
      core::PlanRequest r = core::plan_request(*model, {op, 1920, 1088, 16});
      r.dtype = torch::kBFloat16;  // the family's calibration, without converting the weights
      CHECK(r.exact_tiles);
      core::PlannerOptions o;
      o.max_chunk = 4;
      o.budget_bytes = int64_t{80} << 30;
      const core::Plan whole = core::plan_run(r, o);
      CHECK(whole.split == core::SplitKind::kWhole);
      // The encode's whole frame fits 6 GiB (4.5 GiB, the H100's calibration): a smaller budget for it.
      o.budget_bytes = op == core::Op::kDecode ? int64_t{6} << 30 : int64_t{9} << 29;  // 4.5 GiB
      const core::Plan small = core::plan_run(r, o);
      INFO(small.summary());
      CHECK(small.split == core::SplitKind::kExactTiles);
      CHECK(small.tiles.exact);
      CHECK(small.tiles.tiled());
      CHECK(small.estimate.total() <= o.budget_bytes);
      CHECK(small.to_json().at("split") == "tiles through time");
    }
  }
}

}  // namespace vaecodec::test
