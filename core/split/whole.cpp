#include "core/split/whole.h"

#include "core/device/memory_faults.h"

namespace vaecodec::core {

Whole::Whole(VaeModel& model, Device& device, Op op, int64_t chunk)
    : ChunkedSplit(op, chunk, model.info().temporal_factor), model_(model), device_(device) {}

torch::Tensor Whole::run_chunk(const torch::Tensor& x) {
  if (op_ == Op::kEncode) {
    auto frames = x.to(device_.torch_device(), model_.dtype(), /*non_blocking=*/x.is_pinned())
                      .contiguous(model_.memory_format());
    before_model_call();
    return model_.encode(frames, cache_);
  }
  auto latents =
      x.to(device_.torch_device(), /*non_blocking=*/x.is_pinned()).contiguous(model_.memory_format());
  before_model_call();
  return model_.decode(latents, cache_);
}

// What a decoder that looks ahead held back (Note [Decoders that look ahead]).
torch::Tensor Whole::end() {
  if (op_ != Op::kDecode || model_.info().decode_lag <= 0) return {};
  torch::Tensor held = model_.decode_end(cache_);
  return held.defined() && held.size(2) > 0 ? held : torch::Tensor();
}

}  // namespace vaecodec::core
