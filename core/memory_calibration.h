#pragma once

#include <cstdint>
#include <string>

#include <torch/torch.h>

#include "core/op.h"

namespace vaecodec::core {

// One measured peak of the family's released model (Note [Memory model] in core/plan_model.h): the planner
// splits it into weights, caches, I/O and the rest, and scales the rest, the activations, to other sizes.
struct MemoryCalibration {
  Op op = Op::kDecode;  // encode or decode
  torch::ScalarType dtype = torch::kBFloat16;
  double cache_elements = 0;  // causal cache elements per pixel of the frame (output pixels for decode)
  // The measured run (`vaecodec bench --op OP --size WxH --frames F --chunk C`): the model's parameters, the
  // size, its peak allocated bytes, what bench held on the device besides the run, and the model's FLOPs.
  int64_t parameters = 0;
  int64_t width = 0, height = 0, frames = 0, chunk = 1;
  double peak_gib = 0;
  double resident_gib = 0;
  double tflop = 0;
  std::string source;  // where the numbers come from, shown by `plan`
  // The measured run's time (bench's median), for the planner's rate (Note [Plan cost]); 0: not measured.
  double seconds = 0;
  // Structural like cache_elements: the largest three consecutive slots' elements per pixel, what a cache
  // streamed slot by slot holds on the device besides its resident part (Note [Caches streamed slot by
  // slot] in core/split/cache_stream.h); 0: the family's caches do not stream.
  double stream_window_elements = 0;
};

}  // namespace vaecodec::core
