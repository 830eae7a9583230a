#include "io/device_transfer.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "core/error.h"

namespace vaecodec::io {

struct DeviceTransfer::Cuda {
  explicit Cuda(c10::DeviceIndex index)
      : copy(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index)) {}
  c10::cuda::CUDAStream copy;
};

void HostTensor::wait() const {
  if (ready) static_cast<c10::cuda::CUDAEvent*>(ready.get())->synchronize();
}

DeviceTransfer::DeviceTransfer(torch::Device device) : device_(device) {
  if (!device.is_cuda()) return;
  if (!torch::cuda::is_available())
    throw Error("device " + device.str() + " asked for, but CUDA is not available");
  const c10::DeviceIndex index = device.has_index() ? device.index() : c10::cuda::current_device();
  device_ = torch::Device(torch::kCUDA, index);
  cuda_ = std::make_unique<Cuda>(index);
}

DeviceTransfer::~DeviceTransfer() = default;

torch::Tensor DeviceTransfer::upload(const torch::Tensor& host) {
  if (!cuda_) return host.to(device_);
  c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device_.index());
  torch::Tensor on_device;
  {
    c10::cuda::CUDAStreamGuard guard(cuda_->copy);
    on_device = host.to(device_, /*non_blocking=*/true);
  }
  c10::cuda::CUDAEvent copied;
  copied.record(cuda_->copy);
  copied.block(compute);
  on_device.record_stream(compute);
  return on_device;
}

HostTensor DeviceTransfer::download(const torch::Tensor& device_tensor) {
  // 16-bit floats arrive as float32; integer code values (converted frames) keep their type.
  const auto type = device_tensor.is_floating_point() ? torch::kFloat : device_tensor.scalar_type();
  if (!cuda_) return {device_tensor.to(torch::kCPU, type).contiguous(), nullptr};
  c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device_.index());
  const torch::Tensor source = device_tensor.to(type).contiguous();
  c10::cuda::CUDAEvent computed;
  computed.record(compute);
  computed.block(cuda_->copy);
  torch::Tensor host = torch::empty(source.sizes(), torch::TensorOptions().dtype(type).pinned_memory(true));
  auto ready = std::make_shared<c10::cuda::CUDAEvent>();
  {
    c10::cuda::CUDAStreamGuard guard(cuda_->copy);
    host.copy_(source, /*non_blocking=*/true);
    ready->record(cuda_->copy);
  }
  source.record_stream(cuda_->copy);
  return {host, std::static_pointer_cast<void>(ready)};
}

int64_t device_peak_bytes(torch::Device device) {
  if (!device.is_cuda() || !torch::cuda::is_available()) return 0;
  const c10::DeviceIndex index = device.has_index() ? device.index() : c10::cuda::current_device();
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
}

}  // namespace vaecodec::io
