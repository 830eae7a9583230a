#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace vaecodec::io {

// Note [musubi-tuner's dataset rules]
// `vaecodec encode --dataset-config dataset.toml` writes the latent caches that kohya-ss/musubi-tuner's
// wan_cache_latents.py writes for the same config, so that its trainer finds every file it looks for. The
// rules below are the trainer's, as its dataset code (src/musubi_tuner/dataset/: config_utils.py,
// image_video_dataset.py, datasources.py, media_utils.py, bucket.py, cache_io.py) has them at commit
// 30c658c (June 2026):
// - Buckets (BucketSelector): with enable_bucket, the candidates are, for w from (sqrt(A)/2 floored to 16)
//   up to sqrt(A) in steps of 16 (A the area of `resolution`, square roots truncated), (w, h) and (h, w) with
//   h = A / w floored to 16, sorted; a frame goes to the first candidate whose aspect ratio is nearest its
//   own. With bucket_no_upscale and a frame no larger than A, the frame's own size floored to 16 instead.
//   Without enable_bucket, `resolution` itself (and bucket_no_upscale is off).
//   Images pick their bucket this way. Video clips are always bucketed by aspect ratio when their latents
//   are cached, whatever enable_bucket and bucket_no_upscale say (the cache step builds its BucketSelector
//   with the defaults; those two keys only group the files again at training time).
// - Resize and crop (resize_image_to_bucket): scaled by s = max(bucket_w / w, bucket_h / h) to
//   (int(w * s + 0.5), int(h * s + 0.5)) - Lanczos when s > 1, area averaging otherwise - then the centre
//   cropped, offsets (scaled - bucket) / 2 floored. vaecodec runs the same steps as FFmpeg filters
//   (musubi_resize_filter), the graph a user could give to --vf.
// - target_frames: made unique, sorted, each rounded down to 1 + 4k, made unique again.
// - frame_extraction, over the clip's frame count N (after the frame-rate conversion):
//   head: (0, T) for each T <= N;  chunk: (i, T) for i = 0, T, 2T, ... while i + T <= N;
//   slide: (i, T) for i = 0, frame_stride, ... while i + T <= N;  uniform: frame_sample starts
//   numpy.linspace(0, N - T, frame_sample) truncated to integers, for each T <= N (frame_sample = 1 makes it
//   head); full: one window (0, min(N, max_frames) rounded down to 1 + 4k). In head mode only the first
//   max(target_frames) frames are read at all (the bound counts converted frames).
// - source_fps: frames are dropped to reach Wan's 16 fps with a running sum: frame i gets the index
//   int(a_i), a_0 = 0, a_{i+1} = a_i + 16 / source_fps (added up in doubles), and is dropped when its index
//   equals the previous kept frame's. The clip's real frame rate is not looked at; without source_fps no
//   frame is dropped. musubi_fps_filter is FFmpeg's select filter doing the same sums.
// - Names: a clip's item key is "{stem}_{start:05d}-{frames:03d}"; its cache is
//   "{key}_{W:04d}x{H:04d}_wan.safetensors" with W x H its bucket. An image's cache is
//   "{stem}_{W:04d}x{H:04d}_wan.safetensors" with W x H the image's own size (not the bucket's), one frame,
//   and no frame_count in its metadata.
// - Control clips (control_directory: the same file name, else the same stem with any video extension):
//   read with the same window bounds and frame-rate conversion, resized to their own bucket and then to the
//   clip's, cut or padded with their last frame to the clip's frame count; their latents go into the same
//   file as "latents_control_{F}x{H}x{W}_{dtype}". Control images (same stem followed by '.' or '_', the
//   one without a suffix first, then by the number after '_') are resized to the image's bucket.
// - Inputs: a directory's files with the trainer's video (or image) extensions, sorted; no subfolders. An
//   image dataset with caption_extension keeps only the images that have a caption file. JSONL files give
//   video_path (control_path) or image_path (control_path, control_path_0) per line. cache_directory
//   defaults to the video or image directory and must differ between datasets.
// The trainer's caching also deletes the cache files in cache_directory that the dataset no longer makes;
// vaecodec deletes nothing.

constexpr int64_t kMusubiBucketStep = 16;
constexpr double kMusubiWanFps = 16.0;

struct FrameSize {
  int64_t width = 0;
  int64_t height = 0;
  bool operator==(const FrameSize&) const = default;
};

// One [[datasets]] entry of the config, with [general]'s values and the trainer's defaults filled in.
struct MusubiDataset {
  int index = 0;                     // in the config, from 0
  bool image = false;                // an image dataset (image_directory or image_jsonl_file)
  std::filesystem::path directory;   // video_directory or image_directory; empty: a JSONL file
  std::filesystem::path jsonl_file;  // video_jsonl_file or image_jsonl_file
  std::filesystem::path control_directory;
  std::filesystem::path cache_directory;
  FrameSize resolution{960, 544};
  bool enable_bucket = false;
  bool bucket_no_upscale = false;
  std::optional<std::string> caption_extension;
  std::vector<int64_t> target_frames{1};  // as written; musubi_target_frames rounds them
  std::string frame_extraction = "head";
  int64_t frame_stride = 1;
  int64_t frame_sample = 1;
  int64_t max_frames = 129;
  std::optional<double> source_fps;
};

// The trainer's bucket choice (Note [musubi-tuner's dataset rules]).
class MusubiBuckets {
 public:
  MusubiBuckets(FrameSize resolution, bool enable_bucket, bool no_upscale);
  FrameSize select(FrameSize frame) const;
  const std::vector<FrameSize>& candidates() const { return buckets_; }

 private:
  FrameSize resolution_;
  bool no_upscale_;
  std::vector<FrameSize> buckets_;
};

// The buckets a dataset's clips (or images) are cached in.
MusubiBuckets musubi_buckets(const MusubiDataset& dataset);

// The filters that resize and centre-crop `from` to `bucket` as the trainer does; empty when equal.
std::string musubi_resize_filter(FrameSize from, FrameSize bucket);

// target_frames as the trainer uses them: unique, sorted, each rounded down to 1 + 4k.
std::vector<int64_t> musubi_target_frames(const std::vector<int64_t>& written);

// The extraction mode the trainer runs ("uniform" with frame_sample 1 is "head").
std::string musubi_extraction(const MusubiDataset& dataset);
// The bound on converted frames read at all: max(target_frames) in head mode, none otherwise.
std::optional<int64_t> musubi_frame_bound(const MusubiDataset& dataset);

// The frames a clip of `decoded` frames gives after the frame-rate conversion and the bound.
int64_t musubi_converted_frames(int64_t decoded, std::optional<double> source_fps,
                                std::optional<int64_t> bound);
// The select filter that keeps those frames; empty without source_fps and bound.
std::string musubi_fps_filter(std::optional<double> source_fps, std::optional<int64_t> bound);

struct MusubiWindow {
  int64_t start = 0;
  int64_t frames = 0;
};
// The windows of a clip with `frames` frames (after conversion), in the trainer's order.
std::vector<MusubiWindow> musubi_windows(const MusubiDataset& dataset, int64_t frames);

// The file extensions the trainer takes for videos and images (media_utils.py), in its order.
const std::vector<std::string>& musubi_video_extensions();
bool is_musubi_video(const std::filesystem::path& path);
bool is_musubi_image(const std::filesystem::path& path);

}  // namespace vaecodec::io
