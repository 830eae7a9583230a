#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/torch.h>

#include "core/causal_cache.h"
#include "core/op.h"
#include "core/vae_model.h"

namespace vaecodec::core {

// Note [Streaming sessions]
// A realtime generator makes a clip's latents a few frames at a time and wants each block's frames as soon as
// the block exists, so a session keeps one clip's run open between calls: the causal cache (Note [Causal
// cache]) and, for encode, the frames still waiting for a group of temporal_factor. Each push runs the whole
// block through the model at once (in calls of at most `chunk` latent frames when one is set), so
// - decode: the first block of t latent frames gives 1 + 4(t - 1) frames, every later latent frame 4;
// - encode: the first frame gives the first latent frame, every 4 more frames one more; frames that do not
//   complete a group wait in the session (pending_frames) for the next push;
// and the concatenated outputs of any split of a clip into blocks are the whole clip's run: the model's
// result does not depend on where chunks are cut (Note [Chunks] in core/engine.cpp); with the same cuts (a
// whole run in chunks of the block length) the arithmetic is the same call for call, so on the GPU the frames
// are bit-identical too.
// A decoder that looks ahead (Note [Decoders that look ahead] in core/vae_model.h) cannot settle a block's
// last frames before it sees later latents, so its pushes give fewer frames than above, none at all until the
// clip is longer than ModelInfo::decode_lag frames; the rest stays in the cache, counted by pending_frames
// and state_bytes. Only the caller knows where the clip ends, so the end is a call of its own: finish()
// returns the frames held back (VaeModel::decode_end, with the clip's right padding), and the pushes and the
// finish together are the whole clip's decode, frame for frame. finish() ends the clip for every session (a
// causal decoder and an encode hold nothing back and return 0 frames): the state is dropped as by reset(),
// the counters keep the clip's totals until the next push starts a new clip. Encode frames still waiting for
// a group at finish() cannot make a latent frame without frames that do not exist, and dropping them would
// lose the clip's tail unseen: finish() refuses (UsageError naming how many wait) and leaves the clip open,
// so a generator pushes the frames that complete the group (the last one repeated, as the command line pads a
// clip: Note [Padding] in io/chunking.h) and finishes again, or reset()s to drop them.
// What a push or finish may and may not do to the session:
// - a block the session cannot take (another channel count, batch or frame size than the first block's, not
//   5-D, not floating point, on another device), or a finish that cannot end the clip, is refused before
//   anything changes (UsageError);
// - a push or finish that fails while it runs (out of memory) puts the state back as it was: the session
//   keeps the cache it had before the call (a plain copy of the cache holds the old histories, since layers
//   replace histories rather than write into them), which costs the cache's bytes once more at the peak;
// - work is queued on the caller's current stream without waiting for it (the output is ready when that
//   stream gets there); a call on another stream than the last first makes the new stream wait for the last
//   one's work and tells the allocator that the new stream reads the cache.
// Several sessions may share a model, each its own state: the model's weights are only read, but layers keep
// lazily made copies of them (float32 biases, padded and fp8 weights), so model calls that share
// `model_calls` are queued one at a time on the host. The GPU work of sessions on different streams overlaps
// all the same: a call queues its kernels and returns.
class Session {
 public:
  struct Options {
    int64_t chunk = 0;  // at most this many latent frames per model call; 0: a whole block in one call
    // Held around each model call; sessions (and whole runs) of one model share one. Null: none.
    std::shared_ptr<std::mutex> model_calls;
  };

  Session(std::shared_ptr<VaeModel> model, Op op, Options options);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // decode: latents [B, z, t, h, w] (the model's encode's normalization) -> frames [B, 3, n, h*f, w*f],
  // unclamped, the model's dtype; encode: frames [B, 3, t, H, W] in [-1, 1] -> latents [B, z, n, H/f, W/f] as
  // the model's encode returns them. n may be 0, and is smaller for a decoder that looks ahead (it holds
  // frames back until later latents or finish()). Any float dtype, on the CPU or the model's device; the
  // result is on the model's device. Throws UsageError (state untouched) for a block it cannot take.
  torch::Tensor push(const torch::Tensor& block);
  // Ends the clip (Note [Streaming sessions]): decode returns the frames a decoder that looks ahead held
  // back, shaped as push's output (0 frames for a causal decoder, and for encode); the next push starts a new
  // clip. Without an open clip, 0 frames of batch and size 0. Throws UsageError (state untouched) for an
  // encode whose frames still wait for a group.
  torch::Tensor finish();
  // An independent session at the same point of the same clip (its own copy of the state).
  std::unique_ptr<Session> clone() const;
  // Forgets the clip: the next push starts a new one (any frame size).
  void reset();

  Op op() const { return op_; }
  // Device bytes the session holds between pushes: the causal cache (with the frames a decoder that looks
  // ahead holds back) and the frames waiting (encode).
  int64_t state_bytes() const;
  // Encode: frames pushed that wait for a group of temporal_factor; decode: frames the latents pushed make
  // that the session holds back until later latents or finish() (0 for a causal decoder).
  int64_t pending_frames() const;
  // Since the clip began (after finish(), the ended clip's totals until the next push):
  int64_t frames_in() const;   // frames (encode) or latent frames (decode) pushed
  int64_t frames_out() const;  // latent frames (encode) or frames (decode) returned, finish()'s too

 private:
  struct State {
    CausalCache cache;
    torch::Tensor pending;      // encode: frames waiting, [B, 3, k, H, W] on the device, the model's dtype
    std::vector<int64_t> form;  // the first block's sizes, its frame count 0; empty before it
    int64_t in = 0, out = 0;
    bool ended = false;  // finish() ended the clip: only in and out are kept, for the counters
  };

  void check(const torch::Tensor& block) const;
  torch::Tensor run(const torch::Tensor& block);
  torch::Tensor run_decode(const torch::Tensor& latents);
  torch::Tensor run_encode(const torch::Tensor& frames);
  // One model call on the session's cache: encode or decode `x`; undefined `x`: the decode's end of clip.
  torch::Tensor model_call(const torch::Tensor& x);
  // 0 frames of push's output for an input of `sizes` ([B, C, T, h, w]).
  torch::Tensor empty_output(c10::IntArrayRef sizes) const;
  // pending_frames(), with mutex_ held.
  int64_t pending() const;
  // CUDA: orders work on `stream` after the last push's and tells the allocator that `stream` reads the
  // state (Note [Streaming sessions]); nothing when the last push was on `stream`.
  void hand_to(const c10::cuda::CUDAStream& stream) const;
  // CUDA: records where the current stream's work of this push (or clone) ends.
  void mark_done();
  // `body` on the model's device and the current stream, after the last push's work (hand_to), with the
  // state put back as it was when it throws; marks where its work ends (mark_done). What push and finish run.
  torch::Tensor guarded(const std::function<torch::Tensor()>& body);

  std::shared_ptr<VaeModel> model_;
  Op op_;
  Options options_;
  State state_;
  std::optional<c10::cuda::CUDAStream> last_stream_;
  std::shared_ptr<at::cuda::CUDAEvent> done_;  // recorded at the end of the last push (CUDA)
  mutable std::mutex mutex_;                   // one call (push, finish, clone, reset) at a time
};

}  // namespace vaecodec::core
