#include "core/trunk.h"

#include <algorithm>

#include "core/error.h"

namespace vaecodec::core {
namespace {

int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

int64_t ceil_div(int64_t a, int64_t b) {
  return -floor_div(-a, b);
}

Span clip(Span s, int64_t extent) {
  return {std::max<int64_t>(s.begin, 0), std::min(s.end, extent)};
}

int64_t resized_extent(const Reach& reach, int64_t extent) {
  switch (reach.resize) {
    case Resize::kUp2:
      return 2 * extent;
    case Resize::kDown2:
      return extent / 2;
    case Resize::kSame:
      break;
  }
  return extent;
}

torch::Tensor crop(const torch::Tensor& x, const Area& have, const Area& want) {
  if (have == want) return x;
  const auto format = x.suggest_memory_format();
  return x.narrow(3, want.rows.begin - have.rows.begin, want.rows.size())
      .narrow(4, want.cols.begin - have.cols.begin, want.cols.size())
      .contiguous(format);
}

}  // namespace

Span input_span(const Reach& reach, Span out, int64_t extent) {
  const int64_t m = reach.margin;
  switch (reach.resize) {
    case Resize::kSame:
      return clip({out.begin - m, out.end + m}, extent);
    case Resize::kUp2:
      return clip({floor_div(out.begin, 2) - 1 - m, ceil_div(out.end, 2) + 1 + m}, extent);
    case Resize::kDown2: {
      Span s{2 * out.begin - m, 2 * out.end + 2 + m};
      s.begin = floor_div(s.begin, 2) * 2;
      s.end = ceil_div(s.end, 2) * 2;
      return clip(s, extent);
    }
  }
  return out;
}

Span output_span(const Reach& reach, Span in) {
  switch (reach.resize) {
    case Resize::kUp2:
      return {2 * in.begin, 2 * in.end};
    case Resize::kDown2:
      return {in.begin / 2, in.end / 2};
    case Resize::kSame:
      break;
  }
  return in;
}

void Trunk::add(CausalModule* block) {
  blocks_.push_back(block);
  reaches_.push_back(block->reach());
}

void Trunk::add_each(const CausalSequence& sequence) {
  for (size_t i = 0; i < sequence.size(); ++i) add(sequence.block(i));
}

bool Trunk::local() const {
  return std::all_of(reaches_.begin(), reaches_.end(), [](const Reach& r) { return r.local; });
}

bool Trunk::frame_norms() const {
  return std::any_of(reaches_.begin(), reaches_.end(), [](const Reach& r) { return r.frame_norm; });
}

int64_t Trunk::scale() const {
  int64_t up = 1, down = 1;
  for (const Reach& r : reaches_) {
    if (r.resize == Resize::kUp2) up *= 2;
    if (r.resize == Resize::kDown2) down *= 2;
  }
  return up >= down ? up / down : -(down / up);
}

std::vector<std::pair<int64_t, int64_t>> Trunk::extents(int64_t height, int64_t width) const {
  std::vector<std::pair<int64_t, int64_t>> e = {{height, width}};
  for (const Reach& r : reaches_)
    e.emplace_back(resized_extent(r, e.back().first), resized_extent(r, e.back().second));
  return e;
}

std::vector<Area> Trunk::areas(Area out, int64_t height, int64_t width) const {
  if (!local()) throw Error("this network's trunk looks at the whole frame: it cannot be tiled exactly");
  const auto e = extents(height, width);
  std::vector<Area> a(reaches_.size() + 1);
  a.back() = out;
  for (size_t i = reaches_.size(); i-- > 0;) {
    a[i].rows = input_span(reaches_[i], a[i + 1].rows, e[i].first);
    a[i].cols = input_span(reaches_[i], a[i + 1].cols, e[i].second);
  }
  return a;
}

Area Trunk::input_area(Area out, int64_t height, int64_t width) const {
  return areas(out, height, width).front();
}

torch::Tensor Trunk::run(const torch::Tensor& x, Area out, int64_t height, int64_t width,
                         CausalCache& cache) const {
  const std::vector<Area> want = areas(out, height, width);
  if (x.size(3) != want[0].rows.size() || x.size(4) != want[0].cols.size())
    throw Error("a tile's input is " + std::to_string(x.size(4)) + "x" + std::to_string(x.size(3)) +
                " pixels, its trunk reads " + std::to_string(want[0].cols.size()) + "x" +
                std::to_string(want[0].rows.size()));
  torch::Tensor h = x;
  Area have = want[0];
  for (size_t i = 0; i < blocks_.size(); ++i) {
    h = blocks_[i]->forward(crop(h, have, want[i]), cache);
    have = {output_span(reaches_[i], want[i].rows), output_span(reaches_[i], want[i].cols)};
  }
  return crop(h, have, want.back());
}

}  // namespace vaecodec::core
