#pragma once

#include "app/run_options.h"

namespace vaecodec::app {

// Loads the model and runs `command` with SIGINT/SIGTERM handled (Note [Interrupts]): an interrupted run
// removes its temporary output and throws RunInterrupted (app/errors.h) for main(). The run goes through the
// stages of Note [Stages of a run] (app/run_command.cpp): a batch (Note [Batches] in app/batch.h), a
// dataset's (Note [Dataset batches] in app/dataset_batch.h) or one over devices (Note [Batches over devices]
// in app/device_batch.h) alike.
void run_command(RunCommand command, const RunOptions& options);

}  // namespace vaecodec::app
