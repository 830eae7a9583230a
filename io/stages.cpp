#include "io/stages.h"

#include "core/error.h"

namespace vaecodec::io {

ReaderStage::ReaderStage(VideoReader& reader, size_t capacity, PacketQueue* audio)
    : reader_(reader), frames_(capacity), audio_(audio) {
  if (audio_) reader_.set_audio_sink([this](PacketPtr packet) { audio_->push(std::move(packet)); });
  thread_ = std::thread([this] { run(); });
}

ReaderStage::~ReaderStage() {
  frames_.cancel();
  if (thread_.joinable()) thread_.join();
}

void ReaderStage::run() {
  try {
    VideoFrame frame;
    while (reader_.next(frame))
      if (!frames_.push(std::move(frame))) return;
  } catch (...) {
    error_ = std::current_exception();
  }
  frames_.close();
}

std::optional<VideoFrame> ReaderStage::next() {
  std::optional<VideoFrame> frame = frames_.pop();
  if (!frame) {
    if (thread_.joinable()) thread_.join();
    if (error_) std::rethrow_exception(error_);
  }
  return frame;
}

WriterStage::WriterStage(VideoWriter& writer, size_t capacity, PacketQueue* audio, QualityMeter* meter,
                         Progress* progress)
    : writer_(writer), frames_(capacity), audio_(audio), meter_(meter), progress_(progress) {
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
  try {
    while (std::optional<OutputFrame> frame = frames_.pop()) {
      drain_audio();
      frame->chunk.wait();
      writer_.write(frame->rgb, frame->pts, frame->duration);
      if (meter_ && frame->reference.defined())
        meter_->add(frame->reference.clamp(-1.0, 1.0).add_(1.0).mul_(0.5),
                    frame->rgb.clamp(-1.0, 1.0).add_(1.0).mul_(0.5));
      if (progress_) progress_->update(writer_.frames_written());
    }
    if (!finishing_) return;  // cancelled: the file is abandoned
    drain_audio();
    writer_.finish();
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
  if (frames_.push(std::move(frame))) return;
  rethrow();
  throw Error("the writer stopped before the last frame");
}

void WriterStage::finish() {
  finishing_ = true;
  frames_.close();
  rethrow();
}

}  // namespace vaecodec::io
