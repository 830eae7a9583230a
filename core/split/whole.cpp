#include "core/split/whole.h"

#include "core/device/memory_faults.h"

namespace vaecodec::core {

Whole::Whole(VaeModel& model, Device& device, Op op, int64_t chunk, std::optional<int64_t> streamed)
    : ChunkedSplit(op, chunk, model.info().temporal_factor), model_(model), device_(device) {
  if (streamed && device_.is_cuda()) stream_ = std::make_unique<CacheStream>(cache_, device_, *streamed);
}

torch::Tensor Whole::run_chunk(const torch::Tensor& x) {
  if (op_ == Op::kEncode) {
    auto frames = x.to(device_.torch_device(), model_.dtype(), /*non_blocking=*/x.is_pinned())
                      .contiguous(model_.memory_format());
    before_model_call();
    auto latents = model_.encode(frames, cache_);
    if (stream_) stream_->called();
    return latents;
  }
  auto latents =
      x.to(device_.torch_device(), /*non_blocking=*/x.is_pinned()).contiguous(model_.memory_format());
  before_model_call();
  auto frames = model_.decode(latents, cache_);
  if (stream_) stream_->called();
  return frames;
}

// What a decoder that looks ahead held back (Note [Decoders that look ahead]).
torch::Tensor Whole::end() {
  if (op_ != Op::kDecode || model_.info().decode_lag <= 0) return {};
  torch::Tensor held = model_.decode_end(cache_);
  if (stream_) stream_->called();
  return held.defined() && held.size(2) > 0 ? held : torch::Tensor();
}

}  // namespace vaecodec::core
