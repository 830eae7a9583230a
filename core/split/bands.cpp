#include "core/split/bands.h"

#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "core/device/memory_faults.h"
#include "core/error.h"

namespace vaecodec::core {

// Note [Band streams]
// Each band's thread queues its work on a stream of its own from LibTorch's pool, not on the device's default
// stream: the default stream is CUDA's legacy stream, which orders itself against every other stream of its
// device, and run() (another thread) queues the chunk's input copies and the outputs' gathering on it. The
// hand-overs are explicit: run() records `inputs_ready_` after the input copies and the band's stream waits
// for it; the band records `outputs_made_` after its last layer and run()'s stream waits for it; each side
// tells the allocator that the other's stream uses the tensors it hands over (recordStream), so that memory
// freed by one thread is not reused by the other's stream while still read. (On the default streams instead,
// a split 720p decode on two H200s took 3.79 s against 3.38 s, before Note [Band threads].)

Bands::Bands(std::vector<BandPlace> places, Device& out_device, Op op, const TileGrid& columns, int64_t chunk)
    : ChunkedSplit(op, chunk, places.front().model->info().temporal_factor),
      out_device_(out_device),
      columns_(columns) {
  if (columns_.rows != 1)
    throw Error("a split run cuts its bands into columns, not into " + std::to_string(columns_.rows) +
                " rows of tiles");
  const auto rows = band_rows(columns_.latent_height, static_cast<int64_t>(places.size()));
  check_places(places, "band");
  for (size_t i = 0; i < places.size(); ++i)
    bands_.push_back({places[i], rows[i], std::vector<CausalCache>(static_cast<size_t>(columns_.cols))});
  inputs_ready_ = std::vector<at::cuda::CUDAEvent>(bands_.size());
  outputs_made_ = std::vector<at::cuda::CUDAEvent>(bands_.size());
  enable_peers(places);
}

void enable_peers(const std::vector<BandPlace>& places) {
  for (const BandPlace& a : places)
    for (const BandPlace& b : places) {
      const torch::Device da = a.device->torch_device(), db = b.device->torch_device();
      if (da.is_cuda() && db.is_cuda() && da != db) Device::enable_peer_access(da, db);
    }
}

std::exception_ptr run_linked_bands(Places& workers, size_t bands, const std::function<void(size_t)>& band) {
  BandLink link(static_cast<int64_t>(bands));
  const std::vector<std::exception_ptr> errors = workers.run_each([&](size_t i) {
    if (i >= bands) return;  // a place without a band
    c10::InferenceMode inference;
    try {
      BandScope scope(link, static_cast<int64_t>(i), workers.devices()[i]);
      band(i);
    } catch (...) {
      link.abort();
      throw;
    }
  });
  for (const auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const BandAborted&) {
      continue;
    } catch (...) {
      return e;
    }
  }
  for (const auto& e : errors)
    if (e) return std::make_exception_ptr(Error("a band of the split run stopped without saying why"));
  return nullptr;
}

int64_t Bands::cache_bytes() const {
  int64_t n = 0;
  for (const auto& b : bands_)
    for (const auto& c : b.caches) n += c.bytes();
  return n;
}

Bands::~Bands() = default;

void Bands::run_band(size_t i) {
  Band& band = bands_[i];
  VaeModel& model = *band.place.model;
  const torch::Device device = band.place.device->torch_device();
  // The inputs were made on run()'s stream (Note [Band streams]).
  const bool ending = inputs_[i].empty();  // end(): no inputs, the caches' held-back frames
  if (device.is_cuda() && !ending) {
    const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(device.index());
    inputs_ready_[i].block(stream);
    for (const torch::Tensor& part : inputs_[i])
      c10::cuda::CUDACachingAllocator::recordStream(part.storage().data_ptr(), stream);
  }
  std::vector<torch::Tensor> outs;
  for (int64_t c = 0; c < columns_.cols; ++c) {
    CausalCache& cache = band.caches[static_cast<size_t>(c)];
    if (ending) {
      outs.push_back(model.decode_end(cache));
      continue;
    }
    const torch::Tensor& part = inputs_[i][static_cast<size_t>(c)];
    outs.push_back(op_ == Op::kEncode ? model.encode(part, cache) : model.decode(part, cache));
  }
  if (device.is_cuda()) outputs_made_[i].record(c10::cuda::getCurrentCUDAStream(device.index()));
  std::lock_guard<std::mutex> lock(mutex_);
  outputs_[i] = std::move(outs);
}

torch::Tensor Bands::run_chunk(const torch::Tensor& x) {
  const VaeModel& model = *bands_.front().place.model;
  const int64_t factor = model.info().spatial_factor;
  const bool encode = op_ == Op::kEncode;
  const int64_t in_scale = encode ? factor : 1;
  if (x.size(3) != columns_.latent_height * in_scale || x.size(4) != columns_.latent_width * in_scale)
    throw Error("a split run planned for " + std::to_string(columns_.latent_width * in_scale) + "x" +
                std::to_string(columns_.latent_height * in_scale) + " got " + std::to_string(x.size(4)) +
                "x" + std::to_string(x.size(3)));
  before_model_call();
  const auto n = bands_.size();
  // Each band's columns, cut, converted and made dense where x is, then one plain copy to the band's device:
  // all queued here, before any band queues its model's work (Note [Copies between GPUs]).
  std::vector<std::vector<torch::Tensor>> inputs(n);
  for (size_t i = 0; i < n; ++i) {
    const Band& band = bands_[i];
    const torch::Device device = band.place.device->torch_device();
    for (int64_t c = 0; c < columns_.cols; ++c)
      inputs[i].push_back(x.narrow(3, band.rows.first * in_scale, band.rows.count * in_scale)
                              .narrow(4, columns_.col_origin(c) * in_scale, columns_.tile_width * in_scale)
                              .to(model.dtype())
                              .contiguous(model.memory_format())
                              .to(device)
                              .contiguous(model.memory_format()));
    if (device.is_cuda()) inputs_ready_[i].record(c10::cuda::getCurrentCUDAStream(device.index()));
  }
  return run_bands(std::move(inputs));
}

// Note [Held-back frames of a split] in blended_tiles.cpp: each band ends its columns' caches at once, the
// bands exchanging their halos as in a chunk, and the held-back rows are joined and blended as a chunk's.
torch::Tensor Bands::end() {
  const VaeModel& model = *bands_.front().place.model;
  if (op_ != Op::kDecode || model.info().decode_lag <= 0 || !places_) return {};
  before_model_call();
  torch::Tensor held = run_bands(std::vector<std::vector<torch::Tensor>>(bands_.size()));
  return held.defined() && held.size(2) > 0 ? held : torch::Tensor();
}

torch::Tensor Bands::run_bands(std::vector<std::vector<torch::Tensor>> inputs) {
  const VaeModel& model = *bands_.front().place.model;
  const int64_t factor = model.info().spatial_factor;
  const bool encode = op_ == Op::kEncode;
  const auto n = bands_.size();
  if (!places_) {  // Note [Band threads]
    std::vector<torch::Device> devices;
    for (const Band& band : bands_) devices.push_back(band.place.device->torch_device());
    places_ = std::make_unique<Places>(std::move(devices), Places::Streams::kOwn);  // Note [Band streams]
  }
  inputs_.swap(inputs);
  outputs_.assign(n, {});
  const std::exception_ptr failed = run_linked_bands(*places_, n, [&](size_t i) { run_band(i); });
  std::vector<std::vector<torch::Tensor>> outputs;
  outputs.swap(outputs_);
  inputs_.clear();
  if (failed) std::rethrow_exception(failed);
  // Nothing held back (a clip that ended before its first chunk settled anything): every band alike.
  for (const auto& out : outputs)
    for (const torch::Tensor& t : out)
      if (!t.defined()) return {};
  c10::InferenceMode inference;
  // The outputs were made on the bands' streams: this thread's stream waits for them, and the allocator keeps
  // their memory from the bands' next chunk until this stream is done with it (Note [Band streams]).
  for (size_t i = 0; i < n; ++i) {
    const torch::Device device = bands_[i].place.device->torch_device();
    if (!device.is_cuda()) continue;
    const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(device.index());
    outputs_made_[i].block(stream);
    for (const torch::Tensor& t : outputs[i])
      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream);
  }
  const torch::Device out_device = out_device_.torch_device();
  // Column c of the frame: every band's column c, top to bottom.
  auto column = [&](int64_t c) {
    std::vector<torch::Tensor> parts;
    for (auto& out : outputs) parts.push_back(out[static_cast<size_t>(c)].to(out_device));
    return torch::cat(parts, 3);
  };
  if (!columns_.tiled()) return column(0);
  if (!blend_) blend_ = std::make_unique<TileBlend>(columns_, encode ? 1 : factor, out_device, model.dtype());
  for (int64_t c = 0; c < columns_.cols; ++c) blend_->add(static_cast<size_t>(c), column(c));
  return blend_->take();
}

}  // namespace vaecodec::core
