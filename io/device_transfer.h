#pragma once

#include <memory>

#include <torch/torch.h>

namespace vaecodec::io {

// A host tensor that may still be arriving from the device; wait() before reading it.
struct HostTensor {
  torch::Tensor tensor;
  std::shared_ptr<void> ready;  // a CUDA event (opaque here), null when the copy was synchronous
  void wait() const;
};

// Note [Overlapping copies]
// On a CUDA device the frames cross PCIe on a stream of their own: host frames are pinned (the reader
// allocates them so), uploads are queued on the copy stream and the model's stream waits for them with an
// event, and downloads wait for the model's work with an event, copy into pinned memory and hand the writer
// an event to wait on. The VAE thread therefore never blocks on a copy, and uploads of the next chunk, the
// download of the last one and the encoder (x264) all run while the model computes. The caching allocator is
// told which stream uses each tensor (record_stream) so memory is not reused too early.
// On the CPU both directions are plain (and free) tensor moves.
class DeviceTransfer {
 public:
  explicit DeviceTransfer(torch::Device device);
  ~DeviceTransfer();
  DeviceTransfer(const DeviceTransfer&) = delete;
  DeviceTransfer& operator=(const DeviceTransfer&) = delete;

  torch::Device device() const { return device_; }
  // Whether host tensors headed for the device should be in pinned memory.
  bool wants_pinned() const { return device_.is_cuda(); }
  // A device copy of `host`, ready for work queued on the current stream.
  torch::Tensor upload(const torch::Tensor& host);
  // A host copy of `device_tensor` (made on the current stream): float32 for floating types, integer types
  // kept.
  HostTensor download(const torch::Tensor& device_tensor);

 private:
  struct Cuda;
  torch::Device device_;
  std::unique_ptr<Cuda> cuda_;
};

// Peak bytes of tensors allocated on `device` by the caching allocator (since the last reset); 0 for the CPU.
int64_t device_peak_bytes(torch::Device device);

}  // namespace vaecodec::io
