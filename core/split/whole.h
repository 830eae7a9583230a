#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include <torch/torch.h>

#include "core/causal_cache.h"
#include "core/device/device.h"
#include "core/split/cache_stream.h"
#include "core/split/split.h"
#include "core/vae_model.h"

namespace vaecodec::core {

// The model over the whole frame, chunk by chunk, with the run's own causal cache (Note [Chunks] in
// core/engine.cpp): the split of a run whose plan neither tiles nor bands the frame. With `streamed`, the
// cache beyond that many bytes waits in host memory between its layers' calls (Note [Caches streamed slot
// by slot] in cache_stream.h).
class Whole : public ChunkedSplit {
 public:
  // chunk: latent frames per chunk.
  Whole(VaeModel& model, Device& device, Op op, int64_t chunk, std::optional<int64_t> streamed = {});
  int64_t cache_bytes() const override { return cache_.bytes(); }

 private:
  torch::Tensor run_chunk(const torch::Tensor& x) override;
  torch::Tensor end() override;

  VaeModel& model_;
  Device& device_;  // the model's
  CausalCache cache_;
  std::unique_ptr<CacheStream> stream_;  // after cache_: it watches it
};

}  // namespace vaecodec::core
