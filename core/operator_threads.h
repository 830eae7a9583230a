#pragma once

namespace vaecodec::core {

// Note [Operator threads of a helper thread]
// Every thread that calls a LibTorch operator on the CPU runs it on a team of OpenMP threads of its own, as
// large as the host unless that thread was told otherwise (OpenMP's count is a per-thread setting). On a CPU
// run the model's team holds every core already, and a reader or a writer whose colour conversions start
// teams of their own puts more OpenMP threads on the host than it has cores. libgomp then stops letting
// waiting threads spin (GOMP_SPINCOUNT in its manual: 300,000 spins, but 100 while there are more OpenMP
// threads than CPUs), so the model's team sleeps between parallel regions and every region wakes it through
// the kernel. Measured on two cores: a CPU round trip of 320x240 x49 took 15.3 s with the helpers' teams and
// 13.9 s with their operators on their own thread (docs/benchmarks.md, "The CPU round trip: the helper
// threads' OpenMP teams"). So a CPU run's reading and writing threads run their operators on one thread, and
// a batch over GPUs gives them their share of the cores (Note [Host threads of a batch over devices] in
// io/pipeline.h). at::set_num_threads is not the tool for a helper thread: besides OpenMP's per-thread count
// it resizes LibTorch's process-wide thread pool and clears oneDNN's primitive cache, so called from a writer
// it changes the model's own run (set to one thread there, the same round trip took 23.6 s).

// This thread's LibTorch CPU operators run on `threads` threads from now on; 0 leaves LibTorch's choice.
// Where LibTorch's operators do not run on OpenMP (operator_threads_settable() false) it does nothing.
void set_operator_threads(int threads);
bool operator_threads_settable();

}  // namespace vaecodec::core
