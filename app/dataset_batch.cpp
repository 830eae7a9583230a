#include "app/dataset_batch.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "app/dataset_config.h"
#include "core/error.h"
#include "io/ffmpeg_common.h"
#include "io/musubi_cache.h"
#include "io/musubi_dataset.h"
#include "io/output_file.h"
#include "io/probe.h"

namespace vaecodec::app {
namespace fs = std::filesystem;

namespace {

// One input of a dataset and its control clip or image (empty: none), or why that cannot be found.
struct Input {
  fs::path path;
  fs::path control;
  std::string control_error;
};

std::string join(std::initializer_list<std::string> filters) {
  std::string graph;
  for (const std::string& f : filters)
    if (!f.empty()) graph += (graph.empty() ? "" : ",") + f;
  return graph;
}

std::vector<fs::path> listed(const fs::path& folder, bool images, const std::string& where) {
  std::vector<fs::path> files;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error))
    if (images ? io::is_musubi_image(entry.path()) : io::is_musubi_video(entry.path()))
      files.push_back(entry.path());
  if (error) throw UsageError(where + ": cannot read " + folder.string() + ": " + error.message());
  std::sort(files.begin(), files.end());
  return files;
}

// The control clip of `video` as the trainer finds it: the same file name, else the same stem with one of
// its video extensions (a folder of images with that stem is the trainer's too, but not read here).
void find_control_clip(const fs::path& folder, Input& input) {
  std::error_code error;
  if (fs::exists(folder / input.path.filename(), error)) {
    input.control = folder / input.path.filename();
    return;
  }
  const std::string stem = input.path.stem().string();
  if (fs::is_directory(folder / stem, error)) {
    input.control_error = "its control clip " + (folder / stem).string() +
                          " is a folder of images, which vaecodec does not read as a clip";
    return;
  }
  for (const std::string& ext : io::musubi_video_extensions())
    if (fs::exists(folder / (stem + ext), error)) {
      input.control = folder / (stem + ext);
      return;
    }
  input.control_error = "no control clip named " + stem + ".* in " + folder.string();
}

// Control images as the trainer pairs them: longest image names first, each taking the control images named
// by its stem and '.' or '_', the one without a suffix first, then by the number after the last '_'.
void find_control_images(const fs::path& folder, std::vector<Input>& inputs, const std::string& where) {
  std::vector<fs::path> left = listed(folder, /*images=*/true, where);
  std::vector<Input*> order;
  for (Input& input : inputs) order.push_back(&input);
  std::stable_sort(order.begin(), order.end(), [](const Input* a, const Input* b) {
    return a->path.filename().string().size() > b->path.filename().string().size();
  });
  for (Input* input : order) {
    const std::string stem = input->path.stem().string();
    std::vector<std::pair<int64_t, fs::path>> found;
    std::vector<fs::path> rest;
    for (const fs::path& c : left) {
      const std::string name = c.filename().string();
      if (!name.starts_with(stem + ".") && !name.starts_with(stem + "_")) {
        rest.push_back(c);
        continue;
      }
      const std::string own = c.stem().string();
      const std::string suffix = own.substr(own.rfind('_') + 1);
      const bool digits = !suffix.empty() && std::all_of(suffix.begin(), suffix.end(), ::isdigit);
      if (own != stem && !digits) {
        input->control_error = "the control image " + c.string() + " has no number after its last '_'";
        continue;
      }
      found.push_back({own == stem ? 0 : std::stoll(suffix) + 1, c});
    }
    left = std::move(rest);
    if (!input->control_error.empty()) continue;
    if (found.empty()) {
      input->control_error =
          "no control image named " + stem + ".* or " + stem + "_N.* in " + folder.string();
      continue;
    }
    input->control = std::min_element(found.begin(), found.end())->second;
  }
}

std::vector<Input> read_jsonl(const io::MusubiDataset& d, const std::string& where) {
  std::ifstream in(d.jsonl_file);
  if (!in) throw UsageError(where + ": cannot read " + d.jsonl_file.string());
  std::vector<Input> inputs;
  bool any_control = false;
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw UsageError(d.jsonl_file.string() + ":" + std::to_string(line_number) + ": not JSON (" + e.what() +
                       ")");
    }
    const char* path_key = d.image && !j.contains("image_path") ? "image_path_0"
                           : d.image                            ? "image_path"
                                                                : "video_path";
    const char* control_key = d.image && !j.contains("control_path") ? "control_path_0" : "control_path";
    if (!j.is_object() || !j.contains(path_key) || !j[path_key].is_string())
      throw UsageError(d.jsonl_file.string() + ":" + std::to_string(line_number) + ": no \"" + path_key +
                       "\"");
    Input input{j[path_key].get<std::string>(), {}, {}};
    if (j.contains(control_key) && j[control_key].is_string() && !j[control_key].get<std::string>().empty()) {
      input.control = j[control_key].get<std::string>();
      any_control = true;
    }
    inputs.push_back(std::move(input));
  }
  if (any_control)  // the trainer refuses a file where some lines have a control and others not
    for (Input& input : inputs)
      if (input.control.empty())
        input.control_error = "its line in " + d.jsonl_file.string() + " has no control";
  return inputs;
}

std::vector<Input> dataset_inputs(const io::MusubiDataset& d, const std::string& where) {
  if (d.directory.empty()) return read_jsonl(d, where);
  std::vector<Input> inputs;
  std::error_code error;
  for (const fs::path& file : listed(d.directory, d.image, where)) {
    // An image dataset with captions keeps the images that have one (the trainer's glob_images).
    if (d.image && d.caption_extension &&
        !fs::exists(d.directory / (file.stem().string() + *d.caption_extension), error))
      continue;
    inputs.push_back({file, {}, {}});
  }
  if (!d.control_directory.empty()) {
    if (d.image)
      find_control_images(d.control_directory, inputs, where);
    else
      for (Input& input : inputs) find_control_clip(d.control_directory, input);
  }
  return inputs;
}

io::FrameSize size_of(const io::VideoCount& count) {
  return {count.width, count.height};
}

// The jobs of one input: one per window (one for an image), or one that fails with the reason.
std::vector<io::MusubiJob> input_jobs(const io::MusubiDataset& d, const io::MusubiBuckets& buckets,
                                      const Input& input) {
  io::MusubiJob job;
  job.dataset = d.index;
  job.input = input.path;
  job.item.stem = input.path.stem().string();
  job.item.image = d.image;
  try {
    if (!input.control_error.empty()) throw Error(input.control_error);
    const io::VideoCount clip = io::count_video_frames(input.path);
    job.bucket = buckets.select(size_of(clip));
    if (job.bucket.width < io::kMusubiBucketStep || job.bucket.height < io::kMusubiBucketStep)
      throw Error("its " + std::to_string(clip.width) + "x" + std::to_string(clip.height) +
                  " frames are smaller than musubi-tuner's smallest bucket side, 16 pixels");
    std::optional<io::VideoCount> control;
    if (!input.control.empty()) control = io::count_video_frames(input.control);
    if (d.image) {
      job.item.width = clip.width;  // an image's cache is named by its own size
      job.item.height = clip.height;
      job.item.frames = 1;
      job.graph = io::musubi_resize_filter(size_of(clip), job.bucket);
      if (control) {
        job.control = input.control;
        job.control_graph = io::musubi_resize_filter(size_of(*control), job.bucket);
      }
      return {job};
    }
    const std::optional<int64_t> bound = io::musubi_frame_bound(d);
    const int64_t frames = io::musubi_converted_frames(clip.frames, d.source_fps, bound);
    const std::string drop = io::musubi_fps_filter(d.source_fps, bound);
    const std::string resize = io::musubi_resize_filter(size_of(clip), job.bucket);
    int64_t control_frames = 0;
    io::FrameSize control_bucket;
    if (control) {
      control_frames = io::musubi_converted_frames(control->frames, d.source_fps, bound);
      control_bucket = buckets.select(size_of(*control));
      if (control_frames == 0) throw Error("its control clip " + input.control.string() + " has no frames");
    }
    std::vector<io::MusubiJob> jobs;
    for (const io::MusubiWindow& w : io::musubi_windows(d, frames)) {
      io::MusubiJob window = job;
      window.item.start_frame = w.start;
      window.item.frames = w.frames;
      window.item.width = job.bucket.width;
      window.item.height = job.bucket.height;
      const std::string trim =
          "trim=start_frame=" + std::to_string(w.start) + ":end_frame=" + std::to_string(w.start + w.frames);
      window.graph = join({drop, trim, resize});
      if (control) {
        // A control clip shorter than the window's end is padded with its last frame (the trainer's rule).
        const int64_t missing = w.start + w.frames - control_frames;
        window.control = input.control;
        window.control_graph =
            join({drop, missing > 0 ? "tpad=stop_mode=clone:stop=" + std::to_string(missing) : "", trim,
                  io::musubi_resize_filter(size_of(*control), control_bucket),
                  io::musubi_resize_filter(control_bucket, job.bucket)});
      }
      jobs.push_back(std::move(window));
    }
    return jobs;
  } catch (const std::exception& e) {
    const std::string what = e.what();
    job.error =
        what.find(input.path.string()) != std::string::npos ? what : input.path.string() + ": " + what;
    return {job};
  }
}

}  // namespace

void check_dataset_options(const RunOptions& options) {
  const std::vector<std::pair<bool, const char*>> refused = {
      {!options.filter_graph.empty(), "--vf"},   {!options.start.empty(), "--start"},
      {!options.duration.empty(), "--duration"}, {options.frames != -1, "--frames"},
      {!options.extension.empty(), "--ext"},     {options.latent_scale, "--latent-scale"},
  };
  for (const auto& [given, name] : refused)
    if (given)
      throw UsageError(std::string(name) +
                       " does not go with --dataset-config: the config decides each cache's frames, size and "
                       "name as musubi-tuner does");
}

Batch plan_dataset_batch(const RunOptions& options, const Environment& env) {
  std::optional<Shard> shard;
  if (!options.shard.empty()) shard = parse_shard(options.shard, options.shard_count, env);
  const fs::path config = options.dataset_config;
  if (!fs::is_regular_file(config))
    throw UsageError("--dataset-config " + config.string() + ": no such file");
  const torch::ScalarType dtype = options.latent_dtype == "fp32"   ? torch::kFloat
                                  : options.latent_dtype == "fp16" ? torch::kHalf
                                                                   : torch::kBFloat16;
  Batch batch{true, {}, shard, 0};
  std::map<fs::path, fs::path> writer_of;  // cache file -> the input that makes it
  for (const io::MusubiDataset& d : read_dataset_config(config)) {
    const std::string where = config.string() + ": [[datasets]] " + std::to_string(d.index);
    const io::MusubiBuckets buckets = io::musubi_buckets(d);
    for (const Input& input : dataset_inputs(d, where)) {
      for (io::MusubiJob& job : input_jobs(d, buckets, input)) {
        job.dtype = dtype;
        const fs::path output =
            d.cache_directory / (job.error.empty() ? io::musubi_file_name(job.item) : job.item.stem);
        const auto [it, inserted] = writer_of.emplace(output, input.path);
        if (!inserted && it->second == input.path) continue;  // uniform starts may repeat: one file
        if (!inserted)
          throw UsageError(where + ": " + it->second.string() + " and " + input.path.string() +
                           " would both write " + output.string() + " (the trainer names caches by stem)");
        batch.items.push_back({input.path, output, "", std::make_shared<io::MusubiJob>(std::move(job))});
      }
    }
  }
  // Checked once, here, before a model loads (Note [Batches]): no cache file replaces its clip or the
  // weights.
  for (const BatchItem& item : batch.items) {
    io::check_output_path(item.output, {item.input});
    io::check_output_path(item.output, named_weights(options), "weights file");
  }
  batch.all_items = batch.items.size();
  if (batch.items.empty())
    throw Error("no inputs: the datasets of " + config.string() + " hold no clips or images to cache");
  std::stable_sort(batch.items.begin(), batch.items.end(),
                   [](const BatchItem& a, const BatchItem& b) { return a.output < b.output; });
  if (shard) {  // Note [Shards]: every task sorts the same list
    std::vector<BatchItem> mine;
    for (size_t i = static_cast<size_t>(shard->index); i < batch.items.size();
         i += static_cast<size_t>(shard->count))
      mine.push_back(batch.items[i]);
    batch.items = std::move(mine);
  }
  // One progress line over the files this run writes (with --devices, the batch's own line counts).
  if (options.devices.empty()) {
    std::vector<int64_t> frames;
    std::vector<std::shared_ptr<io::MusubiJob>> counted;
    std::error_code error;
    for (BatchItem& item : batch.items) {
      if (options.skip_existing && fs::is_regular_file(item.output, error)) continue;
      auto job = std::make_shared<io::MusubiJob>(*item.musubi);
      job->progress_index = frames.size();
      frames.push_back(job->item.frames);
      counted.push_back(job);
      item.musubi = job;
    }
    io::ProgressOptions progress;
    progress.quiet = options.quiet || options.json;
    auto shared = std::make_shared<io::MusubiProgress>(std::move(frames), progress);
    for (const std::shared_ptr<io::MusubiJob>& job : counted) job->progress = shared;
  }
  return batch;
}

void list_dataset_batch(const RunOptions& options) {
  io::set_ffmpeg_log_level(AV_LOG_QUIET);
  const Batch batch = plan_dataset_batch(options);
  size_t failing = 0, existing = 0;
  std::set<fs::path> inputs;
  for (const BatchItem& item : batch.items) {
    const io::MusubiJob& job = *item.musubi;
    std::error_code error;
    const bool exists = fs::is_regular_file(item.output, error);
    existing += exists;
    failing += !job.error.empty();
    if (job.error.empty()) inputs.insert(item.input);
    if (options.json) {
      nlohmann::json j = {{"dataset", job.dataset}, {"input", item.input.string()}};
      if (!job.error.empty()) {
        j["error"] = job.error;
      } else {
        j["cache_file"] = item.output.string();
        j["item_key"] = io::musubi_item_key(job.item);
        j["bucket"] = {job.bucket.width, job.bucket.height};
        j["frames"] = job.item.frames;
        j["start"] = job.item.start_frame;
        j["image"] = job.item.image;
        j["vf"] = job.graph;
        if (!job.control.empty()) {
          j["control"] = job.control.string();
          j["control_vf"] = job.control_graph;
        }
        j["exists"] = exists;
      }
      std::cout << j.dump() << "\n";
    } else if (!job.error.empty()) {
      std::cout << "cannot cache " << job.error << "\n";
    } else {
      std::cout << item.output.string() << "  " << io::musubi_item_key(job.item) << "  " << job.bucket.width
                << "x" << job.bucket.height << "  "
                << (job.item.image ? std::string("image")
                                   : "frames " + std::to_string(job.item.start_frame) + "-" +
                                         std::to_string(job.item.start_frame + job.item.frames - 1))
                << "  <- " << item.input.string() << (job.control.empty() ? "" : " + " + job.control.string())
                << (exists ? "  (exists)" : "") << "\n";
    }
  }
  std::cout << std::flush;
  std::cerr << "vaecodec: " << batch.items.size() - failing << " cache files from " << inputs.size()
            << " inputs" << (batch.shard ? " in shard " + batch.shard->text() : "") << ", " << existing
            << " of them present; nothing was run (--dry-run)" << std::endl;
  if (failing > 0) throw Error(std::to_string(failing) + " inputs cannot be cached (listed above)");
}

}  // namespace vaecodec::app
