#include "core/device/device.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/cuda.h>

#include "core/device/memory_faults.h"
#include "core/error.h"

namespace vaecodec::core {
namespace {

// Note [Heuristics]
// Without timing, LibTorch takes the first kernel that cuDNN's heuristics offer for a convolution. Its
// default, mode A ("instant"), answers quickly but picked kernels 22% slower than timing finds for the Wan2.1
// encoder and decoder on an H100 (bench round trip 720p x81: 3.55 s against 2.91 s); mode B, a slower query,
// picked kernels as fast as timing's (2.90 s), without timing's ~2 s at the start of a run. Its first calls
// cost about what mode A's do (a cold round trip 4.1-4.45 s against 4.41 s), once per shape and thread.
// docs/benchmarks.md, "Start-up: cuDNN's heuristics instead of its timing".
void use_cudnn_heuristics_b() {
  setenv("TORCH_CUDNN_USE_HEURISTIC_MODE_B", "1", /*overwrite=*/0);
}

torch::Device resolve(torch::Device device) {
  if (!device.is_cuda()) return torch::Device(device.type());
  if (!torch::cuda::is_available())
    throw Error("device " + device.str() + " asked for, but CUDA is not available");
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  const c10::DeviceIndex index = device.has_index() ? device.index() : c10::cuda::current_device();
  if (index < 0 || index >= count)
    throw Error("device " + device.str() + " does not exist (" + std::to_string(count) + " CUDA device" +
                (count == 1 ? "" : "s") + " here: cuda:0" +
                (count > 1 ? "..cuda:" + std::to_string(count - 1) : "") + ")");
  return torch::Device(torch::kCUDA, index);
}

constexpr size_t kAggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

}  // namespace

void HostTensor::wait() const {
  if (ready) static_cast<c10::cuda::CUDAEvent*>(ready.get())->synchronize();
}

Device& Device::of(torch::Device device) {
  static std::mutex mutex;
  static std::map<std::pair<int, int>, std::unique_ptr<Device>>* devices =
      new std::map<std::pair<int, int>, std::unique_ptr<Device>>;  // never destroyed: streams outlive exit
  const torch::Device resolved = resolve(device);
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*devices)[{static_cast<int>(resolved.type()), static_cast<int>(resolved.index())}];
  if (!slot) slot.reset(new Device(resolved));
  return *slot;
}

Device::Device(torch::Device device) : device_(device) {}

std::string Device::name() const {
  if (!is_cuda()) return device_.str();
  cudaDeviceProp props{};
  if (cudaGetDeviceProperties(&props, index()) != cudaSuccess) return device_.str();
  return props.name;
}

void Device::prepare(torch::ScalarType dtype) {
  if (!is_cuda()) return;
  if (dtype == torch::kFloat) {
    // float32 means the model's own arithmetic: no TF32 shortcuts in cuDNN convolutions or cuBLAS products.
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
  }
  // Timing on unless the model's choices decide (the CLI's do: off unless asked, Note [Autotuning] in
  // core/run_choices.h); mode-B heuristics for when it is off (Note [Heuristics]).
  use_cudnn_heuristics_b();
  set_autotune(true);
}

void Device::set_autotune(bool on) {
  at::globalContext().setBenchmarkCuDNN(on);
  if (const char* limit = std::getenv("VAECODEC_AUTOTUNE_CANDIDATES")) {
    char* end = nullptr;
    const long n = std::strtol(limit, &end, 10);
    if (end == limit || *end != '\0' || n < 0 || n > 1000)
      throw Error(
          std::string("VAECODEC_AUTOTUNE_CANDIDATES: expected a count of candidates (0: all), got '") +
          limit + "'");
    at::globalContext().setBenchmarkLimitCuDNN(static_cast<int>(n));
  }
}

c10::cuda::CUDAStream Device::compute_stream() const {
  return c10::cuda::getCurrentCUDAStream(index());
}

c10::cuda::CUDAStream Device::stream(Lane lane) {
  if (!is_cuda()) throw Error("a copy stream was asked of " + device_.str() + ", which has none");
  std::lock_guard<std::mutex> lock(mutex_);
  auto& s = lane == Lane::kFrames ? frames_ : lane == Lane::kCacheUpload ? cache_up_ : cache_down_;
  if (!s) s = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index());
  return *s;
}

torch::Tensor Device::host_like(const torch::Tensor& t) const {
  return torch::empty_strided(t.sizes(), t.strides(),
                              t.options().device(torch::kCPU).pinned_memory(is_cuda()));
}

// Note [Pinned buffers kept for the next run]
// Locking host memory is slow: cudaHostAlloc took 0.40 s per GiB on the H200's host (scripts/dev/
// copy_probe.py), against 20 ms to copy that GiB to the device. A streamed cache allocates its host buffers
// in its first chunk, on the thread that queues the model, so the GPU waited behind every allocation: a
// 720p x33 decode in 16 GB, 3.7 GiB streamed, ran 6.5 s with the GPU idle 3.4 s of its 6.3 s span, every
// long gap ended by a download that had waited for its buffer (docs/benchmarks.md, "The whole frame
// streamed"). So buffers of exact sizes go back
// to a process-wide pool when their tensor dies, and a later run (bench's timed run after its warm-up, the
// next clip of a batch, a Python process's next call) takes them back without locking anything. The pool
// never lets the process hold more locked memory than the most it has used at once: before locking more it
// frees pooled buffers beyond that.
namespace {

class PinnedPool {
 public:
  static PinnedPool& get() {
    static PinnedPool* pool = new PinnedPool;  // never destroyed: tensors may outlive static destruction
    return *pool;
  }
  void* take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = free_.find(bytes); it != free_.end()) {
        void* p = it->second;
        free_.erase(it);
        free_bytes_ -= bytes;
        in_use_ += bytes;
        peak_ = std::max(peak_, in_use_);
        return p;
      }
      in_use_ += bytes;
      peak_ = std::max(peak_, in_use_);
      while (!free_.empty() && in_use_ + free_bytes_ > peak_) drop(std::prev(free_.end()));
    }
    void* data = nullptr;
    cudaError_t err = cudaHostAlloc(&data, bytes, cudaHostAllocPortable);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();  // not a sticky error: the next call must not see it
      std::lock_guard<std::mutex> lock(mutex_);
      while (!free_.empty()) drop(free_.begin());  // what the pool holds, and once more
      err = cudaHostAlloc(&data, bytes, cudaHostAllocPortable);
      if (err != cudaSuccess) {
        (void)cudaGetLastError();
        in_use_ -= bytes;
        throw OutOfMemory("cannot lock " + std::to_string(bytes >> 20) + " MiB of host memory for a cache (" +
                          cudaGetErrorString(err) + ")");
      }
    }
    return data;
  }
  void give(void* data, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.emplace(bytes, data);
    free_bytes_ += bytes;
    in_use_ -= bytes;
  }

 private:
  void drop(std::multimap<size_t, void*>::iterator it) {
    free_bytes_ -= it->first;
    cudaFreeHost(it->second);
    free_.erase(it);
  }
  std::mutex mutex_;
  std::multimap<size_t, void*> free_;  // by size
  size_t free_bytes_ = 0, in_use_ = 0, peak_ = 0;
};

}  // namespace

torch::Tensor Device::pinned_exact_like(const torch::Tensor& t) const {
  const size_t bytes = at::detail::computeStorageNbytes(t.sizes(), t.strides(), t.element_size());
  if (!is_cuda() || bytes == 0) return host_like(t);
  void* data = PinnedPool::get().take(bytes);
  return torch::from_blob(
      data, t.sizes(), t.strides(), [bytes](void* p) { PinnedPool::get().give(p, bytes); },
      t.options().device(torch::kCPU));
}

double Device::cap_memory(int64_t budget_bytes) {
  if (!is_cuda() || budget_bytes <= 0) return 0;
  cudaDeviceProp props{};
  if (cudaGetDeviceProperties(&props, index()) != cudaSuccess)
    throw Error("cannot read the memory size of CUDA device " + std::to_string(index()));
  // The allocator's cap is kept one of its 20 MiB segments below the budget: a SeedVR2 4K decode in 12 GiB on
  // an H200 reserved 10 MiB more than a cap of exactly 12 GiB at its peak (the allocator let it pass; why is
  // not known), and the budget is the promise (the plans leave --vram-margin's share of it free, far more).
  constexpr int64_t kSegmentSlack = int64_t{20} << 20;
  const int64_t cap = std::max<int64_t>(budget_bytes - kSegmentSlack, budget_bytes / 2);
  const double fraction = std::min(1.0, static_cast<double>(cap) / static_cast<double>(props.totalGlobalMem));
  c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, index());
  return fraction;
}

int64_t Device::peak_allocated_bytes() const {
  if (!is_cuda()) return 0;
  return c10::cuda::CUDACachingAllocator::getDeviceStats(index()).allocated_bytes[kAggregate].peak;
}

int64_t Device::peak_reserved_bytes() const {
  if (!is_cuda()) return 0;
  return c10::cuda::CUDACachingAllocator::getDeviceStats(index()).reserved_bytes[kAggregate].peak;
}

void Device::reset_peak_statistics() {
  if (is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(index());
}

Device::MemoryInfo Device::memory_info() const {
  if (!is_cuda()) return {};
  c10::cuda::CUDAGuard guard(index());
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess)
    throw Error("cannot read the free memory of CUDA device " + std::to_string(index()));
  return {static_cast<int64_t>(free_bytes), static_cast<int64_t>(total_bytes)};
}

std::optional<int64_t> Device::available_bytes() const {
  if (const auto injected = injected_free_bytes()) return injected;
  if (!is_cuda()) return std::nullopt;
  const int64_t held =
      c10::cuda::CUDACachingAllocator::getDeviceStats(index()).reserved_bytes[kAggregate].current;
  return memory_info().free + held;
}

void Device::release_cached() {
  if (is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
}

void Device::synchronize() const {
  if (is_cuda()) torch::cuda::synchronize(index());
}

// Note [Overlapping copies]
// On a CUDA device the frames cross PCIe on a stream of their own (Lane::kFrames): host frames are pinned
// (the reader allocates them so), uploads are queued on the copy stream and the model's stream waits for
// them with an event, and downloads wait for the model's work with an event, copy into pinned memory and
// hand the writer an event to wait on. The VAE thread therefore never blocks on a copy, and uploads of the
// next chunk, the download of the last one and the encoder (x264) all run while the model computes. The
// caching allocator is told which stream uses each tensor (record_stream) so memory is not reused too early.
// On the CPU both directions are plain (and free) tensor moves.
torch::Tensor Device::upload(const torch::Tensor& host) {
  if (!is_cuda()) return host.to(device_);
  c10::cuda::CUDAStream compute = compute_stream();
  c10::cuda::CUDAStream copy = stream(Lane::kFrames);
  torch::Tensor on_device;
  {
    c10::cuda::CUDAStreamGuard guard(copy);
    on_device = host.to(device_, /*non_blocking=*/true);
  }
  c10::cuda::CUDAEvent copied;
  copied.record(copy);
  copied.block(compute);
  on_device.record_stream(compute);
  return on_device;
}

HostTensor Device::download(const torch::Tensor& device_tensor) {
  // 16-bit floats arrive as float32; integer code values (converted frames) keep their type.
  const auto type = device_tensor.is_floating_point() ? torch::kFloat : device_tensor.scalar_type();
  if (!is_cuda()) return {device_tensor.to(torch::kCPU, type).contiguous(), nullptr};
  c10::cuda::CUDAStream compute = compute_stream();
  c10::cuda::CUDAStream copy = stream(Lane::kFrames);
  const torch::Tensor source = device_tensor.to(type).contiguous();
  c10::cuda::CUDAEvent computed;
  computed.record(compute);
  computed.block(copy);
  torch::Tensor host = torch::empty(source.sizes(), torch::TensorOptions().dtype(type).pinned_memory(true));
  auto ready = std::make_shared<c10::cuda::CUDAEvent>();
  {
    c10::cuda::CUDAStreamGuard guard(copy);
    host.copy_(source, /*non_blocking=*/true);
    ready->record(copy);
  }
  source.record_stream(copy);
  return {host, std::static_pointer_cast<void>(ready)};
}

ContextWarmup::ContextWarmup(const std::vector<torch::Device>& devices) {
  std::vector<int> gpus;
  for (const torch::Device& d : devices) {
    const int gpu = d.has_index() ? d.index() : 0;
    if (d.is_cuda() && std::find(gpus.begin(), gpus.end(), gpu) == gpus.end()) gpus.push_back(gpu);
  }
  for (const int gpu : gpus)
    threads_.emplace_back([gpu] {
      if (cudaSetDevice(gpu) == cudaSuccess) cudaFree(nullptr);
      cudaGetLastError();  // a failure is the first real call's to report
    });
}

ContextWarmup::~ContextWarmup() {
  wait();
}

void ContextWarmup::wait() {
  for (std::thread& thread : threads_)
    if (thread.joinable()) thread.join();
}

}  // namespace vaecodec::core
