#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/vae_model.h"
#include "io/musubi_cache.h"
#include "io/musubi_dataset.h"
#include "io/pipeline.h"
#include "io/progress.h"

namespace vaecodec::io {

// The progress of a whole dataset's caches (Note [musubi-tuner's dataset rules]): one line counting the
// frames of every item to write, whichever item they belong to, thread-safe. Finishes once every item has
// finished, written or failed.
class MusubiProgress {
 public:
  MusubiProgress(std::vector<int64_t> item_frames, ProgressOptions options);
  void frames(size_t item, int64_t done);  // frames done so far in `item`
  void finished(size_t item);              // `item` is over: its frames count as done

 private:
  void credit(size_t item, int64_t done);

  std::mutex mutex_;
  std::vector<int64_t> item_frames_;
  std::vector<int64_t> credited_;
  int64_t done_ = 0;
  size_t finished_ = 0;
  Progress progress_;
};

// One cache file of a dataset: what to read, through which filters, and how the file is named.
struct MusubiJob {
  int dataset = 0;              // its [[datasets]] entry, from 0
  std::filesystem::path input;  // the clip or image
  // The --vf graph that gives the window's frames at the bucket size (frame-rate drops, the window's trim,
  // resize and crop), and the same for the control clip (with its padding); a user may run either by hand.
  std::string graph;
  std::filesystem::path control;  // empty: no control clip
  std::string control_graph;
  MusubiItem item;  // the name and metadata; item.frames is the window's length (1 for an image)
  FrameSize bucket;
  torch::ScalarType dtype = torch::kBFloat16;
  // Set when planning found the input unusable (it cannot be read, its control clip is missing): the item
  // fails with this message when its turn comes, as any other failed input of a batch.
  std::string error;
  std::shared_ptr<MusubiProgress> progress;  // null: the runs' own progress lines (or none)
  size_t progress_index = 0;
};

// Encodes the job's frames (and its control clip's) with `model` and writes the cache file `output`
// (its name is musubi_file_name(job.item)); checks that the window held the frames planned.
RunSummary encode_musubi_job(core::VaeModel& model, const MusubiJob& job, const std::filesystem::path& output,
                             const PipelineOptions& options);

}  // namespace vaecodec::io
