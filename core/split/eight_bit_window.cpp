// A decode window held as 8-bit RGB (Note [A window held in 8 bits]).
#include "core/split/eight_bit_window.h"

#include <algorithm>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

#include <c10/cuda/CUDAStream.h>

#include "core/error.h"
#include "core/rgb_codes.h"

namespace vaecodec::core {

namespace {

std::vector<int64_t> edges(const std::vector<Area>& areas, bool rows) {
  std::vector<int64_t> out;
  for (const Area& a : areas) {
    const Span& s = rows ? a.rows : a.cols;
    out.push_back(s.begin);
    out.push_back(s.end);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool contains(const Area& outer, const Area& inner) {
  return outer.rows.begin <= inner.rows.begin && inner.rows.end <= outer.rows.end &&
         outer.cols.begin <= inner.cols.begin && inner.cols.end <= outer.cols.end;
}

torch::Tensor area_of(const torch::Tensor& x, const Area& a) {
  return x.narrow(3, a.rows.begin, a.rows.size()).narrow(4, a.cols.begin, a.cols.size());
}

}  // namespace

EightBitWindow::EightBitWindow(std::vector<int64_t> sizes, torch::ScalarType dtype, std::vector<Area> areas,
                               bool blended)
    : dtype_(dtype), areas_(std::move(areas)) {
  if (sizes.size() != 5 || sizes[1] != 3) throw Error("an 8-bit window holds RGB frames [B, 3, T, H, W]");
  const std::vector<int64_t> ys = edges(areas_, true), xs = edges(areas_, false);
  for (size_t i = 0; i + 1 < ys.size(); ++i)
    for (size_t j = 0; j + 1 < xs.size(); ++j) {
      Cell cell{{{ys[i], ys[i + 1]}, {xs[j], xs[j + 1]}}, {}, {}};
      for (size_t t = 0; t < areas_.size(); ++t)
        if (contains(areas_[t], cell.area)) cell.tiles.push_back(t);
      if (cell.tiles.empty()) throw Error("tiles leave pixels of an 8-bit window unwritten");
      if (cell.tiles.size() > 1 && !blended)
        throw Error("tiles that do not blend overlap in an 8-bit window");
      cells_.push_back(std::move(cell));
    }
  // Not zeroed: every pixel is written, and a page of host memory is taken only when it is.
  window_ =
      torch::empty({sizes[0], sizes[2], 3, sizes[3], sizes[4]}, torch::TensorOptions().dtype(torch::kUInt8))
          .permute({0, 2, 1, 3, 4});
}

torch::Tensor EightBitWindow::quantise(const torch::Tensor& x, torch::ScalarType dtype) {
  return rgb_codes(unit_rgb(x.to(dtype)), 255.0,
                   torch::kUInt8);  // the window's value in its dtype, as written
}

torch::Tensor EightBitWindow::expand(const torch::Tensor& q) {
  return q.to(torch::kFloat).div(255.0).mul_(2.0).sub_(1.0);
}

std::vector<size_t> EightBitWindow::cells_of(size_t tile) const {
  std::vector<size_t> out;
  for (size_t c = 0; c < cells_.size(); ++c)
    if (std::find(cells_[c].tiles.begin(), cells_[c].tiles.end(), tile) != cells_[c].tiles.end())
      out.push_back(c);
  return out;
}

torch::Tensor EightBitWindow::in_tile(const torch::Tensor& x, size_t tile, const Cell& cell) const {
  const Area& a = areas_[tile];
  return area_of(x, {{cell.area.rows.begin - a.rows.begin, cell.area.rows.end - a.rows.begin},
                     {cell.area.cols.begin - a.cols.begin, cell.area.cols.end - a.cols.begin}});
}

EightBitWindow::Down EightBitWindow::bring_down(size_t tile, int64_t at, const torch::Tensor& values,
                                                const Device& device) const {
  if (tile >= areas_.size()) throw Error("an 8-bit window has no tile " + std::to_string(tile));
  const Area& a = areas_[tile];
  if (values.dim() != 5 || values.size(3) != a.rows.size() || values.size(4) != a.cols.size() || at < 0 ||
      at + values.size(2) > size())
    throw Error("a tile's frames do not fit its area of the 8-bit window");
  const bool gpu = values.is_cuda();
  Down down;
  down.tile = tile;
  down.at = at;
  down.frames = values.size(2);
  // Its area quantised a few frames at a time (the float32 of a whole tile's window would be a second copy
  // of it on the device), time-major so that each piece comes down into one dense block.
  const std::vector<int64_t> sizes{values.size(0), values.size(2), 3, values.size(3), values.size(4)};
  const auto u8 = torch::TensorOptions().dtype(torch::kUInt8);
  down.own =
      gpu ? device.pinned_exact_like(torch::empty(sizes, u8.device(torch::kCPU))) : torch::empty(sizes, u8);
  constexpr int64_t kFramesAtOnce = 4;
  for (int64_t s = 0; s < down.frames; s += kFramesAtOnce) {
    const int64_t n = std::min(kFramesAtOnce, down.frames - s);
    down.own.narrow(1, s, n).copy_(quantise(values.narrow(2, s, n), dtype_).permute({0, 2, 1, 3, 4}),
                                   /*non_blocking=*/gpu);
  }
  down.own = down.own.permute({0, 2, 1, 3, 4});  // [B, 3, n, h, w]
  for (size_t c : cells_of(tile)) {
    if (cells_[c].tiles.size() == 1) continue;
    const torch::Tensor piece = in_tile(values, tile, cells_[c]).contiguous();
    down.shared.push_back(gpu ? device.pinned_exact_like(piece) : piece);
    if (gpu) down.shared.back().copy_(piece, /*non_blocking=*/true);
  }
  if (gpu) c10::cuda::getCurrentCUDAStream(device.index()).synchronize();  // the copies above
  return down;
}

void EightBitWindow::place(const Down& down) {
  const std::vector<size_t> cells = cells_of(down.tile);
  size_t k = 0;
  for (size_t c : cells) {
    Cell& cell = cells_[c];
    torch::Tensor into = area_of(window_, cell.area).narrow(2, down.at, down.frames);
    if (cell.tiles.size() == 1) {
      into.copy_(in_tile(down.own, down.tile, cell));
      continue;
    }
    if (!cell.sum.defined()) {
      std::vector<int64_t> sizes = window_.sizes().vec();
      sizes[3] = cell.area.rows.size();
      sizes[4] = cell.area.cols.size();
      cell.sum = torch::zeros(sizes, torch::TensorOptions().dtype(dtype_));
    }
    torch::Tensor sum = cell.sum.narrow(2, down.at, down.frames);
    sum.add_(down.shared[k++]);  // in the wider of the two dtypes, as the window of dtype_ adds
    if (down.tile != cell.tiles.back()) continue;
    into.copy_(quantise(sum, dtype_));
    if (down.at + down.frames == size()) cell.sum = torch::Tensor();  // its last tile's last frames
  }
}

void EightBitWindow::release(int64_t upto) {
  upto = std::min(upto, size());
  if (window_.size(0) != 1 || upto <= released_) return;
  const int64_t frame = 3 * window_.size(3) * window_.size(4);
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto base = reinterpret_cast<uintptr_t>(window_.data_ptr<uint8_t>());
  // Whole pages of the tensor below frame `upto` (the page it ends in holds frames still read), from where
  // the last release stopped.
  const uintptr_t begin = std::max((base + page - 1) / page * page,
                                   (base + static_cast<uintptr_t>(released_ * frame)) / page * page);
  const uintptr_t end = (base + static_cast<uintptr_t>(upto * frame)) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  released_ = upto;
}

int64_t EightBitWindow::bytes() const {
  int64_t n = window_.numel() - released_ * (window_.numel() / std::max<int64_t>(size(), 1));
  for (const Cell& c : cells_)
    if (c.sum.defined()) n += c.sum.numel() * c.sum.element_size();
  return n;
}

}  // namespace vaecodec::core
