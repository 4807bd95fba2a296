#include "interpose/activity.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

#include "interpose/callbacks.h"
#include "interpose/cupti_api.h"
#include "interpose/session.h"
#include "profiler/record/recorder.h"

namespace tidemark::interpose::activity {

namespace ev = tidemark::events;

// The record layouts this file reads (CUPTI 13.0; cupti_activity.h). A toolkit whose records
// differ fails to build here rather than misreading them.
static_assert(sizeof(CUpti_ActivityMemory4) == 128);
static_assert(offsetof(CUpti_ActivityMemory4, correlationId) == 12);
static_assert(offsetof(CUpti_ActivityMemory4, address) == 16);
static_assert(offsetof(CUpti_ActivityMemory4, timestamp) == 32);
static_assert(offsetof(CUpti_ActivityMemory4, streamId) == 60);
static_assert(offsetof(CUpti_ActivityMemory4, memoryPoolConfig) == 80);
static_assert(sizeof(CUpti_ActivityMemoryPool3) == 80);
static_assert(offsetof(CUpti_ActivityMemoryPool3, correlationId) == 12);
static_assert(offsetof(CUpti_ActivityMemoryPool3, address) == 32);
static_assert(offsetof(CUpti_ActivityMemoryPool3, size) == 40);
static_assert(sizeof(CUpti_ActivityMemcpy6) == 96);
static_assert(offsetof(CUpti_ActivityMemcpy6, bytes) == 8);
static_assert(offsetof(CUpti_ActivityMemcpy6, streamId) == 40);
static_assert(offsetof(CUpti_ActivityMemcpy6, correlationId) == 44);
static_assert(sizeof(CUpti_ActivityMemset4) == 88);
static_assert(offsetof(CUpti_ActivityMemset4, contextId) == 36);
static_assert(sizeof(CUpti_ActivitySynchronization2) == 56);
static_assert(offsetof(CUpti_ActivitySynchronization2, correlationId) == 24);
static_assert(offsetof(CUpti_ActivitySynchronization2, streamId) == 32);
static_assert(sizeof(CUpti_ActivityMarker2) == 56);

namespace {

constexpr auto kFlushPeriod = std::chrono::milliseconds(500);
constexpr const char* kDroppedMark = "cupti_dropped_records";

ev::Event make(ev::Kind kind, uint64_t ts, ev::DeviceId device) {
  ev::Event e;
  e.kind = kind;
  e.ts_ns = ts;
  e.device = device;
  return e;
}

ev::DeviceId cuda(uint32_t index) {
  return {ev::DeviceType::cuda, static_cast<int8_t>(index)};
}

uint64_t stream_of(uint32_t id) {
  return id == CUPTI_INVALID_STREAM_ID ? 0 : id;
}

bool host_kind(uint32_t memory_kind) {
  return memory_kind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE ||
         memory_kind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
}

ev::CopyDirection direction(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return ev::CopyDirection::host_to_device;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return ev::CopyDirection::device_to_host;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return ev::CopyDirection::host_to_host;
    default:  // DTOD, ATOA, ATOD, DTOA, PTOP
      return ev::CopyDirection::device_to_device;
  }
}

template <typename K, typename V>
V* find(std::vector<std::pair<K, V>>& v, const K& k) {
  for (auto& [key, value] : v)
    if (key == k) return &value;
  return nullptr;
}

template <typename K, typename V>
void erase(std::vector<std::pair<K, V>>& v, const K& k) {
  std::erase_if(v, [&](const auto& p) { return p.first == k; });
}

}  // namespace

void Parser::reconcile_pool(uint32_t device, uint64_t pool, uint64_t size, uint64_t t,
                            std::vector<ev::Event>& out) {
  // A stream-ordered pool is one address range whose physical backing grows and shrinks: its
  // reserved bytes are a mapped range of the pool, as PyTorch's expandable segments are.
  PoolKey key{device, pool};
  uint64_t* mapped = find(pools_, key);
  uint64_t current = mapped ? *mapped : 0;
  if (size == current) return;
  ev::Event e =
      make(size > current ? ev::Kind::segment_map : ev::Kind::segment_unmap, t, cuda(device));
  e.block.addr = pool + std::min(size, current);
  e.block.size = size > current ? size - current : current - size;
  e.block.segment = pool;
  e.block.pool = ev::Pool::large;
  out.push_back(e);
  if (mapped)
    *mapped = size;
  else
    pools_.push_back({key, size});
}

void Parser::parse(const CUpti_Activity* record, std::vector<Parsed>& out) {
  scratch_.clear();
  parse_record(record, scratch_);
  uint32_t correlation = 0;
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_MEMORY2:
      correlation = reinterpret_cast<const CUpti_ActivityMemory4*>(record)->correlationId;
      break;
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
      correlation = reinterpret_cast<const CUpti_ActivityMemoryPool3*>(record)->correlationId;
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      correlation = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record)->correlationId;
      break;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      correlation = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record)->correlationId;
      break;
    default:
      break;
  }
  for (const ev::Event& e : scratch_) out.push_back({e, correlation});
}

void Parser::parse_record(const CUpti_Activity* record, std::vector<ev::Event>& out) {
  ++records;
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      const auto& r = *reinterpret_cast<const CUpti_ActivityMemory4*>(record);
      const uint64_t t = ts(r.timestamp);
      const bool host = host_kind(r.memoryKind);
      const ev::DeviceId device = host ? ev::DeviceId{} : cuda(r.deviceId);
      const bool alloc = r.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
      if (!alloc && r.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
        ++ignored;
        return;
      }
      const auto pool_type = r.memoryPoolConfig.memoryPoolType;
      if (pool_type != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID && !host) {
        // cudaMallocAsync: a block of a pool (allocated), the pool's growth (reserved).
        const uint64_t pool = r.memoryPoolConfig.address;
        const bool local = pool_type == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
        if (alloc && local) reconcile_pool(r.deviceId, pool, r.memoryPoolConfig.pool.size, t, out);
        ev::Event e = make(alloc ? ev::Kind::alloc : ev::Kind::free_requested, t, device);
        e.block.addr = r.address;
        e.block.size = r.bytes;
        e.block.requested_size = r.bytes;
        e.block.stream = stream_of(r.streamId);
        e.block.segment = pool;
        e.block.pool = ev::Pool::large;
        out.push_back(e);
        if (!alloc) {
          e.kind = ev::Kind::free_completed;
          out.push_back(e);
          if (local) reconcile_pool(r.deviceId, pool, r.memoryPoolConfig.pool.size, t, out);
        }
        return;
      }
      // cudaMalloc, cudaMallocHost, cudaMallocManaged, ...: memory reserved from the driver.
      PoolKey key{host ? ~0u : r.deviceId, r.address};
      uint64_t bytes = r.bytes;
      if (alloc) {
        segments_.push_back({key, bytes});
      } else {
        if (uint64_t* known = find(segments_, key); known && bytes == 0) bytes = *known;
        erase(segments_, key);
      }
      ev::Event e = make(alloc ? ev::Kind::segment_alloc : ev::Kind::segment_free, t, device);
      e.block.addr = r.address;
      e.block.size = bytes;
      e.block.stream = stream_of(r.streamId);
      e.block.segment = r.address;
      e.block.pool = ev::Pool::large;
      out.push_back(e);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL: {
      const auto& r = *reinterpret_cast<const CUpti_ActivityMemoryPool3*>(record);
      if (r.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL) {
        ++ignored;
        return;
      }
      const uint64_t t = ts(r.timestamp);
      if (r.memoryPoolOperationType == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED) {
        reconcile_pool(r.deviceId, r.address, 0, t, out);
        erase(pools_, PoolKey{r.deviceId, r.address});
      } else {
        reconcile_pool(r.deviceId, r.address, r.size, t, out);
      }
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto& r = *reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      if (!find(contexts_, r.contextId)) contexts_.push_back({r.contextId, r.deviceId});
      ev::Event e = make(ev::Kind::memcpy, ts(r.start), cuda(r.deviceId));
      e.memcpy.direction = direction(r.copyKind);
      e.memcpy.bytes = r.bytes;
      e.memcpy.stream = stream_of(r.streamId);
      const uint8_t host_side =
          e.memcpy.direction == ev::CopyDirection::device_to_host ? r.dstKind : r.srcKind;
      e.memcpy.pinned = host_side == CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
      e.memcpy.async = (r.flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0;
      out.push_back(e);
      // Implicit syncs: the host waits for a blocking copy to the host, and for any copy
      // into pageable memory (the driver stages it and returns when it is done).
      if (e.memcpy.direction == ev::CopyDirection::device_to_host &&
          (!e.memcpy.async || r.dstKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE)) {
        ev::Event s = make(ev::Kind::sync, ts(r.end), cuda(r.deviceId));
        s.sync.kind = ev::SyncKind::copy_to_host;
        s.sync.stream = stream_of(r.streamId);
        s.sync.duration_ns = r.end > r.start ? r.end - r.start : 0;
        out.push_back(s);
      }
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto& r = *reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      if (!find(contexts_, r.contextId)) contexts_.push_back({r.contextId, r.deviceId});
      ++memsets;  // no event kind for a memset: counted only
      return;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto& r = *reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
      ev::SyncKind kind;
      switch (r.type) {
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
          kind = ev::SyncKind::event;
          break;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
          kind = ev::SyncKind::stream;
          break;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
          kind = ev::SyncKind::device;
          break;
        default:  // STREAM_WAIT_EVENT: the device waits, not the host
          ++ignored;
          return;
      }
      const uint32_t* device = find(contexts_, r.contextId);
      ev::Event e = make(ev::Kind::sync, ts(r.end), cuda(device ? *device : 0));
      e.sync.kind = kind;
      e.sync.stream = stream_of(r.streamId);
      e.sync.duration_ns = r.end > r.start ? r.end - r.start : 0;
      out.push_back(e);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MARKER: {
      // NVTX through CUPTI (NVTX_INJECTION64_PATH=libcupti): our own NVTX injection is the
      // default, this keeps such traces readable too.
      const auto& r = *reinterpret_cast<const CUpti_ActivityMarker2*>(record);
      const uint64_t t = ts(r.timestamp);
      if (r.flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
        names_.emplace_back(r.name ? r.name : "");
        ev::Event e = make(ev::Kind::mark, t, {});
        e.name.name = names_.back();
        out.push_back(e);
      } else if (r.flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
        markers_.push_back({r.id, {r.name ? r.name : "", t}});
      } else if (r.flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
        if (auto* start = find(markers_, r.id)) {
          names_.push_back(start->first);
          ev::Event e = make(ev::Kind::scope_push, start->second, {});
          e.name.name = names_.back();
          out.push_back(e);
          e.kind = ev::Kind::scope_pop;
          e.ts_ns = t;
          out.push_back(e);
          erase(markers_, r.id);
        }
      }
      return;
    }
    default:
      ++ignored;
      return;
  }
}

// ---- Buffers, the parser thread and CUPTI ----------------------------------------------------

namespace {

struct Pending {
  uint8_t* buffer;
  size_t valid;
  uint64_t dropped;  // records CUPTI dropped in this buffer's context and stream
};

struct State {
  std::mutex mu;
  std::condition_variable wake, idle;
  std::deque<Pending> queue;
  std::vector<uint8_t*> free_buffers;
  bool busy = false, stopping = false, started = false;
  std::thread thread;
  const CuptiApi* api = nullptr;  // for walking records
  std::atomic<bool> live{false};  // CUPTI is collecting: flushes reach it
  std::atomic<uint64_t> dropped{0};
  // Events from records whose call site was not (or no longer) filed, and MEMORY2 records of
  // cuMemMap & co. dropped (callbacks.h): marks at stop, so a GPU run can tell.
  std::atomic<uint64_t> without_call_site{0}, vmm_memory_records{0};
  Parser parser;
};

State& state() {
  static auto* s = new State;  // never destroyed: CUPTI may call back during exit
  return *s;
}

// Emits one buffer's events with the thread, stack and sequence numbers of the calls they came
// from (Note [Call sites]); an event without a call site gets this thread and no stack rather
// than this thread's stack, which would be wrong.
void emit(State& s, std::vector<Parser::Parsed>& events) {
  // One buffer's records are in completion order per stream; the trace wants time order.
  std::stable_sort(events.begin(), events.end(),
                   [](const auto& a, const auto& b) { return a.event.ts_ns < b.event.ts_ns; });
  callbacks::CallSite site;
  for (auto& [e, correlation] : events) {
    if (!ev::enabled()) return;
    uint64_t seq = 0;
    if (callbacks::call_site(correlation, &site, &seq)) {
      const bool segment = e.kind == ev::Kind::segment_alloc || e.kind == ev::Kind::segment_free;
      if (segment && callbacks::recorded_by_callback(site)) {  // cuMemMap & co.
        s.vmm_memory_records.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      ev::dispatch_stamped(e, site.thread, seq, site.stack());
    } else {
      if (correlation != 0) s.without_call_site.fetch_add(1, std::memory_order_relaxed);
      ev::dispatch_stamped(e, ev::current_thread_id(), ev::reserve_seq(1));
    }
  }
}

// Never throws: an exception on this thread would end the host program. A buffer that cannot
// be parsed (out of memory) loses its records, as a dropped buffer would.
void process(State& s, const Pending& p) noexcept {
  try {
    std::vector<Parser::Parsed> events;
    if (p.valid > 0 && s.api) {
      CUpti_Activity* record = nullptr;
      while (s.api->ActivityGetNextRecord(p.buffer, p.valid, &record) == CUPTI_SUCCESS)
        s.parser.parse(record, events);
    }
    if (p.dropped > 0) {
      ev::Event e = make(ev::Kind::mark, 0, {});
      e.name.name = kDroppedMark;
      e.name.value = p.dropped;
      events.push_back({e, 0});
    }
    emit(s, events);
  } catch (...) {
  }
  s.parser.clear_names();
}

void run(State& s) {
  auto last_flush = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(s.mu);
  for (;;) {
    s.wake.wait_for(lock, kFlushPeriod, [&] { return !s.queue.empty() || s.stopping; });
    if (s.queue.empty()) {
      if (s.stopping) return;
      auto now = std::chrono::steady_clock::now();
      if (now - last_flush >= kFlushPeriod && s.live.load()) {
        last_flush = now;
        lock.unlock();  // CUPTI may complete buffers on this thread, inside the flush
        s.api->ActivityFlushAll(0);
        lock.lock();
      }
      continue;
    }
    Pending p = s.queue.front();
    s.queue.pop_front();
    s.busy = true;
    lock.unlock();
    process(s, p);
    lock.lock();
    try {
      s.free_buffers.push_back(p.buffer);
    } catch (...) {  // no room to keep it for reuse
      std::free(p.buffer);
    }
    s.busy = false;
    s.idle.notify_all();
  }
}

uint64_t event_clock_ns() {
  return ev::now_ns();
}

// cudaDeviceReset destroys the context whose records are still in CUPTI's buffers.
void flush_before_reset() {
  if (state().live.load()) state().api->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

bool start_cupti(State& s) {
  const CuptiApi* api = s.api;
  auto failed = [&](const char* call, CUptiResult r) {
    std::string reason = std::string(call) + " failed: " + cupti_error(api, r);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
      reason += " (another CUPTI tool - torch.profiler, Nsight, compute-sanitizer - holds it)";
    else if (r == CUPTI_ERROR_UNKNOWN || r == CUPTI_ERROR_NOT_INITIALIZED)
      reason += " (no usable CUDA driver?)";
    warn("CUDA memory not recorded, the program runs on: " + reason);
    return false;
  };
  // One subscriber per process: a second tool is refused here, before anything is enabled.
  callbacks::configure(stack_depth(), flush_before_reset);
  CUpti_SubscriberHandle subscriber = nullptr;
  if (CUptiResult r = api->Subscribe(&subscriber, callbacks::on_api, nullptr); r != CUPTI_SUCCESS)
    return failed("cuptiSubscribe", r);
  if (callbacks::enable(*api, subscriber) == 0)
    warn("host stacks of CUDA calls not recorded: cuptiEnableCallback failed for every call");
  // Records stamped with the event clock; else mapped onto it by an offset measured now.
  if (!api->ActivityRegisterTimestampCallback ||
      api->ActivityRegisterTimestampCallback(event_clock_ns) != CUPTI_SUCCESS) {
    uint64_t cupti_now = 0;
    api->GetTimestamp(&cupti_now);
    s.parser = Parser(static_cast<int64_t>(ev::now_ns() - cupti_now));
  }
  if (CUptiResult r = api->ActivityRegisterCallbacks(buffer_requested, buffer_completed);
      r != CUPTI_SUCCESS) {
    api->Unsubscribe(subscriber);
    return failed("cuptiActivityRegisterCallbacks", r);
  }
  for (auto [kind, name] : {std::pair{CUPTI_ACTIVITY_KIND_MEMORY2, "MEMORY2"},
                            {CUPTI_ACTIVITY_KIND_MEMORY_POOL, "MEMORY_POOL"},
                            {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY"},
                            {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET"},
                            {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "SYNCHRONIZATION"}}) {
    if (CUptiResult r = api->ActivityEnable(kind); r != CUPTI_SUCCESS) {
      api->Unsubscribe(subscriber);
      return failed((std::string("cuptiActivityEnable(") + name + ")").c_str(), r);
    }
  }
  s.live.store(true);
  // CUPTI's own device buffers are device memory the program did not ask for.
  size_t device_buffer = 0, bytes = sizeof device_buffer;
  if (api->ActivityGetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &bytes, &device_buffer) ==
          CUPTI_SUCCESS &&
      ev::enabled()) {
    ev::Event e = make(ev::Kind::mark, 0, {});
    e.name.name = "cupti_device_buffer_bytes";
    e.name.value = device_buffer;
    ev::dispatch(e);
  }
  return true;
}

}  // namespace

bool start(bool with_cupti) noexcept {
  try {
    State& s = state();
    std::string why;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.started) return s.live.load() || !with_cupti;
      s.api = cupti_api(&why);
      if (!s.api) {
        warn("CUDA memory not recorded, the program runs on: " + why);
        return false;
      }
      s.started = true;
      s.thread = std::thread([&s] { run(s); });
    }
    return with_cupti ? start_cupti(s) : true;
  } catch (...) {
    warn("CUDA memory not recorded, the program runs on: cannot start the activity parser");
    return false;
  }
}

void flush() noexcept {
  State& s = state();
  if (s.live.load()) s.api->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::unique_lock<std::mutex> lock(s.mu);
  if (!s.started) return;
  s.wake.notify_one();
  s.idle.wait(lock, [&] { return s.queue.empty() && !s.busy; });
}

void stop() noexcept {
  State& s = state();
  const bool was_live = s.live.load();
  flush();
  if (was_live && ev::enabled()) {
    for (auto [name, value] :
         {std::pair{"cupti_events_without_call_site", s.without_call_site.load()},
          {"cupti_vmm_memory_records", s.vmm_memory_records.load()},
          {"cupti_call_sites_aged_out", callbacks::stats().aged_out}}) {
      if (value == 0) continue;
      ev::Event e = make(ev::Kind::mark, 0, {});
      e.name.name = name;
      e.name.value = value;
      ev::dispatch(e);
    }
  }
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.started) return;
    s.stopping = true;
    s.live.store(false);  // no periodic flushes from here on
    t = std::move(s.thread);
  }
  s.wake.notify_one();
  if (t.joinable()) t.join();
  std::lock_guard<std::mutex> lock(s.mu);
  s.started = false;
  s.stopping = false;
}

void buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) noexcept {
  State& s = state();
  uint8_t* b = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.free_buffers.empty()) {
      b = s.free_buffers.back();
      s.free_buffers.pop_back();
    }
  }
  if (!b) b = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *buffer = b;
  *size = b ? kBufferBytes : 0;  // 0: CUPTI drops records rather than write into nothing
  *max_records = 0;              // as many as fit
}

void buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t,
                      size_t valid) noexcept {
  if (!buffer) return;
  State& s = state();
  size_t dropped = 0;
  if (s.api && s.live.load() &&
      s.api->ActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS)
    s.dropped.fetch_add(dropped);
  try {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.started) {  // nobody to parse it: recycle
      s.free_buffers.push_back(buffer);
      return;
    }
    s.queue.push_back({buffer, valid, dropped});
  } catch (...) {
    return;
  }
  s.wake.notify_one();
}

uint64_t dropped_records() noexcept {
  return state().dropped.load();
}

}  // namespace tidemark::interpose::activity
