#pragma once

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <ATen/cuda/CUDAContext.h>
#include <torch/cuda.h>
#include <catch2/catch.hpp>

#include "app/devices.h"
#include "core/kernels/conv3d.h"

namespace vaecodec::test {

// Note [Tests that cannot run here]
// A test that needs what a machine may lack must not pass where it could not run. Its tag says what it needs:
// [gpu] a CUDA device, [hopper] besides a Hopper GPU and a build with the own kernels, [multi-gpu] several
// CUDA devices (Note [Tests on several GPUs]). Its first line asks cuda_here(), hopper_here() or
// gpu_counts_here(), which call not_run_here(why) where it cannot run. CTest discovers the tests of each tag
// under their own labels (gpu; gpu and hopper; gpu and multi-gpu: tests/CMakeLists.txt) with
// VAECODEC_SKIP_EXIT_CODE set to their SKIP_RETURN_CODE, so the process prints "not run: WHY" and ends with
// that code, and CTest reports the test as "Skipped" and lists it under "The following tests did not run"
// instead of counting a pass. Catch 2 has no skip of its own, hence the exit code. Run by Catch directly
// (vaecodec_tests "[gpu]"), such a test fails, naming what it needs: leave it out there with ~[hopper] or
// ~[multi-gpu], as scripts/gpu_check/speed.sh does where the machine lacks them, naming what it left out.
inline void not_run_here(const std::string& why) {
  if (const char* code = std::getenv("VAECODEC_SKIP_EXIT_CODE")) {
    std::cout << "not run: " << why << std::endl;
    std::_Exit(std::atoi(code));
  }
  FAIL("not run: "
       << why << " (Note [Tests that cannot run here]: leave it out with ~[gpu], ~[hopper] or ~[multi-gpu])");
}

// A [gpu] test's first line: false, the test reported as not run, where there is no CUDA device.
inline bool cuda_here() {
  if (torch::cuda::is_available()) return true;
  not_run_here("needs a CUDA device; there is none here");
  return false;
}

// Whether the first CUDA device runs the own Hopper kernels in this build.
inline bool hopper_kernels_here() {
  if (!torch::cuda::is_available()) return false;
  const auto* props = at::cuda::getDeviceProperties(0);
  return core::kernels::own_kernels_run_on(props->major, props->minor);
}

// A [hopper] test's first line: false, the test reported as not run, where the GPU or the build has no own
// kernels.
inline bool hopper_here() {
  if (hopper_kernels_here()) return true;
  not_run_here(torch::cuda::is_available()
                   ? "needs a Hopper GPU (compute capability 9.0) and a build with the "
                     "own kernels (CUDA_ARCHS 90)"
                   : "needs a Hopper GPU; there is no CUDA device");
  return false;
}

// --gpus N of the test program (tests/main.cpp); 0 where it was not given.
int64_t gpus_asked();

// Note [Tests on several GPUs]
// A [multi-gpu] test runs once for each number of GPUs it is given, on the first that many devices: it loops
// over gpu_counts_here(). CTest holds one entry per count - "multi-gpu: NAME (2 GPUs)", "(3 GPUs)", "(4
// GPUs)" (tests/CMakeLists.txt) - each running the program with --gpus N, so a machine of 2 GPUs runs the
// first and reports the others as not run: it never passes a run on 4 GPUs that it could not make. Run by
// Catch directly without --gpus, the test runs on 2, 3, ... up to every visible device in turn, which is how
// the tests phase of scripts/gpu_check.sh covers 2, 3 and 4 GPUs on a 4-GPU machine in one process. Fewer
// than 2 visible (or than --gpus): not run.
inline std::vector<int64_t> gpu_counts_here() {
  const int64_t gpus = torch::cuda::is_available() ? app::visible_cuda_devices() : 0;
  const int64_t asked = gpus_asked();
  if (asked == 1 || asked < 0) FAIL("--gpus " << asked << ": a [multi-gpu] test runs on 2 GPUs or more");
  const int64_t least = asked ? asked : 2;
  if (gpus < least) {
    not_run_here("needs " + std::to_string(least) + " CUDA devices; " + std::to_string(gpus) +
                 " visible here");
    return {};
  }
  std::vector<int64_t> counts;
  for (int64_t n = least; n <= (asked ? asked : gpus); ++n) counts.push_back(n);
  return counts;
}

// The first n CUDA devices.
inline std::vector<torch::Device> first_gpus(int64_t n) {
  std::vector<torch::Device> devices;
  for (int64_t i = 0; i < n; ++i) devices.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(i));
  return devices;
}

// The first n CUDA devices as --devices takes them: "0,1,2".
inline std::string device_numbers(int64_t n) {
  std::string text;
  for (int64_t i = 0; i < n; ++i) text += (i ? "," : "") + std::to_string(i);
  return text;
}

}  // namespace vaecodec::test
