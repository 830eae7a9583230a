#include "io/stages.h"

#include "core/error.h"
#include "core/operator_threads.h"

#include <chrono>

namespace vaecodec::io {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

ReaderStage::ReaderStage(VideoReader& reader, size_t capacity, PacketQueue* audio, int operator_threads)
    : reader_(reader), operator_threads_(operator_threads), frames_(capacity), audio_(audio) {
  if (audio_) reader_.set_audio_sink([this](PacketPtr packet) { audio_->push(std::move(packet)); });
  thread_ = std::thread([this] { run(); });
}

ReaderStage::~ReaderStage() {
  frames_.cancel();
  if (thread_.joinable()) thread_.join();
}

void ReaderStage::run() {
  core::set_operator_threads(operator_threads_);
  try {
    VideoFrame frame;
    for (;;) {
      const auto start = Clock::now();
      const bool more = reader_.next(frame);
      times_.busy += since(start);
      if (!more) break;
      if (!frames_.push(std::move(frame))) return;
    }
  } catch (...) {
    error_ = std::current_exception();
  }
  frames_.close();
}

std::optional<VideoFrame> ReaderStage::next() {
  const auto start = Clock::now();
  std::optional<VideoFrame> frame = frames_.pop();
  times_.waited += since(start);
  if (!frame) {
    if (thread_.joinable()) thread_.join();
    if (error_) std::rethrow_exception(error_);
  }
  return frame;
}

torch::Tensor side_by_side_frame(const torch::Tensor& input, const torch::Tensor& reconstruction) {
  const torch::Tensor a = input.clamp(-1.0, 1.0), b = reconstruction.to(input.scalar_type()).clamp(-1.0, 1.0);
  // |b - a| is twice the difference in [0, 1] units: x4 there is x2 here, clipped at white, then back to
  // [-1, 1].
  const torch::Tensor difference = ((b - a).abs() * 2.0).clamp_max(1.0) * 2.0 - 1.0;
  return torch::cat({a, b, difference}, /*dim=*/2);
}

WriterStage::WriterStage(VideoWriter& writer, size_t capacity, PacketQueue* audio, QualityMeter* meter,
                         Progress* progress, int operator_threads, VideoWriter* side_by_side)
    : writer_(writer),
      operator_threads_(operator_threads),
      frames_(capacity),
      audio_(audio),
      meter_(meter),
      progress_(progress),
      side_by_side_(side_by_side) {
  thread_ = std::thread([this] { run(); });
}

WriterStage::~WriterStage() {
  frames_.cancel();
  if (thread_.joinable()) thread_.join();
}

void WriterStage::drain_audio() {
  if (!audio_) return;
  while (std::optional<PacketPtr> packet = audio_->try_pop()) writer_.write_audio(std::move(*packet));
}

void WriterStage::run() {
  core::set_operator_threads(operator_threads_);
  try {
    while (std::optional<OutputFrame> frame = frames_.pop()) {
      auto start = Clock::now();
      frame->chunk.wait();
      times_.for_gpu += since(start);
      start = Clock::now();
      drain_audio();
      if (frame->planes[0].defined())
        writer_.write_planes(frame->planes, frame->pts, frame->duration);
      else
        writer_.write(frame->rgb, frame->pts, frame->duration);
      if (meter_ && frame->reference.defined())
        meter_->add(frame->reference.clamp(-1.0, 1.0).add_(1.0).mul_(0.5),
                    frame->rgb.clamp(-1.0, 1.0).add_(1.0).mul_(0.5));
      if (side_by_side_ && frame->reference.defined())
        side_by_side_->write(side_by_side_frame(frame->reference, frame->rgb), frame->pts, frame->duration);
      if (progress_) progress_->update(writer_.frames_written());
      times_.busy += since(start);
    }
    if (!finishing_) return;  // cancelled: the file is abandoned
    const auto start = Clock::now();
    drain_audio();
    writer_.finish();
    if (side_by_side_) side_by_side_->finish();
    times_.busy += since(start);
    finished_at_ = Clock::now();
  } catch (...) {
    error_ = std::current_exception();
    frames_.cancel();
  }
}

void WriterStage::rethrow() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(error_);
}

void WriterStage::push(OutputFrame frame) {
  const auto start = Clock::now();
  const bool pushed = frames_.push(std::move(frame));
  times_.waited += since(start);
  if (pushed) return;
  rethrow();
  throw Error("the writer stopped before the last frame");
}

void WriterStage::close() {
  if (finishing_) return;
  closed_at_ = Clock::now();
  finishing_ = true;
  frames_.close();
}

void WriterStage::finish() {
  close();
  rethrow();
  times_.tail = std::chrono::duration<double>(finished_at_ - closed_at_).count();
}

}  // namespace vaecodec::io
