#include "core/band_split.h"

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include <ATen/cuda/PeerToPeerAccess.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "core/device/memory_faults.h"
#include "core/error.h"

namespace vaecodec::core {

// A thread of the band pool (Note [Band threads]): runs one posted job at a time.
struct BandWorker {
  std::mutex mutex;
  std::condition_variable changed;
  std::function<void()> job;
  bool busy = false;  // a job posted and not finished
  // Guarded by the pool's mutex (BandThreads): held by a BandSet, and the device it last served.
  bool taken = false;
  std::optional<torch::Device> last;
  void loop() {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      changed.wait(lock, [&] { return static_cast<bool>(job); });
      auto run = std::move(job);
      job = nullptr;
      lock.unlock();
      run();  // serve() catches what its bands throw
      run = nullptr;
      lock.lock();
      busy = false;
      changed.notify_all();
    }
  }
  void post(std::function<void()> f) {
    std::lock_guard<std::mutex> lock(mutex);
    job = std::move(f);
    busy = true;
    changed.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return !busy; });
  }
};

namespace {

thread_local BandContext* tls_band = nullptr;

// Note [Copies between GPUs]
// A band that needs another GPU's tensor copies it itself, on its own stream, after an event: the sender's
// thread records `made` on its stream when it posts, the receiver's stream waits for that event and runs one
// cudaMemcpyPeerAsync of the dense tensor, and the sender's allocator is told that the receiver's stream uses
// the source (recordStream), so that the sender's later work cannot reuse that memory before the copy has
// read it. The sender's stream never waits for the receiver. LibTorch's own copy between devices (Tensor::to)
// would not do: it queues the copy on the *source* device's current stream, whatever thread asks, after a
// two-way barrier between both devices' streams. Asked by the receiving band's thread, that lands the copy
// after whatever the sending band has queued since it posted, often its next layer, and makes the receiver
// wait for that layer too: every exchange would then let one GPU run while the other waits, and a split on
// two GPUs was slower than one GPU alone (6.92 s against 2.16 s for 720p x17 on two H200s, 2026-11-23).
// With the bands on streams of their own (Note [Band streams]) it would also be wrong: it orders the copy
// after the receiving thread's current stream of the source GPU, not after the sending band's stream, and a
// split decode that used it gave NaN against the one-GPU run (two H200s, 2026-11-24).
// Everything posted is dense, so the copy is one plain memcpy, never a strided kernel reading another GPU.
// The first run on two H200s also failed with "an illegal memory access" in 2 of 3 runs, while the same
// exchanges passed the two-GPU tests, which run without the expandable segments the CLI turns on
// (app/cli.cpp): a split run now uses LibTorch's plain caching allocator (app/devices.h,
// use_plain_allocator_for_peers()), and peer access between the split's GPUs is enabled when the split is
// made (BandSet), not during the first copy while other threads allocate. With both, no run on two H200s has
// failed since (2026-11-24: the GPU tests and every split bench).

// Note [Band streams]
// Each band's thread queues its work on a stream of its own from LibTorch's pool, not on the device's default
// stream: the default stream is CUDA's legacy stream, which orders itself against every other stream of its
// device, and run() (another thread) queues the chunk's input copies and the outputs' gathering on it. The
// hand-overs are explicit: run() records `inputs_ready_` after the input copies and the band's stream waits
// for it; the band records `outputs_made_` after its last layer and run()'s stream waits for it; each side
// tells the allocator that the other's stream uses the tensors it hands over (recordStream), so that memory
// freed by one thread is not reused by the other's stream while still read. (On the default streams instead,
// a split 720p decode on two H200s took 3.79 s against 3.38 s, before Note [Band threads].)

// Note [Band threads]
// LibTorch keeps cuDNN's chosen kernels (and its execution plans) per thread. A band's thread made for each
// split run would start with none, so every run would time every convolution shape again (with cuDNN's
// timing on) or ask cuDNN's heuristics again: on two H200s that idled each GPU half of a 720p decode, in
// gaps of 40-85 ms. So the bands run on threads kept for the process: a set takes an idle thread that last
// served its device where there is one, makes a new one where there is not, and hands it back when it is
// destroyed. The threads wait idle for the rest of the process (never joined: the pool is never destroyed,
// so no thread outlives the libraries it uses at exit).
class BandThreads {
 public:
  static BandThreads& get() {
    static BandThreads* pool = new BandThreads;
    return *pool;
  }
  BandWorker* acquire(const torch::Device& device) {
    std::lock_guard<std::mutex> lock(mutex_);
    BandWorker* pick = nullptr;
    for (auto& w : workers_)
      if (!w->taken && w->last == device) {
        pick = w.get();
        break;
      }
    if (!pick) {
      workers_.push_back(std::make_unique<BandWorker>());
      pick = workers_.back().get();
      std::thread([pick] { pick->loop(); }).detach();
    }
    pick->taken = true;
    pick->last = device;
    return pick;
  }
  void release(BandWorker* w) {
    std::lock_guard<std::mutex> lock(mutex_);
    w->taken = false;
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<BandWorker>> workers_;
};

std::mutex traffic_mutex;
std::map<std::string, int64_t> traffic;

// Posted tensor `t` of `from` on this band's device: `t` itself on the same device, else a copy, counted as
// traffic.
torch::Tensor received(const BandContext& c, const BandPost& from, const torch::Tensor& t) {
  if (t.device() == c.device) {
    // Another band of this GPU made it on its own stream (Note [Band streams]).
    if (t.is_cuda() && from.made && t.numel() > 0) {
      const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(c.device.index());
      from.made->block(stream);
      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream);
    }
    return t;
  }
  {
    std::lock_guard<std::mutex> lock(traffic_mutex);
    traffic[c.device.str()] += static_cast<int64_t>(t.nbytes());
  }
  if (!t.is_cuda() || !c.device.is_cuda() || t.numel() == 0) return t.to(c.device);
  if (!t.is_contiguous()) throw Error("a band posted a tensor that is not dense");
  const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(c.device.index());
  if (from.made) from.made->block(stream);
  auto out = torch::empty(t.sizes(), t.options().device(c.device));
  C10_CUDA_CHECK(cudaMemcpyPeerAsync(out.data_ptr(), c.device.index(), t.data_ptr(), t.device().index(),
                                     t.nbytes(), stream.stream()));
  c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream);
  return out;
}

// What a band throws when another band failed: the other band's error is the one reported.
class BandAborted : public Error {
 public:
  BandAborted() : Error("another band of the split run failed") {}
};

BandContext& band_or_throw(const char* what) {
  BandContext* c = current_band();
  if (!c) throw Error(std::string(what) + " outside a band of a split run");
  return *c;
}

// Posts dense copies of `mine` (the band never writes them again, so a copy another GPU makes later reads
// what was posted) with the event that says when this band's stream has made them.
const std::vector<BandPost>& exchange(BandContext& c, const std::vector<torch::Tensor>& mine) {
  BandPost post;
  for (const auto& t : mine) post.tensors.push_back(t.clone(at::MemoryFormat::Contiguous));
  if (c.device.is_cuda()) {
    post.made = std::make_shared<at::cuda::CUDAEvent>();
    post.made->record(c10::cuda::getCurrentCUDAStream(c.device.index()));
  }
  return c.link->exchange(c.band, c.step++, std::move(post));
}

}  // namespace

std::vector<BandRows> band_rows(int64_t latent_height, int64_t bands) {
  if (bands < 1) throw Error("a split run needs at least one band");
  if (latent_height < bands)
    throw Error("a frame of " + std::to_string(latent_height) + " latent rows cannot be split into " +
                std::to_string(bands) + " bands of at least one row each");
  std::vector<BandRows> rows(bands);
  const int64_t base = latent_height / bands, taller = latent_height % bands;
  int64_t first = 0;
  for (int64_t i = 0; i < bands; ++i) {
    rows[i] = {first, base + (i < taller ? 1 : 0)};
    first += rows[i].count;
  }
  return rows;
}

PlanRequest band_plan_request(const PlanRequest& whole, int64_t bands) {
  const int64_t f = whole.spatial_factor;
  const int64_t latent_height = whole.height / f;
  const int64_t tallest = band_rows(latent_height, bands).front().count;
  PlanRequest band = whole;
  band.height = std::min(latent_height, tallest + 2) * f;
  return band;
}

Plan plan_band_run(const PlanRequest& whole, int64_t bands, PlannerOptions options) {
  const int64_t f = whole.spatial_factor, latent_height = whole.height / f, latent_width = whole.width / f;
  const PlanRequest band = band_plan_request(whole, bands);
  const int64_t overlap = options.tile_overlap;
  // The column widths to try, widest first: the whole frame, then 2, 3, ... columns down to min_tile.
  std::vector<int64_t> widths;
  if (options.tile) {
    widths.push_back(options.tile->width);
  } else {
    widths.push_back(latent_width);
    for (int64_t n = 2; options.tiling; ++n) {
      const int64_t width = (latent_width + (n - 1) * overlap + n - 1) / n;  // n columns sharing `overlap`
      if (width < options.min_tile || width <= overlap) break;
      if (width < widths.back()) widths.push_back(width);
    }
  }
  options.tiling = false;
  options.offload = false;
  std::string refusal;
  for (const int64_t width : widths) {
    if (width < latent_width)
      options.tile = TileSize{band.height / f, width};
    else
      options.tile.reset();
    try {
      Plan plan = plan_run(band, options);
      plan.tiles = width < latent_width
                       ? TileGrid::cover(latent_height, latent_width, {latent_height, width}, overlap)
                       : TileGrid::whole(latent_height, latent_width);
      return plan;
    } catch (const Error& e) {
      refusal = e.what();
    }
  }
  throw Error(refusal);
}

BandLink::BandLink(int64_t bands) : bands_(bands) {
  for (auto& p : posted_) p.resize(bands);
}

const std::vector<BandPost>& BandLink::exchange(int64_t band, int64_t step, BandPost mine) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (aborted_) throw BandAborted();
  posted_[step % 2][band] = std::move(mine);
  if (++arrived_ == bands_) {
    arrived_ = 0;
    completed_ = step;
    // Every band has reached this step, so every band is done reading the previous one's posts: let their
    // tensors go (they may hold whole activations alive).
    for (auto& p : posted_[(step + 1) % 2]) p = {};
    changed_.notify_all();
  } else {
    changed_.wait(lock, [&] { return aborted_ || completed_ >= step; });
    if (aborted_) throw BandAborted();
  }
  // Not changed before this band's next call: the next writes to this parity come two steps on.
  return posted_[step % 2];
}

void BandLink::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  aborted_ = true;
  changed_.notify_all();
}

BandContext* current_band() {
  return tls_band;
}

std::map<std::string, int64_t> band_traffic() {
  std::lock_guard<std::mutex> lock(traffic_mutex);
  return traffic;
}

void reset_band_traffic() {
  std::lock_guard<std::mutex> lock(traffic_mutex);
  traffic.clear();
}

BandScope::BandScope(BandLink& link, int64_t band, torch::Device device) : previous_(tls_band) {
  context_.link = &link;
  context_.band = band;
  context_.device = device;
  tls_band = &context_;
}

BandScope::~BandScope() {
  tls_band = previous_;
}

void fill_halo(const torch::Tensor& whole, int64_t top, int64_t bottom) {
  BandContext& c = band_or_throw("fill_halo");
  const int64_t rows = whole.size(3) - top - bottom;
  if (rows < std::max(top, bottom))
    throw Error("a band of " + std::to_string(rows) + " rows is narrower than its convolution's margin");
  // The band above reads this band's first `bottom` interior rows, the band below its last `top`: posted as
  // dense copies, so that a band on another GPU fetches them with one plain peer copy (Note [Copies between
  // GPUs]).
  const auto& posted = exchange(c, {whole.narrow(3, top, bottom), whole.narrow(3, top + rows - top, top)});
  if (top > 0) {
    auto above = whole.narrow(3, 0, top);
    if (c.band == 0) {
      above.zero_();
    } else {
      const BandPost& from = posted[c.band - 1];
      above.copy_(received(c, from, from.tensors[1]));
    }
  }
  if (bottom > 0) {
    auto below = whole.narrow(3, top + rows, bottom);
    if (c.band + 1 == c.bands()) {
      below.zero_();
    } else {
      const BandPost& from = posted[c.band + 1];
      below.copy_(received(c, from, from.tensors[0]));
    }
  }
}

torch::Tensor with_halo(const torch::Tensor& x, int64_t top, int64_t bottom) {
  auto sizes = x.sizes().vec();
  sizes[3] += top + bottom;
  auto whole = torch::empty(sizes, x.options().memory_format(x.suggest_memory_format()));
  whole.narrow(3, top, x.size(3)).copy_(x);
  fill_halo(whole, top, bottom);
  return whole;
}

std::vector<std::vector<torch::Tensor>> gather_bands(const std::vector<torch::Tensor>& mine) {
  BandContext& c = band_or_throw("gather_bands");
  const auto& posted = exchange(c, mine);
  std::vector<std::vector<torch::Tensor>> all(posted.size());
  for (size_t b = 0; b < posted.size(); ++b)
    for (const auto& t : posted[b].tensors) all[b].push_back(received(c, posted[b], t));
  return all;
}

std::vector<torch::Tensor> concat_bands(const std::vector<torch::Tensor>& mine, int64_t dim) {
  const auto all = gather_bands(mine);
  std::vector<torch::Tensor> out;
  for (size_t i = 0; i < mine.size(); ++i) {
    std::vector<torch::Tensor> parts;
    for (const auto& band : all) parts.push_back(band.at(i));
    out.push_back(torch::cat(parts, dim));
  }
  return out;
}

BandSet::BandSet(std::vector<BandPlace> places, Device& out_device, Direction direction,
                 const TileGrid& columns)
    : out_device_(out_device), direction_(direction), columns_(columns) {
  if (columns_.rows != 1)
    throw Error("a split run cuts its bands into columns, not into " + std::to_string(columns_.rows) +
                " rows of tiles");
  const auto rows = band_rows(columns_.latent_height, static_cast<int64_t>(places.size()));
  std::set<VaeModel*> models;
  for (size_t i = 0; i < places.size(); ++i) {
    const BandPlace& p = places[i];
    if (!p.model || !p.device) throw Error("a band of a split run has no model or no device");
    if (!models.insert(p.model).second) throw Error("two bands of a split run share one model");
    if (p.model->device() != p.device->torch_device())
      throw Error("band " + std::to_string(i) + "'s model is on " + p.model->device().str() +
                  ", the band on " + p.device->torch_device().str());
    bands_.push_back({p, rows[i], std::vector<CausalCache>(static_cast<size_t>(columns_.cols))});
  }
  inputs_ready_ = std::vector<at::cuda::CUDAEvent>(bands_.size());
  outputs_made_ = std::vector<at::cuda::CUDAEvent>(bands_.size());
  // Peer access between every two GPUs of the split, both ways, once and before any band runs, rather than by
  // LibTorch's first copy between them while the other bands' threads allocate (Note [Copies between GPUs]).
  for (const Band& a : bands_)
    for (const Band& b : bands_) {
      const torch::Device da = a.place.device->torch_device(), db = b.place.device->torch_device();
      if (da.is_cuda() && db.is_cuda() && da != db) at::cuda::get_p2p_access(da.index(), db.index());
    }
}

int64_t BandSet::cache_bytes() const {
  int64_t n = 0;
  for (const auto& b : bands_)
    for (const auto& c : b.caches) n += c.bytes();
  return n;
}

BandSet::~BandSet() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (BandWorker* w : workers_) {
    w->wait();
    BandThreads::get().release(w);
  }
}

void BandSet::serve(size_t i) {
  const torch::Device device = bands_[i].place.device->torch_device();
  c10::InferenceMode inference;
  std::optional<c10::cuda::CUDAGuard> on_device;
  std::optional<c10::cuda::CUDAStreamGuard> on_stream;
  if (device.is_cuda()) {
    on_device.emplace(device);
    on_stream.emplace(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index()));
  }
  int64_t done = 0;
  while (true) {
    BandLink* link = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, [&] { return stopping_ || chunk_ > done; });
      if (stopping_) return;
      done = chunk_;
      link = link_;
    }
    std::exception_ptr error;
    try {
      run_band(i, *link);
    } catch (...) {
      error = std::current_exception();
      link->abort();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    errors_[i] = error;
    if (++finished_ == bands_.size()) finished_all_.notify_all();
  }
}

void BandSet::run_band(size_t i, BandLink& link) {
  Band& band = bands_[i];
  VaeModel& model = *band.place.model;
  const torch::Device device = band.place.device->torch_device();
  BandScope scope(link, static_cast<int64_t>(i), device);
  // The inputs were made on run()'s stream (Note [Band streams]).
  if (device.is_cuda()) {
    const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(device.index());
    inputs_ready_[i].block(stream);
    for (const torch::Tensor& part : inputs_[i])
      c10::cuda::CUDACachingAllocator::recordStream(part.storage().data_ptr(), stream);
  }
  std::vector<torch::Tensor> outs;
  for (int64_t c = 0; c < columns_.cols; ++c) {
    const torch::Tensor& part = inputs_[i][static_cast<size_t>(c)];
    CausalCache& cache = band.caches[static_cast<size_t>(c)];
    outs.push_back(direction_ == Direction::kEncode ? model.encode(part, cache) : model.decode(part, cache));
  }
  if (device.is_cuda()) outputs_made_[i].record(c10::cuda::getCurrentCUDAStream(device.index()));
  std::lock_guard<std::mutex> lock(mutex_);
  outputs_[i] = std::move(outs);
}

torch::Tensor BandSet::run(const torch::Tensor& x) {
  const VaeModel& model = *bands_.front().place.model;
  const int64_t factor = model.info().spatial_factor;
  const bool encode = direction_ == Direction::kEncode;
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
  BandLink link(static_cast<int64_t>(n));
  std::vector<std::vector<torch::Tensor>> outputs;
  std::vector<std::exception_ptr> errors;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (workers_.empty()) {
      outputs_.assign(n, {});
      errors_.assign(n, nullptr);
      // Note [Band threads]
      for (size_t i = 0; i < n; ++i) {
        auto* w = BandThreads::get().acquire(bands_[i].place.device->torch_device());
        workers_.push_back(w);
        w->post([this, i] { serve(i); });
      }
    }
    inputs_.swap(inputs);
    link_ = &link;
    finished_ = 0;
    ++chunk_;
    start_.notify_all();
    finished_all_.wait(lock, [&] { return finished_ == n; });
    outputs.swap(outputs_);
    errors.swap(errors_);
    outputs_.assign(n, {});
    errors_.assign(n, nullptr);
    inputs_.clear();
    link_ = nullptr;
  }
  // The first band's own failure, not the others' report of it.
  for (const auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const BandAborted&) {
      continue;
    }
  }
  for (const auto& e : errors)
    if (e) throw Error("a band of the split run stopped without saying why");
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
