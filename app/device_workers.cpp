#include "app/device_workers.h"

#include <thread>

#include <c10/cuda/CUDAGuard.h>

#include "core/error.h"
#include "core/error_text.h"

namespace vaecodec::app {

std::vector<std::exception_ptr> run_device_workers(
    const std::vector<torch::Device>& devices, const std::function<void(size_t slot, torch::Device)>& work) {
  std::vector<std::exception_ptr> errors(devices.size());
  std::vector<std::thread> threads;
  threads.reserve(devices.size());
  for (size_t slot = 0; slot < devices.size(); ++slot)
    threads.emplace_back([&, slot] {
      try {
        c10::cuda::OptionalCUDAGuard guard;  // the worker's work, and the library's, on its GPU
        if (devices[slot].is_cuda()) guard.set_device(devices[slot]);
        work(slot, devices[slot]);
      } catch (...) {
        errors[slot] = std::current_exception();
      }
    });
  for (std::thread& thread : threads) thread.join();
  return errors;
}

void rethrow_first(const std::vector<torch::Device>& devices, const std::vector<std::exception_ptr>& errors) {
  for (size_t slot = 0; slot < errors.size(); ++slot) {
    if (!errors[slot]) continue;
    try {
      std::rethrow_exception(errors[slot]);
    } catch (const std::exception& e) {
      throw Error(devices[slot].str() + ": " + core::first_line(e.what()));
    }
  }
}

}  // namespace vaecodec::app
