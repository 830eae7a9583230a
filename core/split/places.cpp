#include "core/split/places.h"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include <c10/cuda/CUDAGuard.h>

#include "core/device/device.h"
#include "core/error.h"
#include "core/error_text.h"

namespace vaecodec::core {

// A thread of the pool (Note [Band threads]): runs one posted job at a time and keeps what it threw.
struct PlaceWorker {
  std::mutex mutex;
  std::condition_variable changed;
  std::function<void()> job;
  bool busy = false;  // a job posted and not finished
  std::exception_ptr error;
  // Guarded by the pool's mutex (Pool): held by a Places or a Task, and the device it last served.
  bool taken = false;
  std::optional<torch::Device> last;
  void loop() {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      changed.wait(lock, [&] { return static_cast<bool>(job); });
      auto run = std::move(job);
      job = nullptr;
      lock.unlock();
      std::exception_ptr thrown;
      try {
        run();
      } catch (...) {
        thrown = std::current_exception();
      }
      run = nullptr;
      lock.lock();
      error = thrown;
      busy = false;
      changed.notify_all();
    }
  }
  void post(std::function<void()> f) {
    std::lock_guard<std::mutex> lock(mutex);
    job = std::move(f);
    error = nullptr;
    busy = true;
    changed.notify_all();
  }
  std::exception_ptr wait() {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return !busy; });
    return error;
  }
};

namespace {

// Note [Band threads]
// LibTorch keeps cuDNN's chosen kernels (and its execution plans) per thread. A band's thread made for each
// split run would start with none, so every run would time every convolution shape again (with cuDNN's
// timing on) or ask cuDNN's heuristics again: on two H200s that idled each GPU half of a 720p decode, in
// gaps of 40-85 ms. So the bands - and everything else that runs on places (Note [Places]) - run on threads
// kept for the process: Places takes an idle thread that last served its device where there is one, makes a
// new one where there is not, and hands it back when it is destroyed. The threads wait idle for the rest of
// the process (never joined: the pool is never destroyed, so no thread outlives the libraries it uses at
// exit).
class Pool {
 public:
  static Pool& get() {
    static Pool* pool = new Pool;
    return *pool;
  }
  PlaceWorker* acquire(const torch::Device& device) {
    std::lock_guard<std::mutex> lock(mutex_);
    PlaceWorker* pick = nullptr;
    for (auto& w : workers_)
      if (!w->taken && w->last == device) {
        pick = w.get();
        break;
      }
    if (!pick) {
      workers_.push_back(std::make_unique<PlaceWorker>());
      pick = workers_.back().get();
      std::thread([pick] { pick->loop(); }).detach();
    }
    pick->taken = true;
    pick->last = device;
    return pick;
  }
  void release(PlaceWorker* w) {
    std::lock_guard<std::mutex> lock(mutex_);
    w->taken = false;
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<PlaceWorker>> workers_;
};

}  // namespace

Places::Places(std::vector<torch::Device> devices, Streams streams) : devices_(std::move(devices)) {
  // Note [The allocator's first mapping] in core/device/peers.cpp: before several places allocate at once.
  const auto cuda =
      std::find_if(devices_.begin(), devices_.end(), [](const torch::Device& d) { return d.is_cuda(); });
  if (devices_.size() >= 2 && cuda != devices_.end()) Device::settle_allocator(*cuda);
  for (const torch::Device& device : devices_) {
    streams_.push_back(
        streams == Streams::kOwn && device.is_cuda()
            ? std::optional(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index()))
            : std::nullopt);
    workers_.push_back(Pool::get().acquire(device));
  }
}

Places::~Places() {
  for (PlaceWorker* w : workers_) {
    w->wait();
    Pool::get().release(w);
  }
}

std::vector<std::exception_ptr> Places::run_each(const std::function<void(size_t place)>& work) {
  for (size_t i = 0; i < workers_.size(); ++i)
    workers_[i]->post([this, &work, i] {
      c10::cuda::OptionalCUDAGuard on_device;  // the place's work, and the library's, on its GPU
      std::optional<c10::cuda::CUDAStreamGuard> on_stream;
      if (devices_[i].is_cuda()) on_device.set_device(devices_[i]);
      if (streams_[i]) on_stream.emplace(*streams_[i]);
      work(i);
    });
  std::vector<std::exception_ptr> errors;
  for (PlaceWorker* w : workers_) errors.push_back(w->wait());
  return errors;
}

void Places::run(const std::function<void(size_t place)>& work) {
  for (const std::exception_ptr& e : run_each(work))
    if (e) std::rethrow_exception(e);
}

Task::Task(torch::Device device, std::function<void()> job) : worker_(Pool::get().acquire(device)) {
  worker_->post([device, job = std::move(job)] {
    c10::cuda::OptionalCUDAGuard on_device;
    if (device.is_cuda()) on_device.set_device(device);
    job();
  });
}

Task::~Task() {
  if (!waited_) worker_->wait();
  Pool::get().release(worker_);
}

void Task::get() {
  if (!waited_) error_ = worker_->wait();
  waited_ = true;
  if (error_) std::rethrow_exception(error_);
}

void rethrow_first(const std::vector<torch::Device>& devices, const std::vector<std::exception_ptr>& errors) {
  for (size_t slot = 0; slot < errors.size(); ++slot) {
    if (!errors[slot]) continue;
    try {
      std::rethrow_exception(errors[slot]);
    } catch (const std::exception& e) {
      throw Error(devices[slot].str() + ": " + first_line(e.what()));
    }
  }
}

}  // namespace vaecodec::core
