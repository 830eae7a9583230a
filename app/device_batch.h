#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "app/batch.h"
#include "app/record.h"
#include "io/probe.h"

namespace vaecodec::app {

// Note [Batches over devices]
// With --devices a batch (Note [Batches]) runs on several GPUs of one host in one process, with no scheduler
// but a queue:
// - The weights are read once; one model is built on each device, and each device gets a worker thread
//   (Note [Places] in core/split/places.h) that runs the one-device pipeline there (its own reader,
//   model thread and writer; a clip's writer finishing while the device's next clip starts), so the devices
//   never wait on one another.
// - The inputs wait in one queue, longest first (frames as the header says, io::probe_length; then seconds;
//   ties in path order), and a worker takes the next one whenever its device is free: the long clips start
//   first and the short ones fill the ends, which keeps the devices' finishing times close.
// - A worker runs exactly what a run of the same file on that device alone runs (same options, same plan
//   from the same budget: the memory free on its device), so the output is that run's: bit for bit where
//   the kernels are deterministic (the CPU, tested; GPUs with --autotune off, the default: cuDNN's
//   heuristics choose the same algorithms for the same shapes, where its timing could differ run to run).
// - Outcomes are reported as they come, not in input order: each --json line and manifest record names its
//   device; a failed input gets its error line and the others go on; the exit status is that of a one-device
//   batch (1 when any failed). The runs' own progress and plan lines are left out (several at once would
//   garble each other): one progress line counts the frames of the whole batch, and error lines are printed
//   above it. A device whose model cannot be built is reported and left out; only when none can is the batch
//   failed.
// - SIGINT/SIGTERM: every worker sees the flag (Note [Interrupts]), drops its temporary outputs and stops
//   taking inputs; the command names what was not written and exits as Note [Interrupts] says (130 for
//   Ctrl-C). --shard and --skip-existing decide the inputs before this runs, as for one device.
// The scheduler takes a list of devices, so a test runs it with two workers that are both the CPU.

// The host threads each run of a batch over `devices` devices gives its decoder and its reading and writing
// threads' LibTorch work (io::PipelineOptions::host_threads): `threads` (--threads) when it is 0 or more,
// else the host's cores divided among two or more devices (at least 2), 0 for one (Note [Host threads of a
// batch over devices] in io/pipeline.h).
int host_threads(int threads, size_t devices);

// The order in which a batch over devices takes `items` (indices into it): longest first by `lengths`
// (frames, then seconds; unknown lengths last), ties in path order.
std::vector<size_t> longest_first(const std::vector<BatchItem>& items,
                                  const std::vector<io::InputLength>& lengths);

// The device (index into a list of `devices`) each input would run on if its time were proportional to its
// frames: in `order` (longest_first's), each input to the device that is free first, ties to the lower index.
// What `plan --devices` shows; the batch itself goes by the devices' real finishing times.
std::vector<size_t> predict_split(const std::vector<size_t>& order,
                                  const std::vector<io::InputLength>& lengths, size_t devices);

// What run_on_devices did.
struct DeviceBatchResult {
  struct Taken {
    std::filesystem::path input;
    std::string device;
    size_t worker = 0;  // the index of its device in the list given
  };
  std::vector<Taken> taken;                      // every input run, in the order the workers took them
  size_t failed = 0;                             // inputs that failed
  bool interrupted = false;                      // stopped by SIGINT/SIGTERM
  std::vector<std::filesystem::path> unwritten;  // interrupted: the outputs that were being made
};

// Runs `command` over `items` with one model and one worker per entry of `devices`
// (Note [Batches over devices]); every outcome goes to `log`. Failures of single inputs are counted, not
// thrown. Throws for what stops the batch as a whole: weights that cannot be read, a model that builds on no
// device, a manifest that cannot be written. The same device listed twice gets two workers (tests run two on
// the CPU); the CLI refuses it (Note [Several devices]).
DeviceBatchResult run_on_devices(RunCommand command, const RunOptions& options,
                                 const std::vector<BatchItem>& items,
                                 const std::vector<torch::Device>& devices, RecordLog& log);

}  // namespace vaecodec::app
