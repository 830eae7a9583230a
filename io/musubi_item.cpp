#include "io/musubi_item.h"

#include <chrono>

#include "core/atomic_file.h"
#include "core/error.h"

namespace vaecodec::io {
namespace fs = std::filesystem;

MusubiProgress::MusubiProgress(std::vector<int64_t> item_frames, ProgressOptions options)
    : item_frames_(std::move(item_frames)),
      credited_(item_frames_.size(), 0),
      progress_(
          "musubi cache",
          [&] {
            int64_t total = 0;
            for (const int64_t f : item_frames_) total += f;
            return total;
          }(),
          options) {}

void MusubiProgress::credit(size_t item, int64_t done) {
  done = std::min(done, item_frames_.at(item));
  done_ += done - credited_[item];
  credited_[item] = done;
}

void MusubiProgress::frames(size_t item, int64_t done) {
  std::lock_guard<std::mutex> lock(mutex_);
  credit(item, done);
  progress_.update(done_);
}

void MusubiProgress::finished(size_t item) {
  std::lock_guard<std::mutex> lock(mutex_);
  credit(item, item_frames_.at(item));
  progress_.update(done_);
  if (++finished_ == item_frames_.size()) progress_.finish();
}

namespace {

// The item's frames, checked against the plan: a clip whose header promised more frames than it decodes
// (or a control clip that cannot be read) fails here, alone.
EncodedVideo encode_window(core::VaeModel& model, const fs::path& input, const std::string& graph,
                           const MusubiJob& job, PipelineOptions options) {
  options.source = SourceOptions{};
  options.source.filter_graph = graph;
  options.source.max_frames = job.item.frames;  // the reader stops at the window's end
  EncodedVideo v = encode_video(model, input, options);
  if (v.summary.frames != job.item.frames)
    throw Error(input.string() + ": the window of " + std::to_string(job.item.frames) +
                " frames from frame " + std::to_string(job.item.start_frame) + " gave " +
                std::to_string(v.summary.frames) +
                " (the clip decodes to fewer frames than its container lists)");
  if (v.summary.width != job.bucket.width || v.summary.height != job.bucket.height)
    throw Error(input.string() + ": the filters gave " + std::to_string(v.summary.width) + "x" +
                std::to_string(v.summary.height) + " frames, not the bucket's " +
                std::to_string(job.bucket.width) + "x" + std::to_string(job.bucket.height));
  return v;
}

}  // namespace

RunSummary encode_musubi_job(core::VaeModel& model, const MusubiJob& job, const fs::path& output,
                             const PipelineOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  struct Finished {  // the dataset's progress moves past this item however it ends
    const MusubiJob& job;
    ~Finished() {
      if (job.progress) job.progress->finished(job.progress_index);
    }
  } finished{job};
  if (!job.error.empty()) throw Error(job.error);
  check_musubi_model(model.info());
  PipelineOptions run = options;
  if (job.progress) {
    run.quiet = true;
    run.frames_done = [&job, outer = options.frames_done](int64_t done) {
      if (outer) outer(done);
      job.progress->frames(job.progress_index, done);
    };
  }
  EncodedVideo v = encode_window(model, job.input, job.graph, job, run);
  torch::Tensor control;
  if (!job.control.empty()) {
    run.frames_done = options.frames_done;
    control = encode_window(model, job.control, job.control_graph, job, run).latents;
  }
  std::error_code error;
  fs::create_directories(output.parent_path(), error);
  if (error)
    throw Error("cannot create cache directory " + output.parent_path().string() + ": " + error.message());
  core::AtomicFile file(output);
  write_musubi_cache(file, v.latents, job.item, v.meta, job.dtype, control);
  file.commit();
  RunSummary summary = std::move(v.summary);
  summary.output = output;
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace vaecodec::io
