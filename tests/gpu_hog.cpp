// Holds GPU memory for the tests of a shared GPU (tests/test_memory_faults.cpp): another process, as a
// diffusion model or a game would be. Usage: vaecodec_gpu_hog DEVICE BYTES; prints "held" once the memory is
// allocated and touched, then waits until its standard input closes.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: vaecodec_gpu_hog DEVICE BYTES\n");
    return 2;
  }
  if (cudaSetDevice(std::atoi(argv[1])) != cudaSuccess) return 1;
  const size_t bytes = std::strtoull(argv[2], nullptr, 10);
  void* held = nullptr;
  if (cudaMalloc(&held, bytes) != cudaSuccess || cudaMemset(held, 0, bytes) != cudaSuccess ||
      cudaDeviceSynchronize() != cudaSuccess) {
    std::fprintf(stderr, "vaecodec_gpu_hog: cannot hold %zu bytes\n", bytes);
    return 1;
  }
  std::printf("held\n");
  std::fflush(stdout);
  while (std::getchar() != EOF) {
  }
  cudaFree(held);
  return 0;
}
