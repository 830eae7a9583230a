#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>

#include "core/error.h"

namespace vaecodec::core {

// Note [Running out of memory]
// A budget is planned against the memory free when a run starts, but another process on the same GPU may grow
// while the run goes on, and an allocation then fails. The file pipeline (io/pipeline.cpp, with_replans)
// survives that: it drops the run (its output file was never renamed into place), plans again, and starts the
// clip over from its first frame, at most twice; the result is that of a run made with the last plan from the
// start. The new plan is for the memory free now, never more than the budget the user gave (--vram, a
// preset): a budget is a promise, and a run can also run out within it, where its plan's estimate fell short
// (SeedVR2's 4K encode in 7 GiB on an H200 did so; the H200 had 132 GiB free, which the plan then took). So
// the allocator's cap stays at the given budget, and each new plan keeps a larger share of its budget free
// (the margin's complement times 0.8: 15% kept free, then 32%, then 46%). What counts as running out of
// memory: LibTorch's OutOfMemoryError, a CUDA or cuDNN error whose text says it could not allocate, and
// OutOfMemory below.
//
// The same path is exercised without a GPU through a test hook, read once from the environment:
//   VAECODEC_TEST_OOM="call=N[,free=SIZE]"
// makes the N-th model call of the process (1-based; the engine counts every encode and decode call, each
// tile's too) throw OutOfMemory, and from then on makes Device::available_bytes() report SIZE (e.g. 3G) free,
// as if another process held the rest. Each N fails once.

// An allocation that could not be made on a device.
struct OutOfMemory : Error {
  using Error::Error;
};

// Whether `e` is a failure to allocate device (or pinned host) memory.
bool is_out_of_memory(const std::exception& e);

// The engine calls this before every model call: the test hook's failure, when its call has come.
void before_model_call();

// What the test hook says is free once its failure happened; nullopt otherwise.
std::optional<int64_t> injected_free_bytes();

}  // namespace vaecodec::core
