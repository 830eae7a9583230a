#pragma once

#include <optional>
#include <vector>

#include "core/place.h"
#include "core/plan_for.h"
#include "core/vae_model.h"
#include "io/chunking.h"

// Planning a file run's memory (core/planner.h) once its input is open and the frame size known: the budget
// settled against what the device has free, the plan of one device or of the bands of a split across N
// (Note [Planning bands]), the allocator capped at the budget, and the report of the measured peak.

namespace vaecodec::io {

// What a file run asks of its memory plan (PipelineOptions' part of it).
struct RunPlanOptions {
  std::optional<core::PlannerOptions> memory;  // nullopt: no planning, `chunk` latent frames untiled
  std::vector<core::BandPlace> bands;          // two or more: one clip split across their devices
  int64_t chunk = 1;
  bool quiet = false;         // no plan line
  int64_t latent_frames = 0;  // the clip's length where known (exact tiles' windows), else 0
  // The threads of the video encoder (decode, roundtrip) and decoder (encode, roundtrip); 0: the codecs' own
  // choice. They size what the run's reader and writer hold in host memory (Note [A file run's host memory]).
  int encoder_threads = 0;
  int decoder_threads = 0;
  // The output video keeps 8 bits of each colour at most (PlannerOptions::output_8bit).
  bool output_8bit = false;
  // The input's frames come as planes of these bytes a pixel (PlannerOptions::input_packed_bytes); 0: none.
  double input_packed_bytes = 0;
  // Where given, gets the request planned (one device's, or one band's): the caller's, for the message of a
  // run that keeps running out of memory once the failed attempt's state is gone.
  std::optional<core::PlanRequest>* planned = nullptr;
};

// The chunk and tiles of a run: planned when options.memory asks (options.bands: one plan for every band),
// else options.chunk untiled. The plan line goes to stderr unless quiet. Throws Error when nothing fits,
// with the smallest budget that would.
core::Plan plan_memory(core::VaeModel& model, core::Op op, const Geometry& geometry,
                       const RunPlanOptions& options);

// Host memory a file run's reader, writer and video encoder hold beside the model's run, for frames of
// `geometry` (Note [A file run's host memory]).
int64_t pipeline_host_bytes(core::Op op, const Geometry& geometry, const RunPlanOptions& options);

// On a GPU, tells how the measured peak compares with the plan's estimate (unless quiet).
void report_memory(core::VaeModel& model, const core::Plan& plan, const RunPlanOptions& options);

}  // namespace vaecodec::io
