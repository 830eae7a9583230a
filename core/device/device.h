#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/torch.h>

namespace vaecodec::core {

// A host tensor that may still be arriving from the device; wait() before reading it.
struct HostTensor {
  torch::Tensor tensor;
  std::shared_ptr<void> ready;  // a CUDA event (opaque here), null when the copy was synchronous
  void wait() const;
};

// Note [Devices]
// Everything vaecodec does to a device, apart from running the model on it, goes through that device's one
// Device object (Device::of): the side streams for copies, pinned host buffers, the allocator's cap and its
// peak statistics, the library switches that apply to the model's runs there (TF32, cuDNN's heuristics and
// timing) and the host <-> device copies of frames and latents. Engine runs and tiles take a Device; a run on
// several GPUs is several Device objects. On the CPU the object exists too and its operations are plain
// tensor moves (or nothing), so callers need not ask which device they have.
// LibTorch keeps some of these switches process-wide (cuDNN timing, TF32): prepare() and set_autotune() set
// them for every device; the Notes at each say why that is what a run wants.
class Device {
 public:
  // The copy streams a device owns, one per kind of traffic so that none waits behind another.
  enum class Lane { kFrames, kCacheUpload, kCacheDownload };

  // The process's object for `device` ("cuda" without an index: the current CUDA device). Throws Error when
  // the device does not exist here.
  static Device& of(torch::Device device);

  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  torch::Device torch_device() const { return device_; }
  bool is_cuda() const { return device_.is_cuda(); }
  c10::DeviceIndex index() const { return device_.index(); }
  std::string name() const;  // "cpu", or the GPU's name

  // Sets the device up for a model in `dtype` (Note [Heuristics]): float32 without TF32 shortcuts, cuDNN's
  // mode-B heuristics, and cuDNN's timing on until a caller decides (set_autotune). Call before the first
  // convolution: LibTorch reads the heuristics switch once.
  void prepare(torch::ScalarType dtype);
  // Lets cuDNN time its algorithms for each new convolution shape, or not (Note [Autotuning] in
  // core/run_choices.h; a model call sets it from its choices). VAECODEC_AUTOTUNE_CANDIDATES=N sets how many
  // candidates it times per shape (LibTorch's default 10; 0: all), a knob for measuring the start-up;
  // anything but a count is refused. Process-wide.
  static void set_autotune(bool on);

  // --- streams
  // The stream the model's work is queued on (the current stream); CUDA only.
  c10::cuda::CUDAStream compute_stream() const;
  // A side stream of this device, made on first use; CUDA only.
  c10::cuda::CUDAStream stream(Lane lane);

  // --- host memory
  // An empty host tensor of `t`'s sizes, strides and dtype, pinned when the device is a GPU.
  torch::Tensor host_like(const torch::Tensor& t) const;
  // The same in page-locked memory of exactly its size, for buffers kept for a whole run (parked caches, Note
  // [Offloaded caches] in core/split/parking.h; streamed ones): LibTorch's pinned allocator, which host_like
  // uses, rounds every block up to a power of two. Freed with the tensor into a pool a later run takes from
  // (Note [Pinned buffers kept for the next run] in device.cpp). Portable: pinned for every GPU's copies.
  // Throws OutOfMemory when the host cannot lock that much. Off CUDA: host_like(t).
  torch::Tensor pinned_exact_like(const torch::Tensor& t) const;
  // Whether host tensors headed for the device should be in pinned memory.
  bool wants_pinned() const { return is_cuda(); }

  // --- memory
  // Caps the caching allocator 20 MiB under `budget_bytes` (a backstop: the plan should stay below it). No-op
  // for the CPU or budget 0. Returns the fraction of the device's memory set, 0 when none.
  double cap_memory(int64_t budget_bytes);
  // Peak bytes of tensors allocated by the caching allocator since the last reset; 0 for the CPU.
  int64_t peak_allocated_bytes() const;
  // Peak bytes the caching allocator reserved from the device since the last reset; 0 for the CPU.
  int64_t peak_reserved_bytes() const;
  void reset_peak_statistics();
  // The device's free and total memory as the driver sees them (other processes' use included); zeros for the
  // CPU.
  struct MemoryInfo {
    int64_t free = 0, total = 0;
  };
  MemoryInfo memory_info() const;
  // What this process may plan a run for now: the memory the driver reports free plus what this process's
  // caching allocator holds (its cached blocks are reused by the run); nullopt on the CPU (no limit is
  // known). The test hook of Note [Running out of memory] replaces it after its failure.
  std::optional<int64_t> available_bytes() const;
  // Returns the caching allocator's unused blocks to the driver (after running out of memory, before planning
  // again).
  void release_cached();
  // Waits for all work queued on the device.
  void synchronize() const;

  // --- other GPUs of a split run (Note [Copies between GPUs] in core/band_exchange.cpp;
  // core/device/peers.cpp) A copy on this device of `peer_tensor`, a dense tensor on another GPU: one peer
  // copy on this device's current stream after `made` (the event the sender recorded when it made the tensor;
  // may be null), the sender's allocator told that this stream reads it.
  torch::Tensor receive_from_peer(const torch::Tensor& peer_tensor, const at::cuda::CUDAEvent* made);
  // Lets GPUs a and b read each other's memory (both ways; once per pair, later calls do nothing).
  static void enable_peer_access(torch::Device a, torch::Device b);
  // The allocator settings a process starts with, unless the user gave PYTORCH_CUDA_ALLOC_CONF: expandable
  // segments (Note [Expandable segments] in core/device/peers.cpp). Call before the first CUDA allocation.
  static void use_default_allocator_settings();
  // For one clip split across several GPUs: LibTorch's plain caching allocator instead of expandable
  // segments, unless the user chose the settings. Call before the first CUDA allocation.
  static void use_plain_allocator_for_peers();
  // Makes the allocator's first mapping on `device`, on this thread, once per process, before several threads
  // allocate at once (Note [The allocator's first mapping]); nothing for a CPU device. A failure is left to
  // the device's first real allocation.
  static void settle_allocator(torch::Device device);

  // --- transfers (Note [Overlapping copies])
  // A device copy of `host`, ready for work queued on the compute stream.
  torch::Tensor upload(const torch::Tensor& host);
  // A host copy of `device_tensor` (made on the compute stream): float32 for floating types, integer types
  // kept.
  HostTensor download(const torch::Tensor& device_tensor);

 private:
  explicit Device(torch::Device device);

  torch::Device device_;
  std::mutex mutex_;  // guards the side streams' creation
  std::optional<c10::cuda::CUDAStream> frames_, cache_up_, cache_down_;
};

// Note [Contexts while the weights load]
// A GPU's CUDA context is made by the first call that needs it, a few hundred milliseconds of a short run's
// start (docs/benchmarks.md, "Start-up"), and nothing needs it while the weights are read from disk. So the
// CLI starts making the contexts of the GPUs it will use on helper threads, one per GPU since the driver
// makes several at once (a plain cudaFree(0) per device, which leaves LibTorch's allocator and settings
// alone), and reads the weights meanwhile; the models are built once both are done. A failure here is left to
// the first real call on that device, which reports it.
class ContextWarmup {
 public:
  // Starts the contexts of `devices`' GPUs; nothing for CPU devices.
  explicit ContextWarmup(const std::vector<torch::Device>& devices);
  ~ContextWarmup();  // waits
  ContextWarmup(const ContextWarmup&) = delete;
  ContextWarmup& operator=(const ContextWarmup&) = delete;
  void wait();

 private:
  std::vector<std::thread> threads_;
};

}  // namespace vaecodec::core
