#pragma once

#include <array>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <thread>

#include <torch/torch.h>

#include "core/device/device.h"
#include "io/bounded_queue.h"
#include "io/ffmpeg_common.h"
#include "io/metrics.h"
#include "io/progress.h"
#include "io/video_reader.h"
#include "io/video_writer.h"

namespace vaecodec::io {

// Note [Pipeline]
//   reader thread  --frames-->  model (calling thread)  --frames-->  writer thread
//   demux, decode, RGB          pad, encode, decode, crop           YUV, encode, mux
//        \------------------------- audio packets ---------------------------/
// Stages talk only through queues. The frame queues are bounded (about one chunk each), so memory does not
// grow with the video's length: a fast reader waits for the model, the model waits for a slow encoder. The
// audio queue is not bounded, and needs not be: the reader is never more than the two frame queues and one
// chunk ahead of the writer, and audio for that stretch is small. (Bounding it could deadlock: the reader
// would wait on audio while the writer waits on video.)
// A stage that fails keeps its exception and cancels its queues; the next stage to touch a queue sees that
// and rethrows it on its own thread, so the error reaches the caller once, as the first cause. Destroying a
// stage cancels and joins it, so an exception anywhere unwinds without a hang.

using PacketQueue = BoundedQueue<PacketPtr>;

// Where a stage's thread spent its time, and how long the model's thread waited for it (seconds), for the
// run summary: the slowest stage is the one the model waits on.
struct StageTimes {
  double busy = 0;     // the stage's own work (decoding and converting; converting, encoding and muxing)
  double waited = 0;   // the model's thread blocked on this stage's queue
  double for_gpu = 0;  // writer: blocked on the model's downloads
  double tail = 0;     // writer: from the last frame handed over to the file finished (queue, encoder delay)
};

// Runs a VideoReader on a thread of its own.
class ReaderStage {
 public:
  // operator_threads: the thread's LibTorch CPU operators' threads (Note [Operator threads of a helper
  // thread] in core/operator_threads.h); 0: LibTorch's choice.
  ReaderStage(VideoReader& reader, size_t capacity, PacketQueue* audio, int operator_threads);
  ~ReaderStage();
  ReaderStage(const ReaderStage&) = delete;
  ReaderStage& operator=(const ReaderStage&) = delete;
  // The next frame; nullopt at the end of the video. Rethrows what the reader thread threw.
  std::optional<VideoFrame> next();
  // Complete once next() has returned nullopt.
  const StageTimes& times() const { return times_; }

 private:
  void run();
  StageTimes times_;
  VideoReader& reader_;
  int operator_threads_;
  BoundedQueue<VideoFrame> frames_;
  PacketQueue* audio_;
  std::exception_ptr error_;
  std::thread thread_;
};

// One frame on its way to the writer.
struct OutputFrame {
  core::HostTensor chunk;  // the download the frame is part of: wait for it before reading `rgb` or `planes`
  torch::Tensor rgb;       // [3, H, W] float, a view into chunk.tensor; undefined when `planes` are given
  std::array<torch::Tensor, 3>
      planes;  // the frame converted (TensorToFrame::quantize), views into chunk.tensor
  int64_t pts = 0;
  int64_t duration = 0;
  torch::Tensor reference;  // the input frame [3, H, W] in [-1, 1] (metrics, side by side); undefined: none
};

// Note [Side by side]
// `roundtrip --side-by-side F` writes a second video beside the output, each frame three times as wide: the
// input, the reconstruction, and their difference amplified four times (|reconstruction - input| per
// channel, x4, clipped: black where the VAE kept the pixel, bright where it lost detail), as the demo draws
// it with ffmpeg's blend and lutrgb filters. It has the output's timing, colour tags and codec, no audio, and
// is written through its own temporary file, committed with the output. [3, H, W] input and reconstruction in
// [-1, 1] -> [3, H, 3W] in [-1, 1].
torch::Tensor side_by_side_frame(const torch::Tensor& input, const torch::Tensor& reconstruction);

// Runs a VideoWriter on a thread of its own; also measures quality and reports progress when given those.
class WriterStage {
 public:
  // `side_by_side`: a second writer for Note [Side by side] (frames must carry their reference); null: none.
  // operator_threads: as ReaderStage's.
  WriterStage(VideoWriter& writer, size_t capacity, PacketQueue* audio, QualityMeter* meter,
              Progress* progress, int operator_threads, VideoWriter* side_by_side = nullptr);
  ~WriterStage();
  WriterStage(const WriterStage&) = delete;
  WriterStage& operator=(const WriterStage&) = delete;
  // Rethrows what the writer thread threw.
  void push(OutputFrame frame);
  // Every frame is handed over: the writer drains its queue and finishes the file on its own thread.
  void close();
  // close(), then waits until every frame is written and the file finished; rethrows what the writer thread
  // threw.
  void finish();
  // Complete once finish() has returned.
  const StageTimes& times() const { return times_; }
  // When the writer finished the file; valid once finish() has returned.
  std::chrono::steady_clock::time_point finished_at() const { return finished_at_; }

 private:
  StageTimes times_;
  std::chrono::steady_clock::time_point closed_at_, finished_at_;
  void run();
  void drain_audio();
  void rethrow();
  VideoWriter& writer_;
  int operator_threads_;
  BoundedQueue<OutputFrame> frames_;
  PacketQueue* audio_;
  QualityMeter* meter_;
  Progress* progress_;
  VideoWriter* side_by_side_;
  std::atomic<bool> finishing_{false};
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace vaecodec::io
