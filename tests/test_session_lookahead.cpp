// Streaming decode sessions of a decoder that looks ahead (Note [Streaming sessions] in core/session.h, Note
// [Decoders that look ahead] in core/vae_model.h), on the tiny LTX-2 2.0 and 2.3 models in float64 on the
// CPU: pushes give the frames they can settle, finish() the ones held back, and together they are the whole
// clip's decode for any split into blocks; clones finish as their source would; a finish ends the clip.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include "core/engine.h"
#include "core/error.h"
#include "core/models/registry.h"
#include "core/session.h"
#include "tests/test_support.h"
#include "tests/tiles_support.h"

namespace vaecodec::test {
namespace {

using core::Op;
using core::Session;

const std::vector<std::string> kTags = {"20", "23"};

// Random latents [1, 4, t, h, w]; 2.0 pads by reflection, which needs two latent pixels a side.
torch::Tensor random_latents(int64_t t, int64_t h, int64_t w, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randn({1, 4, t, h, w}, torch::TensorOptions().dtype(torch::kDouble));
}

// The whole clip straight through the model: one decode call over every latent frame, then its end.
torch::Tensor whole_decode(core::VaeModel& model, const torch::Tensor& z) {
  torch::InferenceMode guard;
  core::CausalCache cache;
  const auto settled = model.decode(z, cache);
  const auto held = model.decode_end(cache);
  return held.defined() ? torch::cat({settled, held}, 2) : settled;
}

// Pushes `z` in blocks of the given lengths (cycled), checking the counters after each push; returns what
// the pushes gave, joined.
torch::Tensor push_blocks(Session& s, const torch::Tensor& z, const std::vector<int64_t>& blocks) {
  const int64_t tf = 8;
  std::vector<torch::Tensor> out;
  for (int64_t at = 0, i = 0; at < z.size(2); ++i) {
    const int64_t n = std::min(blocks[i % blocks.size()], z.size(2) - at);
    out.push_back(s.push(z.narrow(2, at, n)));
    at += n;
    INFO("after " << at << " latent frames");
    CHECK(s.frames_in() == at);
    // What the latents so far make is what came out plus what the session holds back.
    CHECK(s.frames_out() + s.pending_frames() == 1 + tf * (at - 1));
    if (s.pending_frames() > 0) CHECK(s.state_bytes() > 0);
  }
  return torch::cat(out, 2);
}

}  // namespace

TEST_CASE("an LTX-2 decode session's pushes and finish give the whole clip's frames, for any blocks",
          "[session][ltx2]") {
  for (const std::string& tag : kTags) {
    INFO("LTX-2 " << tag);
    auto model = tiny_ltx2(tag);
    const int64_t lag = model->info().decode_lag;
    // 16 latent frames make 121 frames: more than either lag (53, 72), so pushes settle frames too.
    const auto z = random_latents(16, 2, 2, 1);
    const auto whole = whole_decode(*model, z);
    REQUIRE(whole.size(2) == 1 + 8 * 15);
    for (const std::vector<int64_t>& blocks :
         std::vector<std::vector<int64_t>>{{1}, {2}, {3}, {1, 4}, {5, 2, 3}, {16}}) {
      INFO("blocks of " << blocks.front() << (blocks.size() > 1 ? ", ..." : ""));
      Session s(model, Op::kDecode, {});
      const auto pushed = push_blocks(s, z, blocks);
      // The pushes settle all but the lag; finish gives exactly the rest.
      CHECK(pushed.size(2) == whole.size(2) - lag);
      CHECK(s.pending_frames() == lag);
      const auto held = s.finish();
      CHECK(held.size(2) == lag);
      const auto out = torch::cat({pushed, held}, 2);
      REQUIRE(out.sizes() == whole.sizes());
      CHECK(relative_error(out, whole) <= 1e-12);
      CHECK(s.frames_in() == 16);
      CHECK(s.frames_out() == whole.size(2));
      CHECK(s.pending_frames() == 0);
      CHECK(s.state_bytes() == 0);
    }
    // A short clip (fewer frames than the lag): the pushes give nothing, finish everything.
    const auto short_clip = z.narrow(2, 0, 3);
    Session s(model, Op::kDecode, {});
    CHECK(push_blocks(s, short_clip, {1}).size(2) == 0);
    CHECK(relative_error(s.finish(), whole_decode(*model, short_clip)) <= 1e-12);
    // At most 2 latent frames per model call: the same frames.
    Session chunked(model, Op::kDecode, {2, nullptr});
    const auto first = chunked.push(z);
    CHECK(relative_error(torch::cat({first, chunked.finish()}, 2), whole) <= 1e-12);
  }
}

TEST_CASE("an LTX-2 decode session gives the golden cases' frames", "[session][ltx2][golden]") {
  const auto cases = read_tensors(data_dir() / "ltx2-tiny" / "cases.safetensors");
  for (const std::string& tag : kTags) {
    INFO("LTX-2 " << tag);
    auto model = tiny_ltx2(tag);
    const auto latent = cases.at(tag + ".latent");
    const auto expected = cases.at(tag + ".latent_decoded");
    Session s(model, Op::kDecode, {});
    const auto pushed = push_blocks(s, latent, {1});
    const auto out = torch::cat({pushed, s.finish()}, 2);
    REQUIRE(out.sizes() == expected.sizes());
    CHECK(relative_error(out, core::decode_latents(*model, latent)) <= 1e-12);
    CHECK(relative_error(out, expected) < 1e-10);  // diffusers' decode, as tests/test_ltx2.cpp checks it
  }
}

TEST_CASE("an LTX-2 session cloned mid-clip finishes to the same frames, and finish starts a new clip",
          "[session][ltx2]") {
  for (const std::string& tag : kTags) {
    INFO("LTX-2 " << tag);
    auto model = tiny_ltx2(tag);
    const auto a = random_latents(12, 2, 2, 2);
    const auto b = random_latents(12, 2, 2, 3);  // another future for the same beginning
    const auto whole_a = whole_decode(*model, a);
    Session s(model, Op::kDecode, {});
    const auto head = push_blocks(s, a.narrow(2, 0, 5), {2});
    REQUIRE(s.pending_frames() > 0);
    auto branch = s.clone();
    CHECK(branch->state_bytes() == s.state_bytes());
    CHECK(branch->pending_frames() == s.pending_frames());
    CHECK(branch->frames_out() == s.frames_out());
    // The source takes b's future and ends; the branch then takes a's and ends as the whole clip a.
    const auto other = torch::cat({s.push(b.narrow(2, 5, 7)), s.finish()}, 2);
    const auto tail = torch::cat({branch->push(a.narrow(2, 5, 7)), branch->finish()}, 2);
    CHECK(relative_error(torch::cat({head, tail}, 2), whole_a) <= 1e-12);
    CHECK(relative_error(other, tail) > 1e-3);
    // After finish: the ended clip's counters, no state, and the next push starts a new clip of any size.
    CHECK(s.frames_in() == 12);
    CHECK(s.frames_out() == whole_a.size(2));
    CHECK(s.state_bytes() == 0);
    const auto c = random_latents(4, 2, 3, 4);
    const auto first = s.push(c.narrow(2, 0, 1));
    CHECK(s.frames_in() == 1);
    CHECK(s.frames_out() == first.size(2));
    const auto rest = s.push(c.narrow(2, 1, 3));
    const auto end = s.finish();
    CHECK(end.size(2) > 0);
    CHECK(relative_error(torch::cat({first, rest, end}, 2), whole_decode(*model, c)) <= 1e-12);
    // reset() drops what is held back: a new clip decodes as if the old one had not been.
    s.push(a.narrow(2, 0, 3));
    s.reset();
    CHECK(s.pending_frames() == 0);
    CHECK(relative_error(torch::cat({push_blocks(s, a, {4}), s.finish()}, 2), whole_a) <= 1e-12);
  }
}

TEST_CASE(
    "an LTX-2 session refuses a block without losing what it holds back; finish without a clip is empty",
    "[session][ltx2]") {
  auto model = tiny_ltx2("23");
  const auto z = random_latents(12, 1, 2, 5);
  const auto whole = whole_decode(*model, z);
  Session s(model, Op::kDecode, {});
  // No clip yet: 0 frames, batch and size 0, and nothing changes.
  const auto none = s.finish();
  CHECK(none.sizes() == std::vector<int64_t>{0, 3, 0, 0, 0});
  CHECK(s.frames_in() == 0);
  const auto head = s.push(z.narrow(2, 0, 10));
  const int64_t bytes = s.state_bytes(), held = s.pending_frames();
  REQUIRE(held > 0);
  CHECK_THROWS_AS(s.push(random_latents(1, 2, 2, 6)), UsageError);
  CHECK(s.push(z.narrow(2, 10, 0)).size(2) == 0);
  CHECK(s.state_bytes() == bytes);
  CHECK(s.pending_frames() == held);
  const auto tail = s.push(z.narrow(2, 10, 2));
  const auto end = s.finish();
  CHECK(end.sizes() == std::vector<int64_t>{1, 3, model->info().decode_lag, 32, 64});
  CHECK(relative_error(torch::cat({head, tail, end}, 2), whole) <= 1e-12);
  // A second finish has no clip to end.
  CHECK(s.finish().size(2) == 0);
  CHECK(s.frames_out() == whole.size(2));
}

}  // namespace vaecodec::test
