#include "io/chroma.h"

#include <array>
#include <cmath>

namespace vaecodec::io {
namespace {

// Iterations of the downsampling fixed point and its step. Per axis the error shrinks by at least 0.375 per
// iteration (co-sited chroma, the slow case; 0.25 when centred), so 10 leave under 1e-4 of the largest
// chroma excursion: well below half a code value at 10 bits.
constexpr int kIterations = 10;
constexpr double kStep = 1.25;

// A luma sample of phase p (0: the even one of its pair, 1: the odd one) is interpolated as
// sum_k weights[k] * chroma[j + first + k], j being its pair.
struct Taps {
  int64_t first = 0;
  std::array<double, 4> weights{};
};

// Catmull-Rom weights of the four samples around a point at fraction t in [0, 1) past the second one.
std::array<double, 4> cubic_weights(double t) {
  const double t2 = t * t, t3 = t2 * t;
  return {(-t3 + 2 * t2 - t) / 2, (3 * t3 - 5 * t2 + 2) / 2, (-3 * t3 + 4 * t2 + t) / 2, (t3 - t2) / 2};
}

Taps taps_of(int phase, double siting) {
  const double position = (phase - siting) / 2.0;  // in chroma samples, from the pair's own chroma sample
  const double base = std::floor(position);
  return {static_cast<int64_t>(base) - 1, cubic_weights(position - base)};
}

constexpr int64_t kPad = 2;  // the taps reach at most two samples beyond either end

// `x` with its first and last slices along `dim` repeated kPad times.
torch::Tensor pad_edges(const torch::Tensor& x, int64_t dim) {
  const int64_t n = x.size(dim);
  std::vector<int64_t> repeat(x.dim(), 1);
  repeat[dim] = kPad;
  return torch::cat({x.narrow(dim, 0, 1).repeat(repeat), x, x.narrow(dim, n - 1, 1).repeat(repeat)}, dim);
}

// m chroma samples along `dim` -> n luma samples (n is 2m or 2m - 1).
torch::Tensor upsample_axis(const torch::Tensor& c, int64_t dim, int64_t n, double siting) {
  const int64_t m = c.size(dim);
  const torch::Tensor padded = pad_edges(c, dim);
  std::array<torch::Tensor, 2> phases;
  for (int p = 0; p < 2; ++p) {
    const Taps taps = taps_of(p, siting);
    torch::Tensor sum = torch::zeros_like(c);
    for (int k = 0; k < 4; ++k)
      if (taps.weights[k] != 0.0) sum.add_(padded.narrow(dim, kPad + taps.first + k, m), taps.weights[k]);
    phases[p] = sum;
  }
  std::vector<int64_t> shape = c.sizes().vec();
  shape[dim] = 2 * m;
  return torch::stack({phases[0], phases[1]}, dim + 1).reshape(shape).narrow(dim, 0, n);
}

// The transpose of upsample_axis (halved, and with replicated rather than folded edges): n luma samples
// along `dim` -> m chroma samples.
torch::Tensor transpose_axis(const torch::Tensor& t, int64_t dim, int64_t m, double siting) {
  torch::Tensor full = t;
  if (t.size(dim) < 2 * m) full = torch::cat({t, t.narrow(dim, t.size(dim) - 1, 1)}, dim);
  std::vector<int64_t> pairs = full.sizes().vec();
  pairs[dim] = m;
  pairs.insert(pairs.begin() + dim + 1, 2);
  const torch::Tensor split = full.reshape(pairs);
  std::vector<int64_t> shape = t.sizes().vec();
  shape[dim] = m;
  torch::Tensor sum = torch::zeros(shape, t.options());
  for (int p = 0; p < 2; ++p) {
    const Taps taps = taps_of(p, siting);
    const torch::Tensor padded = pad_edges(split.select(dim + 1, p), dim);
    for (int k = 0; k < 4; ++k)
      if (taps.weights[k] != 0.0) sum.add_(padded.narrow(dim, kPad - taps.first - k, m), taps.weights[k]);
  }
  return sum.mul_(0.5);
}

// n luma samples along `dim` -> the m chroma samples that upsample back to them (Note [Chroma resampling]).
torch::Tensor downsample_axis(const torch::Tensor& t, int64_t dim, double siting) {
  const int64_t n = t.size(dim), m = (n + 1) / 2;
  torch::Tensor c = transpose_axis(t, dim, m, siting);
  for (int i = 0; i < kIterations; ++i)
    c.add_(transpose_axis(t - upsample_axis(c, dim, n, siting), dim, m, siting), kStep);
  return c;
}

}  // namespace

ChromaSiting chroma_siting(AVChromaLocation location) {
  switch (location) {
    case AVCHROMA_LOC_LEFT:
      return {0.0, 0.5};
    case AVCHROMA_LOC_TOPLEFT:
      return {0.0, 0.0};
    case AVCHROMA_LOC_TOP:
      return {0.5, 0.0};
    case AVCHROMA_LOC_BOTTOMLEFT:
      return {0.0, 1.0};
    case AVCHROMA_LOC_BOTTOM:
      return {0.5, 1.0};
    default:
      return {0.5, 0.5};
  }
}

torch::Tensor upsample_chroma(const torch::Tensor& chroma, int64_t height, int64_t width, int log2_w,
                              int log2_h, ChromaSiting siting) {
  TORCH_CHECK(log2_w <= 1 && log2_h <= 1, "upsample_chroma: subsampling by more than 2");
  const int64_t w_dim = chroma.dim() - 1, h_dim = chroma.dim() - 2;
  torch::Tensor x = chroma;
  if (log2_w) x = upsample_axis(x, w_dim, width, siting.horizontal);
  if (log2_h) x = upsample_axis(x, h_dim, height, siting.vertical);
  return x;
}

torch::Tensor downsample_chroma(const torch::Tensor& full, int log2_w, int log2_h, ChromaSiting siting) {
  TORCH_CHECK(log2_w <= 1 && log2_h <= 1, "downsample_chroma: subsampling by more than 2");
  const int64_t w_dim = full.dim() - 1, h_dim = full.dim() - 2;
  torch::Tensor x = full;
  if (log2_h) x = downsample_axis(x, h_dim, siting.vertical);
  if (log2_w) x = downsample_axis(x, w_dim, siting.horizontal);
  return x;
}

}  // namespace vaecodec::io
