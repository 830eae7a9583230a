#pragma once

#include "app/batch.h"
#include "app/run_options.h"
#include "app/shard.h"

namespace vaecodec::app {

// Note [Dataset batches]
// `encode --dataset-config dataset.toml` is a batch (Note [Batches]) whose items are the cache files that
// musubi-tuner's caching makes for the config (Note [musubi-tuner's dataset rules] in io/musubi_dataset.h):
// one BatchItem per file, its input the clip (or image), its output the file in the dataset's
// cache_directory, and its job (BatchItem::musubi) the filter graph of its window. Planning reads each
// input's header and counts its packets (no frame is decoded) to know its size and length, so every name is
// known before a model loads: --dry-run lists them, --skip-existing skips the files that exist (they appear
// whole or not at all), --shard takes every N-th of the files sorted by path, --devices hands them to the
// GPUs, and --manifest records each. An input that cannot be read, or whose control clip is missing, is one
// item that fails when its turn comes; the others are written. One progress line counts the frames of every
// file to write (with --devices, the batch's own line does).
Batch plan_dataset_batch(const RunOptions& options, const Environment& env = process_environment);

// encode --dataset-config refuses the options the config decides (--vf, cuts, --ext, ...) before anything
// else; then it lists the plan (--dry-run, list_dataset_batch) or runs it as a batch (app/run_command.h).
void check_dataset_options(const RunOptions& options);
// --dry-run: one line per cache file (a JSON object with --json), nothing run.
void list_dataset_batch(const RunOptions& options);

}  // namespace vaecodec::app
