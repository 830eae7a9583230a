#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <vector>

#include <torch/torch.h>

namespace vaecodec::app {

// Note [Device workers]
// The threads of everything that runs on several devices of one process at once - a batch over devices
// (Note [Batches over devices] in app/device_batch.h) and `bench --devices` (Note [Benchmark over devices]
// in app/bench_devices.cpp): one thread per entry of the list, its device current (LibTorch's and CUDA's)
// for all it runs, started together and joined before the call returns. What a worker throws is kept as
// its outcome: one device's failure never ends another's work, and the caller decides what a failure means
// (the batch counts inputs, bench names the device).

// Runs work(slot, device) for every entry of `devices` on threads of its own; returns each one's exception
// (null where it returned), by slot.
std::vector<std::exception_ptr> run_device_workers(
    const std::vector<torch::Device>& devices, const std::function<void(size_t slot, torch::Device)>& work);

// Throws the first of `errors` (as run_device_workers returns them), its message led by its device's name.
void rethrow_first(const std::vector<torch::Device>& devices, const std::vector<std::exception_ptr>& errors);

}  // namespace vaecodec::app
