#include "core/stage_timer.h"

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>

#include "core/flops.h"

namespace vaecodec::core {
namespace {

struct Record {
  std::string name;
  bool cuda = false;
  std::unique_ptr<at::cuda::CUDAEvent> begin, end;
  std::chrono::steady_clock::time_point host_begin, host_end;
  int64_t flops_begin = 0, flops_end = 0;
};

std::atomic<bool> timing{false};
std::atomic<bool> timing_cuda{false};
std::mutex records_mutex;
std::vector<Record> records;

}  // namespace

void StageTimer::start(bool cuda) {
  std::lock_guard lock(records_mutex);
  records.clear();
  timing_cuda.store(cuda);
  timing.store(true);
}

bool StageTimer::enabled() {
  return timing.load(std::memory_order_relaxed);
}

std::vector<StageTimer::Stage> StageTimer::finish() {
  timing.store(false);
  std::lock_guard lock(records_mutex);
  std::vector<Stage> stages;
  std::map<std::string, size_t> index;
  for (auto& r : records) {
    double ms = 0;
    if (r.cuda) {
      r.end->synchronize();
      ms = r.begin->elapsed_time(*r.end);
    } else {
      ms = std::chrono::duration<double, std::milli>(r.host_end - r.host_begin).count();
    }
    auto [it, fresh] = index.try_emplace(r.name, stages.size());
    if (fresh) stages.push_back({r.name});
    Stage& s = stages[it->second];
    s.ms += ms;
    s.flops += static_cast<double>(r.flops_end - r.flops_begin);
    ++s.calls;
  }
  records.clear();
  return stages;
}

StageScope::StageScope(const char* prefix, int64_t index) {
  if (!StageTimer::enabled()) return;
  Record r;
  r.name = index >= 0 ? std::string(prefix) + "." + std::to_string(index) : std::string(prefix);
  r.cuda = timing_cuda.load();
  r.flops_begin = FlopCounter::total();
  if (r.cuda) {
    r.begin = std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault);
    r.end = std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault);
    r.begin->record();
  } else {
    r.host_begin = std::chrono::steady_clock::now();
  }
  std::lock_guard lock(records_mutex);
  record_ = static_cast<int64_t>(records.size());
  records.push_back(std::move(r));
}

StageScope::~StageScope() {
  if (record_ < 0) return;
  std::lock_guard lock(records_mutex);
  if (static_cast<size_t>(record_) >= records.size()) return;  // finish() ran in between
  Record& r = records[record_];
  r.flops_end = FlopCounter::total();
  if (r.cuda)
    r.end->record();
  else
    r.host_end = std::chrono::steady_clock::now();
}

}  // namespace vaecodec::core
