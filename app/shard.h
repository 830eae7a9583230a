#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace vaecodec::app {

// Note [Shards]
// A batch too large for one machine is split over the tasks of a job array - Slurm's `sbatch --array`, or a
// Kubernetes Indexed Job - with no coordinator of our own: every task is given the same inputs and takes its
// part of them by itself.
// - `--shard K/N` takes, from the batch's inputs sorted by path, those at positions K, K+N, K+2N, ...
//   Every task lists the same folders, so every task sees the same sorted list, and the N shards together
//   hold every input exactly once, whatever order the folders were named in. A shard may be empty (more
//   tasks than inputs): it says so and succeeds.
// - `--shard auto` reads K and N where the scheduler puts them: Slurm's SLURM_ARRAY_TASK_ID, counted from
//   SLURM_ARRAY_TASK_MIN in steps of SLURM_ARRAY_TASK_STEP up to SLURM_ARRAY_TASK_MAX (so `--array=1-64` and
//   `--array=0-126:2` work as well as `--array=0-63`), or with SLURM_ARRAY_TASK_COUNT alone; else Kubernetes'
//   JOB_COMPLETION_INDEX with --shard-count N (the Job's `completions`). An array whose ids are not one
//   arithmetic range (`--array=0,5,9`) is refused: its tasks could not tell which inputs are theirs.
// - Outputs appear only by rename once complete (Note [Atomic outputs] in core/atomic_file.h), so an output
//   that exists is finished: `--skip-existing` skips its input, and a re-submitted array, or a task that
//   Slurm requeued, resumes where the last one stopped. A task killed by SIGKILL may leave its hidden
//   temporary file behind, never a partial output. A task stopped by scancel (SIGTERM) removes what it had
//   not committed - the input it was running and, in a batch, the one before it whose writer was still
//   finishing (Note [Batches] in app/batch.h) - and writes no manifest line for them; the next submission
//   runs them.
// - `--manifest FILE.jsonl` (app/record.h) gets one JSON line per input as it ends: ok, failed or skipped.
//   Tasks may share one manifest on a shared file system: each line is one write() on a file opened with
//   O_APPEND, so lines do not interleave. scripts/slurm/vaecodec-failed reads manifests back and prints what
//   failed and the command that retries it.
struct Shard {
  int64_t index = 0;  // K, from 0
  int64_t count = 1;  // N
  std::string text() const { return std::to_string(index) + "/" + std::to_string(count); }
};

// The value of an environment variable; empty when it is not set.
using Environment = std::function<std::string(const char* name)>;
// The process's own environment.
std::string process_environment(const char* name);

// `--shard K/N` or `--shard auto` (with --shard-count, 0 when not given). Throws UsageError, one line naming
// the option or variable, for anything else.
Shard parse_shard(const std::string& text, int64_t shard_count, const Environment& env);

}  // namespace vaecodec::app
