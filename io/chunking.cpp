#include "io/chunking.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "core/packed_frames.h"
#include "io/colour.h"

namespace vaecodec::io {
namespace F = torch::nn::functional;
using torch::indexing::Slice;

namespace {
int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// The engine counts the frames it has encoded (ChunkOptions::progress), the padding's repeats of the last
// frame too (Note [Padding]); progress counts the clip's own, `real_frames` so far.
core::ChunkOptions without_padding(core::ChunkOptions chunks, const int64_t& real_frames) {
  if (chunks.progress)
    chunks.progress = [told = std::move(chunks.progress), &real_frames](int64_t done) {
      told(std::min(done, real_frames));
    };
  return chunks;
}

// Frames [1, 3, t, H, W] padded to the model's size (Note [Padding]).
torch::Tensor padded(torch::Tensor x, const Geometry& g) {
  if (!g.padded()) return x;
  return F::pad(x, F::PadFuncOptions({0, g.padded_width - g.width, 0, g.padded_height - g.height, 0, 0})
                       .mode(torch::kReplicate));
}

// Note [An encode window as its planes]
// A chunk of frames that came as their 8-bit Y'CbCr planes (VideoFrame::yuv), kept so by a run that keeps
// frames packed (Note [Frames kept packed] in core/packed_frames.h): the planes copied into one page-locked
// block of their size (the reader's pinned buffers round up to a power of two), and unpacked on any device
// as EncodeFeeder would have made them - each frame to RGB by yuv_to_rgb there, in the model's dtype,
// stacked, padded - so the model sees the same numbers. At 4K x81 in 4:2:0 the window is 0.94 GiB where the
// frames in bf16 would take 3.75.
class YuvChunk : public core::PackedFrames {
 public:
  YuvChunk(const std::vector<YuvFrame>& frames, const Geometry& geometry, const core::Device& device)
      : geometry_(geometry) {
    int64_t bytes = 0;
    for (size_t i = 0; i < frames.size(); ++i)
      if (!same_as_before(frames, i))
        for (const torch::Tensor& plane : frames[i].planes) bytes += plane.numel();
    const auto meta = torch::TensorOptions(torch::kUInt8).device(torch::kMeta);
    block_ = device.pinned_exact_like(torch::empty({bytes}, meta));
    int64_t at = 0;
    for (size_t i = 0; i < frames.size(); ++i) {
      if (same_as_before(frames, i)) {  // the clip's padding repeats the last frame
        frames_.push_back(frames_.back());
        continue;
      }
      YuvFrame kept = frames[i];
      for (torch::Tensor& plane : kept.planes) {
        torch::Tensor there = block_.narrow(0, at, plane.numel()).view(plane.sizes());
        there.copy_(plane);
        plane = there;
        at += plane.numel();
      }
      frames_.push_back(std::move(kept));
    }
  }
  int64_t frames() const override { return static_cast<int64_t>(frames_.size()); }
  torch::Tensor shape() const override {
    return torch::empty({1, 3, frames(), geometry_.padded_height, geometry_.padded_width},
                        torch::TensorOptions().device(torch::kMeta));
  }
  int64_t bytes() const override { return block_.numel(); }
  torch::Tensor unpack(int64_t at, int64_t len, torch::Device device,
                       torch::ScalarType dtype) const override {
    TORCH_CHECK(at >= 0 && len >= 0 && at + len <= frames(), "frames past the chunk's");
    std::vector<torch::Tensor> rgb;
    for (int64_t i = at; i < at + len; ++i) {
      const YuvFrame& yuv = frames_[static_cast<size_t>(i)];
      rgb.push_back(yuv_to_rgb(yuv, device, [&](const torch::Tensor& p) {
                      return p.to(device, p.is_pinned());
                    }).to(dtype));
    }
    return padded(torch::stack(rgb, /*dim=*/1).unsqueeze(0), geometry_);
  }

 private:
  static bool same_as_before(const std::vector<YuvFrame>& frames, size_t i) {
    return i > 0 && frames[i].planes[0].data_ptr() == frames[i - 1].planes[0].data_ptr();
  }
  Geometry geometry_;
  torch::Tensor block_;
  std::vector<YuvFrame> frames_;  // planes: views of block_
};

}  // namespace

Geometry Geometry::of(const core::ModelInfo& info, int64_t width, int64_t height) {
  Geometry g;
  g.width = width;
  g.height = height;
  g.padded_width = round_up(width, info.spatial_factor);
  g.padded_height = round_up(height, info.spatial_factor);
  g.temporal_factor = info.temporal_factor;
  return g;
}

int64_t padded_frame_count(int64_t frames, int64_t temporal_factor) {
  if (frames <= 1) return 1;
  return 1 + round_up(frames - 1, temporal_factor);
}

bool has_frames(const torch::Tensor& t) {
  return t.defined() && t.dim() == 5 && t.size(2) > 0;
}

EncodeFeeder::EncodeFeeder(core::VaeModel& model, core::ChunkOptions chunks, Geometry geometry,
                           core::Device& device)
    : run_(model, device, core::Op::kEncode, without_padding(chunks, frames_in_)),
      geometry_(geometry),
      device_(device),
      dtype_(model.dtype()),
      packs_(run_.keeps_packed()) {
  // The engine's own chunk lengths (Note [Chunks] in core/engine.cpp), so every push runs one chunk at once.
  const int64_t latent_frames = std::max<int64_t>(chunks.latent_frames, 1);
  later_group_ = core::encode_chunk_frames(geometry.temporal_factor, latent_frames, /*first=*/false);
  group_ = core::encode_chunk_frames(geometry.temporal_factor, latent_frames, /*first=*/true);
}

// Note [The encode's input in the model's dtype]
// Each frame is converted to the model's dtype as it reaches the device (the model would convert the chunk
// anyway, to the same values): the frames waiting for their chunk, the chunk and its padded copy then take
// half the memory in bf16 (a 4K chunk of four frames 0.2 GB instead of 0.4, and its stack as much again),
// which the planner counts as the chunk handed over (Note [Exact plans] in core/exact_plan.cpp).
torch::Tensor EncodeFeeder::push(const VideoFrame& frame) {
  if (packs_ && frame.yuv && pending_.empty()) {  // Note [An encode window as its planes]
    held_.push_back(*frame.yuv);
  } else {
    unpack_held();
    last_ = frame_rgb(frame, device_).to(dtype_);
    pending_.push_back(last_);
  }
  ++frames_in_;
  if (static_cast<int64_t>(pending_.size() + held_.size()) < group_) return {};
  group_ = later_group_;
  return flush();
}

void EncodeFeeder::unpack_held() {
  for (const YuvFrame& yuv : held_) {
    VideoFrame frame;
    frame.yuv = yuv;
    pending_.push_back(frame_rgb(frame, device_).to(dtype_));
  }
  held_.clear();
}

torch::Tensor EncodeFeeder::finish() {
  const int64_t target = padded_frame_count(frames_in_, geometry_.temporal_factor);
  for (int64_t i = frames_in_; i < target; ++i) {
    if (held_.empty())
      pending_.push_back(last_);
    else
      held_.push_back(held_.back());  // the same planes (YuvChunk keeps them once)
  }
  torch::Tensor head = pending_.empty() && held_.empty() ? torch::Tensor() : flush();
  torch::Tensor tail = run_.finish();
  if (!has_frames(head)) return tail;
  if (!has_frames(tail)) return head;
  return torch::cat({head, tail}, /*dim=*/2);
}

torch::Tensor EncodeFeeder::flush() {
  if (!held_.empty()) {
    auto chunk = std::make_shared<YuvChunk>(held_, geometry_, device_);
    held_.clear();
    packed_frames_ += chunk->frames();
    return run_.push_packed(std::move(chunk));
  }
  torch::Tensor x = torch::stack(pending_, /*dim=*/1).unsqueeze(0);  // [1, 3, t, H, W]
  pending_.clear();
  return run_.push(padded(std::move(x), geometry_));
}

DecodedFrameSink::DecodedFrameSink(Geometry geometry, core::Device& device, WriterStage& writer,
                                   const TensorToFrame* converter)
    : geometry_(geometry), device_(device), writer_(writer), converter_(converter) {}

void DecodedFrameSink::add_timing(int64_t pts, int64_t duration, torch::Tensor reference) {
  timings_.push_back({pts, duration, std::move(reference)});
}

bool DecodedFrameSink::keeps_8_bits() const {
  return converter_ && converter_->bits() <= 8;
}

void DecodedFrameSink::push(const torch::Tensor& video) {
  if (!has_frames(video)) return;
  const int64_t frames = video.size(2);
  const int64_t real = std::min<int64_t>(frames, static_cast<int64_t>(timings_.size()));
  dropped_ += frames - real;
  if (real == 0) return;
  // [1, 3, t, Hp, Wp] -> [t, 3, H, W]: one contiguous block per frame once downloaded.
  const torch::Tensor cropped =
      video.index({0, Slice(), Slice(0, real), Slice(0, geometry_.height), Slice(0, geometry_.width)})
          .permute({1, 0, 2, 3});
  if (!converter_) {
    core::HostTensor host = device_.download(cropped);
    for (int64_t i = 0; i < real; ++i) {
      Timing timing = std::move(timings_.front());
      timings_.pop_front();
      writer_.push({host, host.tensor[i], {}, timing.pts, timing.duration, std::move(timing.reference)});
      ++emitted_;
    }
    return;
  }
  // The chunk's planes [t, h, w] side by side in one buffer: one download, then a view per frame and plane.
  const std::array<torch::Tensor, 3> planes = converter_->quantize(cropped);
  core::HostTensor host =
      device_.download(torch::cat({planes[0].flatten(), planes[1].flatten(), planes[2].flatten()}));
  std::array<torch::Tensor, 3> frames_of;
  int64_t offset = 0;
  for (int p = 0; p < 3; ++p) {
    frames_of[p] = host.tensor.narrow(0, offset, planes[p].numel()).view(planes[p].sizes());
    offset += planes[p].numel();
  }
  for (int64_t i = 0; i < real; ++i) {
    Timing timing = std::move(timings_.front());
    timings_.pop_front();
    writer_.push({host,
                  {},
                  {frames_of[0][i], frames_of[1][i], frames_of[2][i]},
                  timing.pts,
                  timing.duration,
                  std::move(timing.reference)});
    ++emitted_;
  }
}

}  // namespace vaecodec::io
