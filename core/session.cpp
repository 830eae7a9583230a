#include "core/session.h"

#include <string>
#include <utility>

#include <c10/core/DeviceGuard.h>

#include "core/chunk_options.h"
#include "core/device/memory_faults.h"
#include "core/error.h"
#include "core/sizes.h"

namespace vaecodec::core {
namespace {

torch::Tensor join(std::vector<torch::Tensor>& parts) {
  return parts.size() == 1 ? parts.front() : torch::cat(parts, 2);
}

}  // namespace

Session::Session(std::shared_ptr<VaeModel> model, Op op, Options options)
    : model_(std::move(model)), op_(op), options_(std::move(options)) {
  if (!model_) throw Error("a session needs a model");
  if (op_ != Op::kEncode && op_ != Op::kDecode) throw UsageError("a session encodes or decodes");
  if (options_.chunk < 0) throw UsageError("a session's chunk is at least 1 latent frame (0: a whole block)");
}

void Session::check(const torch::Tensor& block) const {
  const ModelInfo& info = model_->info();
  const bool encode = op_ == Op::kEncode;
  const std::string what = encode ? "frames" : "latents";
  const std::string verb = encode ? "encode" : "decode";
  if (!block.defined()) throw UsageError(verb + " session: expected a tensor of " + what);
  const int64_t channels = encode ? 3 : info.latent_channels;
  const std::string form = encode ? "[B, 3, T, H, W]" : "[B, " + std::to_string(channels) + ", T, h, w]";
  if (block.dim() != 5 || block.size(1) != channels)
    throw UsageError(verb + " session: expected " + what + " shaped " + form + ", got " +
                     shape_string(block.sizes()));
  if (!block.is_floating_point())
    throw UsageError(verb + " session: expected floating-point " + what + ", got " +
                     std::string(c10::toString(block.scalar_type())));
  if (!block.device().is_cpu() && block.device() != model_->device())
    throw UsageError(verb + " session: the block is on " + block.device().str() + ", the model on " +
                     model_->device().str());
  const int64_t f = info.spatial_factor;
  if (block.size(0) == 0 || block.size(3) == 0 || block.size(4) == 0 ||
      (encode && (block.size(3) % f || block.size(4) % f)))
    throw UsageError(verb + " session: " + shape_string(block.sizes()) + " is not a frame size it takes" +
                     (encode ? " (sides must be positive multiples of " + std::to_string(f) + ")" : ""));
  if (!state_.form.empty()) {
    std::vector<int64_t> sizes = block.sizes().vec();
    sizes[2] = 0;
    if (sizes != state_.form) {
      std::vector<int64_t> expected = state_.form;
      expected[2] = -1;
      throw UsageError(verb + " session: this clip's blocks are " + shape_string(expected) +
                       " (T any), got " + shape_string(block.sizes()) +
                       "; reset() the session to start a clip of another size");
    }
  }
}

torch::Tensor Session::empty_output(c10::IntArrayRef sizes) const {
  const ModelInfo& info = model_->info();
  const int64_t f = info.spatial_factor;
  auto options = torch::TensorOptions().device(model_->device());
  if (op_ == Op::kEncode)
    return torch::empty({sizes[0], info.latent_channels, 0, sizes[3] / f, sizes[4] / f},
                        options.dtype(torch::kFloat));
  return torch::empty({sizes[0], 3, 0, sizes[3] * f, sizes[4] * f}, options.dtype(model_->dtype()));
}

torch::Tensor Session::model_call(const torch::Tensor& x) {
  std::unique_lock<std::mutex> lock;
  if (options_.model_calls) lock = std::unique_lock<std::mutex>(*options_.model_calls);
  before_model_call();
  if (!x.defined()) return model_->decode_end(state_.cache);
  return op_ == Op::kEncode ? model_->encode(x, state_.cache) : model_->decode(x, state_.cache);
}

torch::Tensor Session::run_decode(const torch::Tensor& latents) {
  const torch::Tensor z =
      latents.to(model_->device(), /*non_blocking=*/latents.is_pinned()).contiguous(model_->memory_format());
  const int64_t t = z.size(2), step = options_.chunk > 0 ? options_.chunk : t;
  std::vector<torch::Tensor> parts;
  for (int64_t at = 0; at < t; at += step)
    parts.push_back(model_call(z.narrow(2, at, std::min(step, t - at))));
  return join(parts);
}

torch::Tensor Session::run_encode(const torch::Tensor& frames) {
  const int64_t tf = model_->info().temporal_factor;
  torch::Tensor x = frames.to(model_->device(), model_->dtype(), /*non_blocking=*/frames.is_pinned());
  if (state_.pending.defined() && state_.pending.size(2) > 0) x = torch::cat({state_.pending, x}, 2);
  // The frames that complete groups: frame 0 is a group of its own (Note [Chunks] in core/engine.cpp).
  const bool first = state_.out == 0;
  const int64_t n = x.size(2);
  const int64_t ready = first ? 1 + tf * ((n - 1) / tf) : tf * (n / tf);
  // What waits is copied out, so that the block it came with is not held with it.
  state_.pending = x.narrow(2, ready, n - ready).clone();
  if (ready == 0) return empty_output(frames.sizes());
  x = x.narrow(2, 0, ready).contiguous(model_->memory_format());
  std::vector<torch::Tensor> parts;
  int64_t at = 0;
  while (at < ready) {
    const bool opening = first && at == 0;
    int64_t take = ready - at;
    if (options_.chunk > 0) take = std::min(take, encode_chunk_frames(tf, options_.chunk, opening));
    parts.push_back(model_call(x.narrow(2, at, take)));
    at += take;
  }
  return join(parts);
}

torch::Tensor Session::run(const torch::Tensor& block) {
  torch::InferenceMode inference;
  return op_ == Op::kEncode ? run_encode(block) : run_decode(block);
}

void Session::hand_to(const c10::cuda::CUDAStream& stream) const {
  if (!last_stream_ || *last_stream_ == stream) return;
  if (done_) done_->block(stream);
  for (const auto& slot : state_.cache.slots())
    if (slot.history.defined()) slot.history.record_stream(stream);
  if (state_.pending.defined()) state_.pending.record_stream(stream);
}

void Session::mark_done() {
  if (!model_->device().is_cuda()) return;
  const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(model_->device().index());
  if (!done_) done_ = std::make_shared<at::cuda::CUDAEvent>();
  done_->record(stream);
  last_stream_ = stream;
}

torch::Tensor Session::guarded(const std::function<torch::Tensor()>& body) {
  c10::OptionalDeviceGuard device_guard;
  if (model_->device().is_cuda()) {
    device_guard.reset_device(model_->device());
    hand_to(c10::cuda::getCurrentCUDAStream(model_->device().index()));
  }
  State before = state_;  // shares the histories: what a failed call puts back
  torch::Tensor out;
  try {
    out = body();
  } catch (...) {
    state_ = std::move(before);
    throw;
  }
  mark_done();
  return out;
}

torch::Tensor Session::push(const torch::Tensor& block) {
  std::lock_guard<std::mutex> lock(mutex_);
  check(block);
  if (block.size(2) == 0) return empty_output(block.sizes());
  return guarded([&] {
    if (state_.ended) state_ = State{};
    torch::Tensor out = run(block);
    if (state_.form.empty()) {
      state_.form = block.sizes().vec();
      state_.form[2] = 0;
    }
    state_.in += block.size(2);
    state_.out += out.size(2);
    return out;
  });
}

torch::Tensor Session::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t waiting = op_ == Op::kEncode ? pending() : 0;
  if (waiting > 0) {
    const int64_t tf = model_->info().temporal_factor;
    throw UsageError("encode session: " + std::to_string(waiting) + " frame" +
                     (waiting > 1 ? "s wait" : " waits") + " for a group of " + std::to_string(tf) +
                     " and cannot end the clip; push " + std::to_string(tf - waiting) +
                     " more (the last one repeated) or reset() to drop them");
  }
  const std::vector<int64_t> none = {0, 0, 0, 0, 0};
  const std::vector<int64_t>& sizes = state_.form.empty() ? none : state_.form;
  torch::Tensor out;
  if (op_ == Op::kDecode && model_->info().decode_lag > 0 && !state_.form.empty()) {
    out = guarded([&] {
      torch::InferenceMode inference;
      return model_call(torch::Tensor());
    });
  }
  if (!out.defined() || out.size(2) == 0) out = empty_output(sizes);
  State ended;
  ended.in = state_.in;
  ended.out = state_.out + out.size(2);
  ended.ended = true;
  state_ = std::move(ended);
  return out;
}

std::unique_ptr<Session> Session::clone() const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto copy = std::make_unique<Session>(model_, op_, options_);
  c10::OptionalDeviceGuard device_guard;
  if (model_->device().is_cuda()) {
    device_guard.reset_device(model_->device());
    // The copies below read the state on this stream (Note [Streaming sessions]).
    hand_to(c10::cuda::getCurrentCUDAStream(model_->device().index()));
  }
  {
    torch::InferenceMode inference;
    copy->state_ = state_;
    copy->state_.cache = state_.cache.deep_copy();
    if (state_.pending.defined()) copy->state_.pending = state_.pending.clone();
  }
  copy->mark_done();
  return copy;
}

void Session::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  state_ = State{};
}

int64_t Session::state_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t n = state_.cache.bytes();
  if (state_.pending.defined()) n += state_.pending.numel() * state_.pending.element_size();
  return n;
}

int64_t Session::pending() const {
  if (op_ == Op::kEncode) return state_.pending.defined() ? state_.pending.size(2) : 0;
  // A decode owes the frames its latents make (Note [Streaming sessions]) less those it returned.
  if (state_.ended || state_.in == 0) return 0;
  return 1 + model_->info().temporal_factor * (state_.in - 1) - state_.out;
}

int64_t Session::pending_frames() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending();
}

int64_t Session::frames_in() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_.in;
}

int64_t Session::frames_out() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_.out;
}

}  // namespace vaecodec::core
