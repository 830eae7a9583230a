#include <cstdlib>
#include <mutex>
#include <string>

#include <ATen/cuda/PeerToPeerAccess.h>
#include <c10/core/AllocatorConfig.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "core/device/device.h"
#include "core/error.h"

namespace vaecodec::core {
namespace {

// Note [Expandable segments]
// Under a VRAM cap the default caching allocator's reserved-but-unallocated blocks reached 25-30% of the
// budget on an H100; with expandable segments (one growing mapping instead of fixed blocks) the cap held at
// 5% over the allocated peak (docs/benchmarks.md, "Fragmentation"). So a process starts with them, unless the
// user chose allocator settings; the planner's margin (PlannerOptions::margin) assumes it. A split run across
// GPUs uses the plain allocator instead (Note [Copies between GPUs] in core/band_exchange.cpp).
constexpr const char* kDefaultAllocatorSettings = "expandable_segments:True";

// Note [The allocator's first mapping]
// With expandable segments, LibTorch's allocator learns at its first mapping which kind of handle the driver
// gives (it asks for a fabric handle, and where that is refused records the POSIX one and asks again), in a
// process-wide setting it reads and writes without a lock. Threads that make their first mappings at once -
// the models of a batch over four GPUs, built on a thread each - can each read the other's half-made choice
// and ask for a handle the driver refuses: "CUDA driver error: operation not permitted" on one to three of
// four H200s in two of three batches (docs/benchmarks.md, "Four GPUs"). One small allocation on one thread
// beforehand settles the setting for the whole process.

}  // namespace

void Device::use_default_allocator_settings() {
  setenv("PYTORCH_CUDA_ALLOC_CONF", kDefaultAllocatorSettings, /*overwrite=*/0);
}

void Device::use_plain_allocator_for_peers() {
  const char* settings = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
  if (settings == nullptr || std::string(settings) != kDefaultAllocatorSettings) return;
  const std::string plain = "expandable_segments:False";
  setenv("PYTORCH_CUDA_ALLOC_CONF", plain.c_str(), /*overwrite=*/1);
  c10::CachingAllocator::setAllocatorSettings(plain);
}

void Device::settle_allocator(torch::Device device) {
  if (!device.is_cuda()) return;
  static std::once_flag settled;
  std::call_once(settled, [&] {
    try {
      c10::cuda::CUDAGuard guard(device);
      (void)torch::empty({1}, torch::TensorOptions().device(device).dtype(torch::kFloat));
    } catch (...) {  // left to the device's first real allocation, which reports it
    }
  });
}

void Device::enable_peer_access(torch::Device a, torch::Device b) {
  if (!a.is_cuda() || !b.is_cuda() || a == b) return;
  at::cuda::get_p2p_access(a.index(), b.index());
  at::cuda::get_p2p_access(b.index(), a.index());
}

torch::Tensor Device::receive_from_peer(const torch::Tensor& peer_tensor, const at::cuda::CUDAEvent* made) {
  const torch::Tensor& t = peer_tensor;
  if (!t.is_cuda() || !is_cuda() || t.numel() == 0) return t.to(device_);
  if (!t.is_contiguous()) throw Error("a tensor from another GPU is not dense");
  const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(index());
  // CUDAEvent::block only queues a wait on the event; LibTorch just does not mark it const.
  if (made) const_cast<at::cuda::CUDAEvent*>(made)->block(stream);
  auto out = torch::empty(t.sizes(), t.options().device(device_));
  C10_CUDA_CHECK(cudaMemcpyPeerAsync(out.data_ptr(), index(), t.data_ptr(), t.device().index(), t.nbytes(),
                                     stream.stream()));
  c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream);
  return out;
}

}  // namespace vaecodec::core
