// The event contract: every producer (tensorlib, interpose, importers) describes memory
// history with these plain structs and hands them to the installed sinks. Header-only and
// dependency-free (no SQLite, Qt or CUDA), see docs/architecture.md.
//
// Note [Event lifetime]
// An Event is only valid for the duration of Sink::on_event. Spans and string views point
// into the producer's memory (a tensor's sizes, an op name); a sink that keeps anything must
// copy it. This keeps emission allocation-free.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string_view>

namespace tidemark::events {

enum class Kind : uint8_t {
  segment_alloc,    // reserved memory grows
  segment_free,     // reserved memory shrinks
  segment_map,      // expandable segment: physical memory mapped into its range
  segment_unmap,    // expandable segment: physical memory unmapped
  alloc,            // a block handed to a caller
  free_requested,   // the caller released the block (allocated bytes drop)
  free_completed,   // the block is reusable (active bytes drop)
  empty_cache,      // cached segments released on request
  alloc_retry,      // a failed segment allocation: cache freed and retried
  oom,              // an allocation failed for good
  storage_create,   // a storage (owner of one block) is born
  storage_release,  // ... and dies
  tensor_create,    // a tensor or view is born
  tensor_release,   // ... and dies
  category,         // a block's role changes
  sync,             // the host waited on the device
  memcpy,           // a host<->device copy
  scope_push,       // module path, NVTX range or user scope opens
  scope_pop,        // ... and closes
  step,             // iteration boundary
  mark,             // user annotation
  collective,       // a collective operation between processes ended (Note [Collectives])
};
inline constexpr int kNumKinds = static_cast<int>(Kind::collective) + 1;

constexpr std::string_view kind_name(Kind k) {
  constexpr std::string_view names[] = {
      "segment_alloc",  "segment_free",    "segment_map",   "segment_unmap",  "alloc",
      "free_requested", "free_completed",  "empty_cache",   "alloc_retry",    "oom",
      "storage_create", "storage_release", "tensor_create", "tensor_release", "category",
      "sync",           "memcpy",          "scope_push",    "scope_pop",      "step",
      "mark",           "collective"};
  return names[static_cast<int>(k)];
}

// The role a block plays. `unknown` until a producer says otherwise.
enum class Category : uint8_t {
  unknown,
  parameter,
  gradient,
  optimizer_state,
  activation,  // saved for backward
  input,
  temporary,
  comm_buffer,  // staging memory of collectives (DDP's gradient buckets)
};
inline constexpr int kNumCategories = static_cast<int>(Category::comm_buffer) + 1;

constexpr std::string_view category_name(Category c) {
  constexpr std::string_view names[] = {"unknown",    "parameter", "gradient",  "optimizer_state",
                                        "activation", "input",     "temporary", "comm_buffer"};
  return names[static_cast<int>(c)];
}

enum class DeviceType : int8_t { cpu = 0, cuda = 1 };

struct DeviceId {
  DeviceType type = DeviceType::cpu;
  int8_t index = 0;  // -1 only for "current device" before resolution
  friend bool operator==(DeviceId, DeviceId) = default;
};

enum class Pool : uint8_t { small, large };

// `collective`: the host waited for a collective operation to complete (Note [Collectives]).
enum class SyncKind : uint8_t {
  device,
  stream,
  event,
  item,
  copy_to_host,
  data_dependent,
  collective
};
inline constexpr int kNumSyncKinds = static_cast<int>(SyncKind::collective) + 1;

constexpr std::string_view sync_kind_name(SyncKind k) {
  constexpr std::string_view names[] = {"device",       "stream",         "event",     "item",
                                        "copy_to_host", "data_dependent", "collective"};
  return names[static_cast<int>(k)];
}

enum class CollectiveOp : uint8_t { all_reduce, broadcast, all_gather, reduce_scatter, barrier };
inline constexpr int kNumCollectiveOps = static_cast<int>(CollectiveOp::barrier) + 1;

constexpr std::string_view collective_op_name(CollectiveOp op) {
  constexpr std::string_view names[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter",
                                        "barrier"};
  return names[static_cast<int>(op)];
}

enum class CopyDirection : uint8_t {
  host_to_device,
  device_to_host,
  device_to_device,
  host_to_host
};

// Payload of segment_*, alloc, free_requested, free_completed.
struct BlockInfo {
  uint64_t addr = 0;            // block (or segment) start
  uint64_t size = 0;            // rounded size of the block / bytes of the segment change
  uint64_t requested_size = 0;  // what the caller asked for (alloc and frees)
  uint64_t stream = 0;
  uint64_t segment = 0;  // start address of the segment holding the block
  Pool pool = Pool::small;
  Category category = Category::unknown;
};

// Payload of empty_cache, alloc_retry and oom: the numbers an OOM report needs.
struct AllocatorInfo {
  uint64_t requested_size = 0;  // the allocation that triggered the decision (0 for empty_cache)
  uint64_t stream = 0;
  uint64_t device_free = 0;   // free bytes on the device, as the device reports them
  uint64_t device_total = 0;  // device capacity
  uint64_t allocated = 0;     // allocated bytes at the time
  uint64_t reserved = 0;      // reserved bytes at the time
  uint64_t released = 0;      // bytes returned to the device by this decision
};

// Payload of storage_create / storage_release.
struct StorageInfo {
  uint64_t storage_id = 0;
  uint64_t addr = 0;  // data pointer (0 for an empty storage)
  uint64_t nbytes = 0;
};

// Payload of tensor_create / tensor_release. Release events carry ids only.
struct TensorInfo {
  uint64_t tensor_id = 0;
  uint64_t storage_id = 0;
  uint64_t base_id = 0;  // the tensor this one is a view of (0: not a view)
  std::span<const int64_t> sizes;
  std::span<const int64_t> strides;
  int64_t storage_offset = 0;
  std::string_view dtype;  // "float32", ...
  std::string_view op;     // creating op ("empty", "view", "transpose", ...)
};

struct CategoryInfo {
  uint64_t addr = 0;  // block address
  Category category = Category::unknown;
};

struct SyncInfo {
  SyncKind kind = SyncKind::device;
  uint64_t stream = 0;
  uint64_t duration_ns = 0;
};

struct MemcpyInfo {
  CopyDirection direction = CopyDirection::host_to_host;
  uint64_t bytes = 0;
  uint64_t stream = 0;
  bool pinned = false;
  bool async = false;
};

// Note [Collectives]
// A collective (all_reduce, broadcast, ...) of a process group is one `collective` event,
// emitted by the rank when the operation returns: ts_ns is its end, duration_ns how long the
// call took (it began at ts_ns - duration_ns). `bytes` is this rank's input (the tensor reduced
// or broadcast, the shard gathered, the whole input of a reduce_scatter; 0 for a barrier).
// `group` tells groups apart within a process (0: the default group of all processes).
// When the call blocked the host until the operation completed (the MPI backend, a barrier),
// the same wait is also a `sync` of kind `collective` with the same duration, stamped just
// before the collective, so analyses of host waits (`tidemark syncs`) see it as any other; a
// collective only queued on a device stream (NCCL) blocks nothing and has no sync.
struct CollectiveInfo {
  CollectiveOp op = CollectiveOp::all_reduce;
  uint64_t bytes = 0;
  uint32_t group_size = 1;  // processes in the group
  uint32_t rank = 0;        // this process's rank in the group
  uint64_t group = 0;       // 0: the default (world) group
  uint64_t duration_ns = 0;
};

// scope_push / scope_pop / step / mark. `name` is the module path, range or mark text.
struct NameInfo {
  std::string_view name;
  uint64_t value = 0;  // step number for `step`; domain id for NVTX scopes
};

// Which member of Event's union a kind fills. Consumers switch on payload_of(e.kind) rather
// than list the kinds of each payload again.
enum class Payload : uint8_t {
  block,
  allocator,
  storage,
  tensor,
  category,
  sync,
  memcpy,
  name,
  collective
};

constexpr Payload payload_of(Kind k) {
  switch (k) {
    case Kind::segment_alloc:
    case Kind::segment_free:
    case Kind::segment_map:
    case Kind::segment_unmap:
    case Kind::alloc:
    case Kind::free_requested:
    case Kind::free_completed:
      return Payload::block;
    case Kind::empty_cache:
    case Kind::alloc_retry:
    case Kind::oom:
      return Payload::allocator;
    case Kind::storage_create:
    case Kind::storage_release:
      return Payload::storage;
    case Kind::tensor_create:
    case Kind::tensor_release:
      return Payload::tensor;
    case Kind::category:
      return Payload::category;
    case Kind::sync:
      return Payload::sync;
    case Kind::memcpy:
      return Payload::memcpy;
    case Kind::scope_push:
    case Kind::scope_pop:
    case Kind::step:
    case Kind::mark:
      return Payload::name;
    case Kind::collective:
      return Payload::collective;
  }
  return Payload::name;
}

struct Event {
  Kind kind = Kind::mark;
  uint64_t ts_ns = 0;      // steady clock
  uint64_t thread_id = 0;  // small integer, stable per thread
  uint64_t seq = 0;        // global order of emission
  DeviceId device;
  union {  // the member payload_of(kind) names
    BlockInfo block;
    AllocatorInfo allocator;
    StorageInfo storage;
    TensorInfo tensor;
    CategoryInfo category;
    SyncInfo sync;
    MemcpyInfo memcpy;
    NameInfo name;
    CollectiveInfo collective;
  };
  Event() : block() {}
};

// Note [Memory curves]
// A device's memory is four curves, each the running sum of its events' changes from zero at
// the start of the trace, the statistics of PyTorch's allocator (docs/allocator.md):
//   allocated  bytes of blocks handed out and not yet released by their caller: + size at
//              alloc, - size at free_requested;
//   active     bytes of blocks not yet reusable (allocated, or released while a stream still
//              uses them): + size at alloc, - size at free_completed;
//   reserved   bytes the allocator holds from the device: + size at segment_alloc and
//              segment_map, - size at segment_free and segment_unmap;
//   requested  bytes the callers asked for: + requested_size at alloc, - requested_size at
//              free_requested.
// No other kind moves a curve. curve_delta() is that rule, and everything that folds events
// into curves (finalize's level of detail, the live view, replay, the stats replayer, the
// snapshot importer, the test helpers) sums it rather than restate it.
struct Curves {
  int64_t allocated = 0, active = 0, reserved = 0, requested = 0;

  constexpr Curves& operator+=(const Curves& d) {
    allocated += d.allocated;
    active += d.active;
    reserved += d.reserved;
    requested += d.requested;
    return *this;
  }
  friend constexpr bool operator==(const Curves&, const Curves&) = default;
};

// How an event moves its device's curves (Note [Memory curves]); zero for kinds that do not.
inline Curves curve_delta(const Event& e) {
  Curves d;
  if (payload_of(e.kind) != Payload::block) return d;
  const auto size = static_cast<int64_t>(e.block.size);
  const auto requested = static_cast<int64_t>(e.block.requested_size);
  switch (e.kind) {
    case Kind::alloc:
      d.allocated = d.active = size;
      d.requested = requested;
      break;
    case Kind::free_requested:
      d.allocated = -size;
      d.requested = -requested;
      break;
    case Kind::free_completed:
      d.active = -size;
      break;
    case Kind::segment_alloc:
    case Kind::segment_map:
      d.reserved = size;
      break;
    case Kind::segment_free:
    case Kind::segment_unmap:
      d.reserved = -size;
      break;
    default:
      break;
  }
  return d;
}

// Note [Stamped events]
// Some events are emitted away from the call that caused them: interpose parses CUPTI's
// activity records on a thread of its own, long after the CUDA call they describe. Such a
// producer takes the events' order at the call (reserve_seq), keeps the calling thread's id and
// the native stack it captured there, and later hands the event over with dispatch_stamped():
// stamped with that thread and sequence number, and delivered to Sink::on_stamped_event with
// that stack, so a sink that records stacks keeps the call's rather than capturing the
// delivering thread's. Sinks that capture no stacks see it as any other event.

// A consumer of events. on_event may be called concurrently from many threads and must not
// throw; Note [Event lifetime] says what it may keep.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual void on_event(const Event& e) noexcept = 0;
  // An event handed over by dispatch_stamped (Note [Stamped events]) with the native stack
  // captured at its cause, innermost return address first (empty: none). The stack, like the
  // event, is valid during the call only.
  virtual void on_stamped_event(const Event& e, std::span<const uint64_t> stack) noexcept {
    (void)stack;
    on_event(e);
  }
};

// ---- Dispatch -------------------------------------------------------------------------
// A fixed table of sink slots. With no sink installed, emit() costs one relaxed load and a
// predictable branch (checked by bench/allocator_bench).

inline constexpr int kMaxSinks = 8;

namespace detail {
inline std::atomic<int> g_num_sinks{0};
inline std::atomic<Sink*> g_sinks[kMaxSinks];
inline std::atomic<int> g_slot_end{0};  // 1 + the highest slot ever used: dispatch scans [0, end)
inline std::atomic<uint64_t> g_seq{0};
inline std::atomic<uint64_t> g_next_thread{1};
}  // namespace detail

inline uint64_t steady_ns() noexcept {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Note [Event clock]
// Reading steady_clock costs ~20-25 ns, a large share of an allocator call (~150 ns), and an
// alloc+free pair emits three events. As PyTorch's allocator trace does (its approximate
// clock), events are stamped from the CPU's time-stamp counter, converted to steady-clock
// nanoseconds by a linear map measured once, when the first sink is installed. The TSC is
// used only where the kernel itself trusts it as its clocksource (invariant TSC); elsewhere,
// and on other architectures, steady_clock is read directly.
namespace detail {
struct TscMap {
  std::atomic<bool> ready{false};
  uint64_t tsc0 = 0, ns0 = 0;
  uint64_t mult = 0;  // ns per tick in 32.32 fixed point
};
inline TscMap g_tsc;

inline bool kernel_uses_tsc() noexcept {
#if defined(__x86_64__)
  std::FILE* f =
      std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (!f) return false;
  char buf[32] = {};
  bool tsc = std::fgets(buf, sizeof buf, f) && std::string_view(buf).substr(0, 3) == "tsc";
  std::fclose(f);
  return tsc;
#else
  return false;
#endif
}

}  // namespace detail

// Measures the TSC rate against steady_clock over ~2 ms. Idempotent. add_sink() calls it; a
// sink that stamps a time before it is installed (the recorder's start) calls it first.
inline void calibrate_clock() noexcept {
#if defined(__x86_64__)
  static std::atomic<bool> once{false};
  if (once.exchange(true) || !detail::kernel_uses_tsc()) return;
  uint64_t ns_a = steady_ns(), tsc_a = __builtin_ia32_rdtsc();
  uint64_t ns_b = ns_a, tsc_b = tsc_a;
  while (ns_b - ns_a < 2'000'000) {
    ns_b = steady_ns();
    tsc_b = __builtin_ia32_rdtsc();
  }
  if (tsc_b <= tsc_a) return;
  detail::g_tsc.mult =
      static_cast<uint64_t>((static_cast<unsigned __int128>(ns_b - ns_a) << 32) / (tsc_b - tsc_a));
  detail::g_tsc.tsc0 = tsc_b;
  detail::g_tsc.ns0 = ns_b;
  detail::g_tsc.ready.store(true, std::memory_order_release);
#endif
}

// Steady-clock nanoseconds (Note [Event clock]).
inline uint64_t now_ns() noexcept {
#if defined(__x86_64__)
  if (detail::g_tsc.ready.load(std::memory_order_acquire)) {
    // Another core's counter may trail the calibrating core's by a few ticks.
    int64_t dt = static_cast<int64_t>(__builtin_ia32_rdtsc() - detail::g_tsc.tsc0);
    if (dt < 0) dt = 0;
    return detail::g_tsc.ns0 +
           static_cast<uint64_t>((static_cast<unsigned __int128>(dt) * detail::g_tsc.mult) >> 32);
  }
#endif
  return steady_ns();
}

inline bool enabled() noexcept {
  return detail::g_num_sinks.load(std::memory_order_relaxed) != 0;
}

// Installs a sink; returns false when all slots are taken. The caller keeps ownership.
inline bool add_sink(Sink* s) noexcept {
  calibrate_clock();
  for (int i = 0; i < kMaxSinks; ++i) {
    Sink* expected = nullptr;
    if (detail::g_sinks[i].compare_exchange_strong(expected, s)) {
      int end = detail::g_slot_end.load();
      while (end < i + 1 && !detail::g_slot_end.compare_exchange_weak(end, i + 1)) {
      }
      detail::g_num_sinks.fetch_add(1);
      return true;
    }
  }
  return false;
}

// Removes a sink. Emitters that already loaded the pointer may still call it: keep the sink
// alive until the program's threads have quiesced (the recorder does so at stop()).
inline void remove_sink(Sink* s) noexcept {
  for (auto& slot : detail::g_sinks) {
    Sink* expected = s;
    if (slot.compare_exchange_strong(expected, nullptr)) {
      detail::g_num_sinks.fetch_sub(1);
      return;
    }
  }
}

inline uint64_t current_thread_id() noexcept {
  thread_local uint64_t id = detail::g_next_thread.fetch_add(1);
  return id;
}

// Stamps the header (time, thread, sequence) and delivers to every sink. Call only after
// checking enabled() so the disabled path stays one branch. A producer that emits several
// events for one decision (free_requested + free_completed) may set ts_ns itself so they
// share one clock read; 0 means "now".
namespace detail {
// Calls fn(sink) for every installed sink.
template <class F>
inline void for_each_sink(F&& fn) noexcept {
  const int end = g_slot_end.load(std::memory_order_acquire);
  for (int i = 0; i < end; ++i) {
    if (Sink* s = g_sinks[i].load(std::memory_order_acquire)) fn(*s);
  }
}
}  // namespace detail

inline void dispatch(Event& e) noexcept {
  if (e.ts_ns == 0) e.ts_ns = now_ns();
  e.thread_id = current_thread_id();
  e.seq = detail::g_seq.fetch_add(1, std::memory_order_relaxed);
  detail::for_each_sink([&](Sink& s) { s.on_event(e); });
}

// Takes n consecutive sequence numbers now and returns the first (Note [Stamped events]).
inline uint64_t reserve_seq(uint64_t n) noexcept {
  return detail::g_seq.fetch_add(n, std::memory_order_relaxed);
}

// Delivers `e` as dispatch() does, but stamped with `thread_id` (the causing thread's
// current_thread_id()) and `seq` (one reserve_seq gave, each used once), with `stack` to
// Sink::on_stamped_event (Note [Stamped events]). ts_ns 0 means "now". Call only after
// checking enabled().
inline void dispatch_stamped(Event& e, uint64_t thread_id, uint64_t seq,
                             std::span<const uint64_t> stack = {}) noexcept {
  if (e.ts_ns == 0) e.ts_ns = now_ns();
  e.thread_id = thread_id;
  e.seq = seq;
  detail::for_each_sink([&](Sink& s) { s.on_stamped_event(e, stack); });
}

}  // namespace tidemark::events
