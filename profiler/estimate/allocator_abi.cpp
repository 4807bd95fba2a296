// The estimate's allocator behind a C interface (allocator_abi.h).
#include "profiler/estimate/allocator_abi.h"

#include <cstring>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

#include "profiler/replay/replay.h"
#include "tensorlib/memory/caching_allocator.h"
#include "tensorlib/memory/fake_device.h"
#include "tensorlib/memory/oom.h"
#include "tensorlib/memory/stats.h"

namespace {

namespace ev = tidemark::events;

// What no device has: the capacity when none is given.
constexpr uint64_t kUnlimited = uint64_t{1} << 50;

class Events final : public ev::Sink {
 public:
  void on_event(const ev::Event& e) noexcept override {
    tidemark_estimate_event out{};
    out.kind = static_cast<uint64_t>(e.kind);
    switch (e.kind) {
      case ev::Kind::oom:
      case ev::Kind::alloc_retry:
      case ev::Kind::empty_cache:
        out.size = e.allocator.requested_size;
        out.stream = e.allocator.stream;
        out.device_free = e.allocator.device_free;
        break;
      default:
        out.addr = e.block.addr;
        out.size = e.block.size;
        out.requested_size = e.block.requested_size;
        out.stream = e.block.stream;
        break;
    }
    pending.push_back(out);
  }
  std::deque<tidemark_estimate_event> pending;
};

struct Estimate {
  Events events;
  std::unique_ptr<tl::memory::CachingAllocator> allocator;
  std::unordered_map<uint64_t, tl::memory::DataPtr> live;  // by address
};

void copy_error(const std::string& message, char* error, size_t size) {
  if (!error || size == 0) return;
  const size_t n = std::min(message.size(), size - 1);
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

size_t copy_text(const std::string& text, char* out, size_t n) {
  if (out && n) std::memcpy(out, text.data(), std::min(n, text.size()));
  return text.size();
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void* tidemark_estimate_open(uint64_t capacity,
                                                                    const char* alloc_conf,
                                                                    char* error,
                                                                    size_t error_size) {
  try {
    const tidemark::replay::AllocConf conf =
        tidemark::replay::parse_alloc_conf(alloc_conf ? alloc_conf : "");
    auto device = std::make_unique<tl::memory::FakeDevice>(capacity ? capacity : kUnlimited);
    device->set_supports_expandable(true);
    auto e = std::make_unique<Estimate>();
    e->allocator = std::make_unique<tl::memory::CachingAllocator>(std::move(device), conf.config);
    e->allocator->set_event_sink(&e->events);
    return e.release();
  } catch (const std::exception& ex) {
    copy_error(ex.what(), error, error_size);
    return nullptr;
  }
}

__attribute__((visibility("default"))) void tidemark_estimate_close(void* allocator) {
  auto* e = static_cast<Estimate*>(allocator);
  if (!e) return;
  e->allocator->set_event_sink(nullptr);
  delete e;
}

__attribute__((visibility("default"))) int tidemark_estimate_alloc(void* allocator, uint64_t size,
                                                                   uint64_t stream, uint64_t* addr,
                                                                   char* error, size_t error_size) {
  auto* e = static_cast<Estimate*>(allocator);
  *addr = 0;
  if (size == 0) return 0;
  try {
    tl::memory::DataPtr p = e->allocator->allocate(size, stream);
    *addr = reinterpret_cast<uint64_t>(p.ptr);
    e->live[*addr] = p;
    return 0;
  } catch (const tl::OutOfMemoryError& ex) {
    copy_error(ex.what(), error, error_size);
    return 1;
  } catch (const std::exception& ex) {
    copy_error(ex.what(), error, error_size);
    return 2;
  }
}

__attribute__((visibility("default"))) void tidemark_estimate_free(void* allocator, uint64_t addr) {
  auto* e = static_cast<Estimate*>(allocator);
  auto it = e->live.find(addr);
  if (it == e->live.end()) return;
  e->allocator->deallocate(it->second);
  e->live.erase(it);
}

__attribute__((visibility("default"))) int tidemark_estimate_empty_cache(void* allocator) {
  try {
    static_cast<Estimate*>(allocator)->allocator->empty_cache();
    return 0;
  } catch (const std::exception&) {
    return 2;
  }
}

__attribute__((visibility("default"))) void tidemark_estimate_reset_peak(void* allocator) {
  static_cast<Estimate*>(allocator)->allocator->reset_peak_stats();
}

__attribute__((visibility("default"))) size_t tidemark_estimate_take_events(
    void* allocator, tidemark_estimate_event* out, size_t n) {
  auto& pending = static_cast<Estimate*>(allocator)->events.pending;
  size_t taken = 0;
  for (; taken < n && !pending.empty(); ++taken) {
    out[taken] = pending.front();
    pending.pop_front();
  }
  return taken;
}

__attribute__((visibility("default"))) size_t tidemark_estimate_stats_json(void* allocator,
                                                                           char* out, size_t n) {
  const auto stats = tl::memory::flat_stats(static_cast<Estimate*>(allocator)->allocator->stats());
  return copy_text(nlohmann::json(stats).dump(), out, n);
}

__attribute__((visibility("default"))) size_t tidemark_estimate_segments_json(void* allocator,
                                                                              char* out, size_t n) {
  const tl::memory::Snapshot s = static_cast<Estimate*>(allocator)->allocator->snapshot();
  nlohmann::json segments = nlohmann::json::array();
  for (const tl::memory::SegmentSnapshot& seg : s.segments) {
    nlohmann::json blocks = nlohmann::json::array();
    for (const tl::memory::BlockSnapshot& b : seg.blocks)
      blocks.push_back({{"address", b.address},
                        {"size", b.size},
                        {"requested_size", b.requested_size},
                        {"state", std::string(tl::memory::block_state_name(b.state))}});
    segments.push_back({{"address", seg.address},
                        {"total_size", seg.total_size},
                        {"allocated_size", seg.allocated_size},
                        {"active_size", seg.active_size},
                        {"requested_size", seg.requested_size},
                        {"stream", seg.stream},
                        {"segment_type", std::string(seg.segment_type())},
                        {"is_expandable", seg.is_expandable},
                        {"blocks", std::move(blocks)}});
  }
  return copy_text(segments.dump(), out, n);
}

}  // extern "C"
