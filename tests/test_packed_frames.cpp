// Note [Frames kept packed] (core/packed_frames.h) and Note [An encode window as its planes]
// (io/chunking.cpp): an encode whose window of tiles through time waits in host memory keeps a real video's
// 8-bit Y'CbCr planes, and its latents are those of the same frames handed over as RGB, bit for bit - the
// padding of the frame's size and of the clip's length included, and a chunk with a frame that came as RGB.
#include <catch2/catch.hpp>

#include <vector>

#include "core/engine.h"
#include "core/split/split.h"
#include "io/chunking.h"
#include "io/video_reader.h"
#include "tests/gpu_support.h"
#include "tests/norm_tile_case.h"
#include "tests/test_support.h"
#include "tests/video_test_support.h"

namespace vaecodec::test {
namespace {

using tile_case::kCols, tile_case::kRows;

// SeedVR2's 1x2 tiles through time (tests/norm_tile_case.h), the window waiting in host memory or not, in
// chunks of `chunk` latent frames and windows of `window` (0: the clip).
core::ChunkOptions tiles_through_time(bool host, int64_t chunk = 1, int64_t window = 0) {
  core::ChunkOptions o;
  o.latent_frames = chunk;
  o.window = window;
  o.tiles =
      core::TileGrid::cover_through_time(kRows, kCols, tile_case::kTile, tile_case::kOverlap, /*context=*/4);
  o.window_store = host ? core::WindowStore::kHostFeatures : core::WindowStore::kDevice;
  o.kind = core::SplitKind::kExactTiles;
  return o;
}

// A 4:2:0 x264 clip of 7 frames (padded to 9) of 186x122 pixels (padded to 192x128: the case's 24x16 latent
// pixels), read as the file pipeline reads it for a GPU: 8-bit frames as their planes.
std::vector<io::VideoFrame> clip_as_planes(const TempDir& dir, bool pinned) {
  const auto clip =
      make_clip(dir / "clip.mkv", kTestsrc + "186x122:rate=24 -frames:v 7 -pix_fmt yuv420p -c:v libx264");
  io::ReaderOptions options;
  options.pinned = pinned;
  options.yuv_planes = true;
  io::VideoReader reader(clip, options);
  std::vector<io::VideoFrame> frames;
  io::VideoFrame frame;
  while (reader.next(frame)) frames.push_back(frame);
  return frames;
}

struct Encoded {
  torch::Tensor latents;
  int64_t packed = 0;  // frames the run kept packed
};

Encoded encode(core::VaeModel& model, const std::vector<io::VideoFrame>& frames,
               const core::ChunkOptions& o) {
  core::Device& device = core::Device::of(model.device());
  io::EncodeFeeder feeder(model, o, io::Geometry::of(model.info(), 186, 122), device);
  std::vector<torch::Tensor> parts;
  for (const io::VideoFrame& f : frames)
    if (torch::Tensor z = feeder.push(f); io::has_frames(z)) parts.push_back(z);
  if (torch::Tensor z = feeder.finish(); io::has_frames(z)) parts.push_back(z);
  return {torch::cat(parts, 2).cpu(), feeder.packed_frames()};
}

void check_planes_give_rgb_latents(core::VaeModel& model, bool pinned) {
  TempDir dir;
  std::vector<io::VideoFrame> frames = clip_as_planes(dir, pinned);
  REQUIRE(frames.size() == 7);
  for (const io::VideoFrame& f : frames) REQUIRE(f.yuv);
  REQUIRE(core::keeps_packed_frames(core::Op::kEncode, tiles_through_time(true)));
  REQUIRE_FALSE(core::keeps_packed_frames(core::Op::kEncode, tiles_through_time(false)));
  REQUIRE_FALSE(core::keeps_packed_frames(core::Op::kDecode, tiles_through_time(true)));

  const Encoded as_rgb = encode(model, frames, tiles_through_time(false));
  CHECK(as_rgb.packed == 0);
  const Encoded packed = encode(model, frames, tiles_through_time(true));
  CHECK(packed.packed == 9);  // every frame, the two of the clip's padding too
  REQUIRE(packed.latents.sizes() == as_rgb.latents.sizes());
  CHECK(packed.latents.size(2) == 3);
  CHECK(torch::equal(packed.latents, as_rgb.latents));
  // Windows of one latent frame over chunks of two: the pushed chunks (5 frames, then 4) are cut between
  // windows (1 frame, then 4 from the middle of the first chunk on), the caches parked between them.
  const Encoded rgb_windows = encode(model, frames, tiles_through_time(false, 2, 1));
  const Encoded packed_windows = encode(model, frames, tiles_through_time(true, 2, 1));
  CHECK(packed_windows.packed == 9);
  CHECK(torch::equal(packed_windows.latents, rgb_windows.latents));
  CHECK(torch::allclose(packed_windows.latents, as_rgb.latents, 1e-4,
                        1e-4));  // windows change no frame's norms

  // A frame that comes as RGB (as another layout would) turns its chunk into RGB frames: frames 1-4 are the
  // second chunk (the first is frame 0 alone).
  core::Device& device = core::Device::of(model.device());
  frames[2].rgb = io::frame_rgb(frames[2], device).cpu();
  frames[2].yuv.reset();
  const Encoded mixed = encode(model, frames, tiles_through_time(true));
  CHECK(mixed.packed == 5);
  CHECK(torch::equal(mixed.latents, as_rgb.latents));
}

TEST_CASE("an encode window kept as the video's planes gives the latents of its RGB frames",
          "[packed][video]") {
  auto model = tile_case::tiny_seedvr2();
  check_planes_give_rgb_latents(*model, /*pinned=*/false);
}

TEST_CASE("an encode window kept as the video's planes gives the latents of its RGB frames, on a GPU",
          "[packed][video][gpu]") {
  if (!cuda_here()) return;
  auto model = load_tiny(tiny_model("seedvr2-vae"), torch::kCUDA, torch::kFloat);
  check_planes_give_rgb_latents(*model, /*pinned=*/true);
}

}  // namespace
}  // namespace vaecodec::test
