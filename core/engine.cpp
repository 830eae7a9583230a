#include "core/engine.h"

#include <string>
#include <vector>

#include "core/error.h"
#include "core/split/split.h"

namespace vaecodec::core {
namespace {

// A run's model must be on the run's device: the engine moves its inputs there and queues copies on its
// streams.
void check_placed(const VaeModel& model, const Device& device) {
  if (model.device() != device.torch_device())
    throw Error("the model is on " + model.device().str() + ", the run on " + device.torch_device().str());
}

void check_input(const VaeModel& model, Op op, const torch::Tensor& x) {
  const ModelInfo& info = model.info();
  if (op == Op::kDecode) {
    if (x.dim() != 5 || x.size(1) != info.latent_channels)
      throw Error("decode expects latents shaped [B, " + std::to_string(info.latent_channels) +
                  ", T, h, w], got " + std::to_string(x.dim()) + "-D with " +
                  std::to_string(x.dim() > 1 ? x.size(1) : 0) + " channels");
    return;
  }
  if (x.dim() != 5 || x.size(1) != 3)
    throw Error("encode expects frames shaped [B, 3, T, H, W], got " + std::to_string(x.dim()) + "-D");
  const int64_t f = info.spatial_factor;
  if (x.size(3) % f || x.size(4) % f)
    throw Error("frame size " + std::to_string(x.size(4)) + "x" + std::to_string(x.size(3)) +
                " is not a multiple of " + std::to_string(f));
}

torch::Tensor whole(Run& run, const torch::Tensor& x) {
  std::vector<torch::Tensor> parts;
  if (auto a = run.push(x); a.defined()) parts.push_back(a);
  if (auto b = run.finish(); b.defined()) parts.push_back(b);
  return join_frames(parts);
}

}  // namespace

// Note [Chunks]
// Encode: the first chunk is frame 0 plus (latent_frames - 1) * temporal_factor frames, every later chunk
// latent_frames * temporal_factor frames; the last may be shorter but stays a multiple of the temporal
// factor. Decode: chunks of latent_frames latent frames. The models carry their history across chunks in the
// run's CausalCache, so the output does not depend on where the cuts fall.
Run::Run(VaeModel& model, Device& device, Op op, ChunkOptions chunks)
    : model_(model), device_(device), op_(op), chunks_(std::move(chunks)) {
  if (op_ != Op::kEncode && op_ != Op::kDecode) throw Error("a run encodes or decodes: " + op_name(op_));
  if (chunks_.latent_frames < 1) throw Error("chunk length must be at least 1 latent frame");
  check_placed(model, device);
}

Run::~Run() = default;

torch::Tensor Run::push(const torch::Tensor& x) {
  check_input(model_, op_, x);
  if (!split_) {
    const int64_t f = op_ == Op::kEncode ? model_.info().spatial_factor : 1;
    split_ = make_split(model_, device_, op_, chunks_, x.size(3) / f, x.size(4) / f);
  }
  frames_in_ += x.size(2);
  return split_->push(x);
}

bool Run::keeps_packed() const {
  return keeps_packed_frames(op_, chunks_);
}

torch::Tensor Run::push_packed(std::shared_ptr<const PackedFrames> x) {
  if (!keeps_packed()) throw Error("packed frames for a run that does not keep them (Run::keeps_packed)");
  const torch::Tensor shape = x->shape();
  check_input(model_, op_, shape);
  if (!split_) {
    const int64_t f = model_.info().spatial_factor;
    split_ = make_split(model_, device_, op_, chunks_, shape.size(3) / f, shape.size(4) / f);
  }
  frames_in_ += x->frames();
  return split_->push_packed(std::move(x));
}

torch::Tensor Run::finish() {
  if (op_ == Op::kDecode) {
    if (frames_in_ == 0) throw Error("nothing to decode: no latent frames");
    return split_->finish();
  }
  const int64_t tf = model_.info().temporal_factor;
  if (frames_in_ == 0) throw Error("nothing to encode: no frames");
  if ((frames_in_ - 1) % tf != 0)
    throw Error("encode needs 1 + " + std::to_string(tf) + "k frames, got " + std::to_string(frames_in_));
  return split_->finish();
}

torch::Tensor encode_video(VaeModel& model, const torch::Tensor& video, ChunkOptions chunks) {
  Run run(model, Device::of(model.device()), Op::kEncode, std::move(chunks));
  return whole(run, video);
}

torch::Tensor decode_latents(VaeModel& model, const torch::Tensor& latents, ChunkOptions chunks) {
  Run run(model, Device::of(model.device()), Op::kDecode, std::move(chunks));
  return whole(run, latents);
}

}  // namespace vaecodec::core
