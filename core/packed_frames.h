#pragma once

#include <cstdint>
#include <memory>

#include <torch/torch.h>

namespace vaecodec::core {

// Note [Frames kept packed]
// An encode whose window of tiles through time waits in host memory (Note [Windows in host memory] in
// core/split/exact_tiles.cpp) holds each of the window's frames until its last tile has read it. As the
// model's input that is three values a pixel (4K x81 in bf16: 3.75 GiB); as a video's own 8-bit Y'CbCr 4:2:0
// planes it is 1.5 bytes (0.94 GiB). So the caller may hand a run its frames packed, with what unpacks them
// (a PackedFrames), where keeps_packed_frames() says the run would keep them: the run holds the packed
// frames, and each tile unpacks the chunk it reads on its own device, by the operations the caller would
// have run once per frame, so the model sees the same numbers (the conversion runs once per tile instead
// of once, and a chunk goes up in its packed bytes). Any other run takes the frames unpacked.
class PackedFrames {
 public:
  virtual ~PackedFrames() = default;
  virtual int64_t frames() const = 0;
  // The unpacked frames' shape, [B, 3, frames(), H, W], as a tensor on the meta device.
  virtual torch::Tensor shape() const = 0;
  // Host memory the packed frames take.
  virtual int64_t bytes() const = 0;
  // Frames [at, at + len) as the model's input [B, 3, len, H, W] in `dtype` on `device`.
  virtual torch::Tensor unpack(int64_t at, int64_t len, torch::Device device,
                               torch::ScalarType dtype) const = 0;
};

}  // namespace vaecodec::core
