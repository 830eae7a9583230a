#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <vector>

#include <c10/cuda/CUDAStream.h>
#include <torch/torch.h>

namespace vaecodec::core {

struct PlaceWorker;  // a thread of the process's pool (places.cpp)

// Note [Places]
// Everything that runs on several places of one process at once runs on one kind of worker: the bands of a
// split (Note [Bands across devices] in core/band_exchange.h), exact tiles shared out among devices (Note
// [Exact tiles across devices] in core/split/exact_tiles.h), a batch over devices (Note [Batches over
// devices] in app/device_batch.h) and `bench --devices`. Places holds one worker per place, each a thread
// kept for the process (Note [Band threads]), its device current (LibTorch's and CUDA's) for all it runs
// and, where asked, a stream of its own from LibTorch's pool, the same one for as long as the Places live
// (Note [Band streams]). run() hands every worker its share at once and returns once all are done; what a
// worker throws is kept as its outcome, so one place's failure never ends another's work, and the caller
// decides what a failure means (the bands report the first band's own error, the batch counts inputs,
// bench names the device). Task is the pool's other use: one job on a thread of its own, for host work
// that overlaps the caller's.
class Places {
 public:
  enum class Streams { kCurrent, kOwn };  // the worker's current stream: the device's, or one of its own
  explicit Places(std::vector<torch::Device> devices, Streams streams = Streams::kCurrent);
  ~Places();
  Places(const Places&) = delete;
  Places& operator=(const Places&) = delete;
  size_t size() const { return devices_.size(); }
  const std::vector<torch::Device>& devices() const { return devices_; }
  // Runs work(i) on place i's worker for every place at once; returns each one's exception (null where it
  // returned), by place, once all are done.
  std::vector<std::exception_ptr> run_each(const std::function<void(size_t place)>& work);
  // As run_each; rethrows the first failure.
  void run(const std::function<void(size_t place)>& work);

 private:
  std::vector<torch::Device> devices_;
  std::vector<std::optional<c10::cuda::CUDAStream>> streams_;  // Streams::kOwn on CUDA
  std::vector<PlaceWorker*> workers_;
};

// One job on a worker of the pool (Note [Places]), on `device`; started when made. get() waits for it and
// rethrows what it threw; the destructor waits for it.
class Task {
 public:
  Task(torch::Device device, std::function<void()> job);
  ~Task();
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  void get();

 private:
  PlaceWorker* worker_;
  std::exception_ptr error_;
  bool waited_ = false;
};

// Throws the first of `errors` (as Places::run_each returns them), its message led by its device's name.
void rethrow_first(const std::vector<torch::Device>& devices, const std::vector<std::exception_ptr>& errors);

}  // namespace vaecodec::core
