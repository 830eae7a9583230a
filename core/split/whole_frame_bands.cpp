#include "core/split/whole_frame_bands.h"

#include <algorithm>
#include <exception>
#include <string>

#include <c10/cuda/CUDAStream.h>

#include "core/device/memory_faults.h"
#include "core/error.h"
#include "core/layers.h"
#include "core/split/bands.h"

namespace vaecodec::core {

torch::Tensor to_place(const torch::Tensor& x, const BandPlace& place, bool convert_dtype) {
  const torch::Device where = place.device->torch_device();
  torch::Tensor from = x;
  if (x.device().is_cpu() && !x.is_pinned() && where.is_cuda()) {
    from =
        torch::empty(x.sizes(), x.options().pinned_memory(true).memory_format(place.model->memory_format()));
    from.copy_(x);
  }
  const bool pinned = from.device().is_cpu() && from.is_pinned();
  auto y = convert_dtype ? from.to(where, place.model->dtype(), pinned) : from.to(where, pinned);
  return y.contiguous(place.model->memory_format());
}

void WindowFeatures::write(const torch::Tensor& part, int64_t at, int64_t row, int64_t height) {
  if (!part.defined() || part.size(2) == 0) return;
  const int64_t end = at + part.size(2);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!features_.defined() || end > features_.size(2)) {
    auto sizes = part.sizes().vec();
    sizes[2] = std::max(frames_, end);
    sizes[3] = height;
    torch::Tensor grown = torch::empty(sizes, CausalConv3d::layout_of(part).device(device_));
    if (written_ > 0) grown.narrow(2, 0, written_).copy_(features_.narrow(2, 0, written_));
    features_ = grown;
  }
  features_.narrow(2, at, part.size(2)).narrow(3, row, part.size(3)).copy_(part);
  written_ = std::max(written_, end);
}

torch::Tensor WindowFeatures::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  return written_ == 0 ? torch::Tensor() : features_.narrow(2, 0, written_);
}

WholeFrameBands::WholeFrameBands(const std::vector<BandPlace>& places, Places* workers, int64_t latent_height)
    : workers_(workers), height_(latent_height) {
  if (places.empty()) throw Error("the whole-frame part needs a place");
  if (places.size() > 1 && (!workers || workers->size() != places.size()))
    throw Error("the whole-frame part's bands need one worker per place");
  const int64_t n = std::min(static_cast<int64_t>(places.size()), latent_height);
  const std::vector<BandRows> rows = band_rows(latent_height, std::max<int64_t>(n, 1));
  for (size_t i = 0; i < rows.size(); ++i) bands_.push_back({places[i], rows[i], CausalCache()});
  if (places.size() > 1) enable_peers(places);
}

int64_t WholeFrameBands::cache_bytes() const {
  int64_t n = 0;
  for (const Band& b : bands_) n += b.cache.bytes();
  return n;
}

void WholeFrameBands::run(const std::function<void(Band&, size_t)>& work, Device& out) {
  if (!workers_) {  // one place: the whole frame, here
    work(bands_.front(), 0);
    return;
  }
  // The work queued on the run's device so far (the window's latents or features) is done before the bands'
  // threads read it; each band waits for its own work and its copies to and from the run's device.
  const torch::Device to = out.torch_device();
  if (to.is_cuda()) c10::cuda::getCurrentCUDAStream(to.index()).synchronize();
  const std::exception_ptr failed = run_linked_bands(*workers_, bands_.size(), [&](size_t i) {
    Band& band = bands_[i];
    work(band, i);
    const torch::Device where = band.place.device->torch_device();
    if (where.is_cuda()) c10::cuda::getCurrentCUDAStream(where.index()).synchronize();
    if (to.is_cuda()) c10::cuda::getCurrentCUDAStream(to.index()).synchronize();
  });
  if (failed) std::rethrow_exception(failed);
}

torch::Tensor WholeFrameBands::decode(const std::vector<torch::Tensor>& chunks, bool ends, int64_t frames,
                                      Device& out, After after, bool host) {
  WindowFeatures features(frames, host ? torch::Device(torch::kCPU) : out.torch_device());
  std::vector<int64_t> settled(bands_.size(), 0);
  run(
      [&](Band& band, size_t i) {
        VaeModel& model = *band.place.model;
        Device& device = *band.place.device;
        band.parking.unpark(band.cache, device);  // on the band's thread and stream, as its model calls
        int64_t& at = settled[i];
        auto put = [&](const torch::Tensor& part) {
          if (!part.defined()) return;
          features.write(part, at, band.rows.first, height_);
          at += part.size(2);
        };
        for (const torch::Tensor& z : chunks) {
          if (i == 0) before_model_call();  // once per chunk, as on one device
          put(model.decode_features(
              to_place(z.narrow(3, band.rows.first, band.rows.count), band.place, false), band.cache));
        }
        if (ends) {
          if (i == 0) before_model_call();
          put(model.decode_features_end(band.cache));
        }
        if (after == After::kDrop) band.cache.clear();
        if (after == After::kPark) band.parking.park(band.cache, device);
      },
      out);
  // Every band holds the same frames back (the chunking alone decides how many).
  for (const int64_t s : settled)
    if (s != settled.front())
      throw Error("the whole-frame part's bands settled " + std::to_string(settled.front()) + " and " +
                  std::to_string(s) + " frames of one window");
  return features.take();
}

torch::Tensor WholeFrameBands::encode(const torch::Tensor& features, int64_t chunk, Device& out) {
  const int64_t n = features.size(2);
  std::vector<torch::Tensor> latents(bands_.size());
  run(
      [&](Band& band, size_t i) {
        VaeModel& model = *band.place.model;
        std::vector<torch::Tensor> parts;
        for (int64_t at = 0; at < n; at += chunk) {
          if (i == 0) before_model_call();
          const torch::Tensor rows =
              features.narrow(2, at, std::min(chunk, n - at)).narrow(3, band.rows.first, band.rows.count);
          parts.push_back(model.encode_features(to_place(rows, band.place, false), band.cache));
        }
        const torch::Tensor mine = parts.size() == 1 ? parts.front() : torch::cat(parts, 2);
        latents[i] = mine.to(out.torch_device());
      },
      out);
  return latents.size() == 1 ? latents.front() : torch::cat(latents, 3);
}

}  // namespace vaecodec::core
