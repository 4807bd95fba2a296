// Helpers of the GPU tests: the skip when no CUDA device answers, and a sink that keeps the
// events a test looks at.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "profiler/events/events.h"

namespace tl::gpu_test {

namespace ev = tidemark::events;

inline bool has_cuda_device() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return n > 0;
}

#define TL_REQUIRE_GPU()                                                               \
  do {                                                                                 \
    if (!::tl::gpu_test::has_cuda_device())                                            \
      GTEST_SKIP() << "no CUDA device: GPU check not run (tests/gpu/run.sh on a GPU)"; \
  } while (0)

struct Seen {
  ev::Kind kind;
  ev::SyncInfo sync{};
  ev::MemcpyInfo memcpy{};
  ev::BlockInfo block{};
  ev::DeviceId device{};
};

class EventLog final : public ev::Sink {
 public:
  EventLog() { ev::add_sink(this); }
  ~EventLog() override { ev::remove_sink(this); }
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  void on_event(const ev::Event& e) noexcept override {
    Seen s{e.kind};
    s.device = e.device;
    if (e.kind == ev::Kind::sync) s.sync = e.sync;
    if (e.kind == ev::Kind::memcpy) s.memcpy = e.memcpy;
    if (e.kind == ev::Kind::alloc || e.kind == ev::Kind::free_requested ||
        e.kind == ev::Kind::free_completed || e.kind == ev::Kind::segment_alloc ||
        e.kind == ev::Kind::segment_free || e.kind == ev::Kind::segment_map ||
        e.kind == ev::Kind::segment_unmap)
      s.block = e.block;
    std::lock_guard<std::mutex> lock(mu_);
    seen_.push_back(s);
  }
  std::vector<Seen> of(ev::Kind k) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Seen> out;
    for (const Seen& s : seen_)
      if (s.kind == k) out.push_back(s);
    return out;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    seen_.clear();
  }

 private:
  mutable std::mutex mu_;
  std::vector<Seen> seen_;
};

}  // namespace tl::gpu_test
