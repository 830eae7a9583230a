#include "core/split/split.h"

#include <utility>
#include <vector>

namespace vaecodec::core {
namespace {

torch::Tensor append(const torch::Tensor& pending, const torch::Tensor& more) {
  if (!pending.defined() || pending.size(2) == 0) return more;
  return torch::cat({pending, more}, 2);
}

}  // namespace

torch::Tensor join_frames(std::vector<torch::Tensor>& parts) {
  if (parts.empty()) return {};  // every frame went to ChunkOptions::emit
  if (parts.size() == 1) return parts.front();
  return torch::cat(parts, 2);
}

ChunkedSplit::ChunkedSplit(Op op, int64_t latent_frames, int64_t temporal_factor)
    : op_(op), latent_frames_(latent_frames), temporal_factor_(temporal_factor) {}

torch::Tensor ChunkedSplit::push(const torch::Tensor& x) {
  pending_ = append(pending_, x);
  std::vector<torch::Tensor> out;
  while (true) {
    // Note [Chunks] in core/engine.cpp: encode chunks are frame 0 and its followers, then whole groups.
    const int64_t need = op_ == Op::kDecode ? latent_frames_
                         : started_         ? latent_frames_ * temporal_factor_
                                            : 1 + (latent_frames_ - 1) * temporal_factor_;
    if (pending_.size(2) < need) break;
    {
      torch::InferenceMode guard;
      out.push_back(run_counted(pending_.narrow(2, 0, need)));
    }
    started_ = true;
    pending_ = pending_.narrow(2, need, pending_.size(2) - need);
  }
  return join_frames(out);
}

torch::Tensor ChunkedSplit::finish() {
  std::vector<torch::Tensor> out;
  torch::InferenceMode guard;
  if (pending_.defined() && pending_.size(2) > 0) out.push_back(run_counted(pending_));
  pending_ = torch::Tensor();
  if (torch::Tensor held = end(); held.defined()) {
    count(held.size(2));  // a decode's held-back frames (an encode holds none back)
    out.push_back(std::move(held));
  }
  return join_frames(out);
}

torch::Tensor ChunkedSplit::run_counted(const torch::Tensor& x) {
  torch::Tensor y = run_chunk(x);
  count(op_ == Op::kDecode ? (y.defined() ? y.size(2) : 0) : x.size(2));
  return y;
}

void ChunkedSplit::count(int64_t frames) {
  frames_done_ += frames;
  if (progress_) progress_(frames_done_);
}

}  // namespace vaecodec::core
