// Streaming sessions (Note [Streaming sessions] in core/session.h): any split of a clip into blocks gives the
// whole clip's run, for every family; sessions interleaved, branched and reset keep their own state; a block
// a session cannot take changes nothing. Exactness is a property of the algorithm: float64 on the CPU; the
// GPU cases check bf16 bit for bit against the whole run cut the same way, on streams and threads.
#include <thread>

#include <c10/cuda/CUDAGuard.h>
#include <torch/cuda.h>
#include <catch2/catch.hpp>

#include "core/engine.h"
#include "core/error.h"
#include "core/session.h"
#include "tests/gpu_support.h"
#include "tests/tiny_models.h"

namespace vaecodec::test {
namespace {

using core::Op;
using core::Session;

std::shared_ptr<core::VaeModel> tiny_f64(const TinyModel& tiny) {
  return load_tiny(tiny, torch::kCPU, torch::kDouble);
}

torch::Tensor golden(const TinyModel& tiny, const char* name) {
  return read_tensors(tiny.folder / "cases.safetensors").at(name).to(torch::kDouble);
}

// Pushes `input` in blocks of the given lengths (cycled until it is all in) and joins what comes back.
torch::Tensor push_blocks(Session& session, const torch::Tensor& input, std::vector<int64_t> blocks) {
  std::vector<torch::Tensor> out;
  int64_t at = 0;
  for (size_t i = 0; at < input.size(2); ++i) {
    const int64_t n = std::min(blocks[i % blocks.size()], input.size(2) - at);
    out.push_back(session.push(input.narrow(2, at, n)));
    at += n;
  }
  return torch::cat(out, 2);
}

Session::Options no_options() {
  return {};
}

}  // namespace

TEST_CASE("a decode session's blocks give the whole clip's frames, for every family", "[session]") {
  for (const TinyModel& tiny : tiny_models()) {
    INFO(tiny.family);
    auto model = tiny_f64(tiny);
    const auto latent = golden(tiny, "latent");  // [1, z, 5, h, w]
    const auto whole = core::decode_latents(*model, latent, {1000});
    const int64_t tf = model->info().temporal_factor;
    for (const std::vector<int64_t>& blocks : std::vector<std::vector<int64_t>>{{1}, {2, 1}, {3, 2}}) {
      INFO("blocks of " << blocks.front() << (blocks.size() > 1 ? " then " + std::to_string(blocks[1]) : ""));
      Session session(model, Op::kDecode, no_options());
      // The first block of t latent frames gives 1 + 4(t - 1) frames, every later latent frame 4.
      const auto first = session.push(latent.narrow(2, 0, blocks.front()));
      CHECK(first.size(2) == 1 + tf * (blocks.front() - 1));
      const auto rest = latent.narrow(2, blocks.front(), latent.size(2) - blocks.front());
      const auto more = rest.size(2) ? push_blocks(session, rest, blocks) : first.narrow(2, 0, 0);
      CHECK(more.size(2) == tf * rest.size(2));
      const auto out = torch::cat({first, more}, 2);
      REQUIRE(out.sizes() == whole.sizes());
      CHECK(relative_error(out, whole) <= 1e-12);
      CHECK(session.frames_in() == latent.size(2));
      CHECK(session.frames_out() == whole.size(2));
      CHECK(session.pending_frames() == 0);
    }
    // At most `chunk` latent frames per model call: the same frames.
    Session chunked(model, Op::kDecode, {2, nullptr});
    CHECK(relative_error(push_blocks(chunked, latent, {5}), whole) <= 1e-12);
  }
}

TEST_CASE("an encode session's frames give the whole clip's latents, groups waiting, for every family",
          "[session]") {
  for (const TinyModel& tiny : tiny_models()) {
    INFO(tiny.family);
    auto model = tiny_f64(tiny);
    const auto video = golden(tiny, "video");  // [1, 3, 17, H, W]
    REQUIRE(video.size(2) == 17);
    const auto whole = core::encode_video(*model, video, {1000});
    Session session(model, Op::kEncode, no_options());
    // Frame 0 gives the first latent frame; then every 4 frames one more, the rest waiting.
    const std::vector<std::pair<int64_t, int64_t>> pushes = {{1, 1}, {3, 0}, {2, 1}, {6, 1}, {5, 2}};
    const std::vector<int64_t> pending_after = {0, 3, 1, 3, 0};
    std::vector<torch::Tensor> out;
    int64_t at = 0;
    for (size_t i = 0; i < pushes.size(); ++i) {
      const auto [frames, latents] = pushes[i];
      const auto z = session.push(video.narrow(2, at, frames));
      at += frames;
      INFO("push " << i << " of " << frames << " frames");
      CHECK(z.size(2) == latents);
      CHECK(z.size(1) == model->info().latent_channels);
      CHECK(session.pending_frames() == pending_after[i]);
      out.push_back(z);
    }
    const auto joined = torch::cat(out, 2);
    REQUIRE(joined.sizes() == whole.sizes());
    CHECK(relative_error(joined, whole) <= 1e-12);
    // Calls of at most one latent frame: the same latents.
    Session chunked(model, Op::kEncode, {1, nullptr});
    CHECK(relative_error(push_blocks(chunked, video, {9, 8}), whole) <= 1e-12);
  }
}

TEST_CASE(
    "finish ends a causal decode or an encode with 0 frames; encode frames short of a group are refused",
    "[session]") {
  for (const TinyModel& tiny : tiny_models()) {
    INFO(tiny.family);
    auto model = tiny_f64(tiny);
    const int64_t f = model->info().spatial_factor, z = model->info().latent_channels;
    const auto latent = golden(tiny, "latent").narrow(2, 0, 3);
    const auto whole = core::decode_latents(*model, latent, {1000});
    Session d(model, Op::kDecode, no_options());
    CHECK(relative_error(push_blocks(d, latent, {2}), whole) <= 1e-12);
    const auto end = d.finish();
    CHECK(end.sizes() == std::vector<int64_t>{1, 3, 0, latent.size(3) * f, latent.size(4) * f});
    CHECK(end.scalar_type() == whole.scalar_type());
    CHECK(d.frames_out() == whole.size(2));
    CHECK(d.state_bytes() == 0);
    // The next push starts a new clip, of any size.
    const auto small = latent.narrow(2, 0, 2).narrow(4, 0, latent.size(4) / 2).contiguous();
    CHECK(relative_error(push_blocks(d, small, {1}), core::decode_latents(*model, small, {1000})) <= 1e-12);
    CHECK(d.frames_in() == 2);

    const auto video = golden(tiny, "video").narrow(2, 0, 5);  // 1 + 4 frames
    const auto latents = core::encode_video(*model, video, {1000});
    Session e(model, Op::kEncode, no_options());
    const auto z0 = e.push(video.narrow(2, 0, 3));  // frame 0 -> 1 latent frame; 2 wait
    const int64_t bytes = e.state_bytes();
    try {
      e.finish();
      FAIL("finished with frames waiting");
    } catch (const UsageError& error) {
      CHECK_THAT(std::string(error.what()),
                 Catch::StartsWith("encode session: 2 frames wait for a group of 4") &&
                     Catch::Contains("push 2 more"));
    }
    CHECK(e.pending_frames() == 2);
    CHECK(e.state_bytes() == bytes);
    const auto z1 = e.push(video.narrow(2, 3, 2));
    CHECK(relative_error(torch::cat({z0, z1}, 2), latents) <= 1e-12);
    const auto none = e.finish();
    CHECK(none.sizes() == std::vector<int64_t>{1, z, 0, video.size(3) / f, video.size(4) / f});
    CHECK(e.frames_out() == 2);
    CHECK(e.state_bytes() == 0);
    CHECK(relative_error(e.push(video), latents) <= 1e-12);
  }
}

TEST_CASE("sessions of one model keep their own state: interleaved, branched and reset", "[session]") {
  const TinyModel tiny = tiny_model("wan2.1-vae");
  auto model = tiny_f64(tiny);
  const auto a = golden(tiny, "latent");
  const auto b = torch::flip(a, {2}) * 0.5;  // another clip of the same size
  const auto whole_a = core::decode_latents(*model, a, {1000});
  const auto whole_b = core::decode_latents(*model, b, {1000});

  SECTION("interleaved") {
    Session sa(model, Op::kDecode, no_options()), sb(model, Op::kDecode, no_options());
    std::vector<torch::Tensor> oa, ob;
    for (int64_t i = 0; i < a.size(2); ++i) {
      oa.push_back(sa.push(a.narrow(2, i, 1)));
      ob.push_back(sb.push(b.narrow(2, i, 1)));
    }
    CHECK(relative_error(torch::cat(oa, 2), whole_a) <= 1e-12);
    CHECK(relative_error(torch::cat(ob, 2), whole_b) <= 1e-12);
  }
  SECTION("a branch goes on from the same point without touching its source") {
    Session s(model, Op::kDecode, no_options());
    const auto head = s.push(a.narrow(2, 0, 2));
    const int64_t bytes = s.state_bytes();
    auto branch = s.clone();
    CHECK(branch->state_bytes() == bytes);
    CHECK(branch->frames_in() == 2);
    // The branch takes another future (b's last frames) ...
    const auto other = branch->push(b.narrow(2, 2, 3));
    // ... and the source still decodes a's.
    const auto tail = s.push(a.narrow(2, 2, 3));
    CHECK(relative_error(torch::cat({head, tail}, 2), whole_a) <= 1e-12);
    CHECK(relative_error(other, tail) > 1e-3);
    // Rewinding: a second branch of the same point, fed a's future, gives a's frames again.
    Session t(model, Op::kDecode, no_options());
    t.push(a.narrow(2, 0, 2));
    auto rewind = t.clone();
    t.push(b.narrow(2, 2, 3));
    CHECK(relative_error(rewind->push(a.narrow(2, 2, 3)), tail) <= 1e-12);
  }
  SECTION("an encode branch carries the frames waiting") {
    const auto video = golden(tiny, "video");
    const auto whole = core::encode_video(*model, video, {1000});
    Session s(model, Op::kEncode, no_options());
    const auto z0 = s.push(video.narrow(2, 0, 3));  // frame 0 -> 1 latent; 2 wait
    auto branch = s.clone();
    CHECK(branch->pending_frames() == 2);
    const auto rest = branch->push(video.narrow(2, 3, 14));
    CHECK(relative_error(torch::cat({z0, rest}, 2), whole) <= 1e-12);
    CHECK(s.pending_frames() == 2);
  }
  SECTION("reset starts a new clip, of any size") {
    Session s(model, Op::kDecode, no_options());
    s.push(b.narrow(2, 0, 3));
    s.reset();
    CHECK(s.state_bytes() == 0);
    CHECK(s.frames_in() == 0);
    CHECK(relative_error(push_blocks(s, a, {2}), whole_a) <= 1e-12);
    s.reset();
    const auto small = a.narrow(3, 0, a.size(3) / 2).contiguous();
    CHECK(relative_error(push_blocks(s, small, {3}), core::decode_latents(*model, small, {1000})) <= 1e-12);
  }
}

TEST_CASE("a block a session cannot take is refused in one line and changes nothing", "[session]") {
  const TinyModel tiny = tiny_model("wan2.1-vae");
  auto model = tiny_f64(tiny);
  const auto a = golden(tiny, "latent");
  const auto whole = core::decode_latents(*model, a, {1000});
  Session s(model, Op::kDecode, no_options());
  const auto head = s.push(a.narrow(2, 0, 2));
  const int64_t bytes = s.state_bytes();
  CHECK(bytes > 0);
  const int64_t z = model->info().latent_channels;
  const std::vector<std::pair<torch::Tensor, std::string>> refused = {
      {a.narrow(1, 0, z - 1).narrow(2, 2, 1), "shaped [B, " + std::to_string(z) + ", T, h, w]"},
      {a.narrow(3, 0, 2).narrow(2, 2, 1), "this clip's blocks are"},
      {torch::cat({a, a}, 0).narrow(2, 2, 1), "this clip's blocks are"},
      {a.narrow(2, 2, 1).to(torch::kLong), "floating-point"},
      {a.narrow(2, 2, 1)[0], "shaped"},
      {torch::Tensor(), "expected a tensor"}};
  for (const auto& [block, message] : refused) {
    INFO(message);
    try {
      s.push(block);
      FAIL("accepted");
    } catch (const UsageError& e) {
      const std::string what = e.what();
      CHECK_THAT(what, Catch::StartsWith("decode session: ") && Catch::Contains(message));
      CHECK(what.find('\n') == std::string::npos);
    }
    CHECK(s.state_bytes() == bytes);
    CHECK(s.frames_in() == 2);
  }
  const auto tail = s.push(a.narrow(2, 2, 3));
  CHECK(relative_error(torch::cat({head, tail}, 2), whole) <= 1e-12);
  // An encode session refuses sides that are not multiples of the spatial factor.
  Session e(model, Op::kEncode, no_options());
  CHECK_THROWS_WITH(e.push(torch::zeros({1, 3, 1, 20, 16}, torch::kDouble)),
                    Catch::Contains("positive multiples of 8"));
  CHECK(e.pending_frames() == 0);
  CHECK(e.frames_in() == 0);
}

TEST_CASE(
    "on CUDA a session's bf16 blocks are bit-identical to the whole run cut the same way, on any stream",
    "[session][gpu]") {
  if (!cuda_here()) return;
  const TinyModel tiny = tiny_model("wan2.1-vae");
  auto model = load_tiny(tiny, torch::Device(torch::kCUDA, 0), torch::kBFloat16);
  const auto latent = read_tensors(tiny.folder / "cases.safetensors").at("latent").to(torch::kCUDA);
  const auto whole = core::decode_latents(*model, latent, {1});  // one latent frame per call, as below
  Session s(model, Op::kDecode, no_options());
  std::vector<torch::Tensor> out;
  auto side = c10::cuda::getStreamFromPool(false, 0);
  for (int64_t i = 0; i < latent.size(2); ++i) {
    if (i % 2) {  // every other push on a side stream, unsynchronised: the session orders the streams
      c10::cuda::CUDAStreamGuard guard(side);
      out.push_back(s.push(latent.narrow(2, i, 1)));
    } else {
      out.push_back(s.push(latent.narrow(2, i, 1)));
    }
  }
  torch::cuda::synchronize();
  CHECK(torch::equal(torch::cat(out, 2), whole));

  // Threads: one session each, on a stream each, pushing at once; each gets its own clip's frames.
  const int kThreads = 4;
  auto calls = std::make_shared<std::mutex>();
  std::vector<torch::Tensor> clips, results(kThreads), wholes;
  for (int k = 0; k < kThreads; ++k) {
    clips.push_back(latent * (1.0 - 0.1 * k));
    wholes.push_back(core::decode_latents(*model, clips.back(), {1}));
  }
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k)
    threads.emplace_back([&, k] {
      try {
        auto stream = c10::cuda::getStreamFromPool(false, 0);
        c10::cuda::CUDAStreamGuard guard(stream);
        Session session(model, Op::kDecode, {0, calls});
        std::vector<torch::Tensor> parts;
        for (int64_t i = 0; i < clips[k].size(2); ++i)
          parts.push_back(session.push(clips[k].narrow(2, i, 1)));
        results[k] = torch::cat(parts, 2);
        stream.synchronize();
      } catch (const std::exception& e) {
        errors[k] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int k = 0; k < kThreads; ++k) {
    INFO("thread " << k << ": " << errors[k]);
    REQUIRE(errors[k].empty());
    CHECK(torch::equal(results[k], wholes[k]));
  }
}

}  // namespace vaecodec::test
