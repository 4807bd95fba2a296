// The recorder sink and its writer thread.
//
// Note [Recorder rings]
// Each producing thread owns a single-producer/single-consumer byte ring. on_event encodes the
// event (header, the Event itself, stack addresses, sizes/strides, up to two strings) into the
// ring and publishes the new tail; the writer thread drains every ring, re-creates each Event
// with its spans pointing into the ring, interns stacks and hands it to the TraceWriter, then
// publishes the new head. Records are 8-byte aligned; one that does not fit before the end of
// the buffer is preceded by a pad record that fills the rest. A full ring makes its producer
// wait for the writer (back-pressure); if the writer has failed or made no progress for
// kMaxWait, the event is dropped and counted, and the count is stored in the trace. Once a
// producer has given up waiting, its events are dropped at once until the writer frees room
// again, so a stalled writer (a database locked by another process) stalls the program once,
// not once per event.
//
// Note [Writer failure]
// When the trace cannot be written (the disk is full; another process held the database locked
// for longer than the TraceWriter waits), the recording stops, and nothing is lost without
// being counted: the events appended since the last commit (rolled back), those still in the
// rings and every later one are counted as dropped, and TraceWriter::abandon stores the count
// and the reason (meta `writer_error`) if the file can still take that much; at stop it stores
// the final count, marked final (Note [Counted losses] in profiler/store/trace_writer.h). A file
// that took neither says, by lacking the mark, that its count is short.
//
// Note [File size limit in the recorded process]
// Under a file size limit (ulimit -f) a write past it raises SIGXFSZ, whose default action
// kills the process: the program would die of its recording. The kernel sends the signal to
// the thread that wrote, so the recorder blocks it in the threads and spans that write the
// trace (the writer thread; start, stop and finalize in the program's thread: XfszBlocked).
// The write then fails with EFBIG, which is no room (Note [Writer failure]): the recording
// stops, the program runs on. What the program does with the signal for its own writes is left
// as it was, and a SIGXFSZ the recorder's write left pending is taken before the span ends.
//
// Note [Recorder lifetime]
// remove_sink() cannot tell when a thread that already loaded the sink pointer has finished
// calling it. So a Recorder is never destroyed, and every on_event runs between inflight_++
// and inflight_--, checking active_ in between: stop() clears active_, waits for inflight_ to
// drain, and only then drains the rings and returns them to the pool. A late call sees
// active_ == false and touches nothing else.
#include "profiler/record/recorder.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include "profiler/record/output_path.h"
#include "profiler/record/stacks.h"
#include "profiler/store/trace_reader.h"
#include "profiler/store/trace_writer.h"

namespace tidemark::record {

namespace ev = tidemark::events;

namespace {

constexpr uint32_t kPadKind = 0xffffffffu;

// Note [File size limit in the recorded process]: SIGXFSZ blocked in this thread for the
// object's life; one that the span's writes raised is taken, not left for the program.
class XfszBlocked {
 public:
  XfszBlocked() {
    sigemptyset(&xfsz_);
    sigaddset(&xfsz_, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &xfsz_, &old_);
    sigset_t pending;
    sigpending(&pending);
    pending_before_ = sigismember(&pending, SIGXFSZ) == 1;
  }
  ~XfszBlocked() {
    sigset_t pending;
    sigpending(&pending);
    if (!pending_before_ && sigismember(&pending, SIGXFSZ) == 1) {
      const timespec now{};
      sigtimedwait(&xfsz_, nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  XfszBlocked(const XfszBlocked&) = delete;
  XfszBlocked& operator=(const XfszBlocked&) = delete;

 private:
  sigset_t xfsz_{}, old_{};
  bool pending_before_ = false;
};
constexpr size_t kMaxString = 4096;                              // longer names are truncated
constexpr auto kCommitInterval = std::chrono::milliseconds(50);  // at the first drain after it
// How often the writer drains the rings when nobody wakes it: rarely enough that its wake-ups
// do not compete with the program's threads, often enough that a ring (4 MiB by default)
// holds what a busy thread emits meanwhile.
constexpr auto kDrainInterval = std::chrono::milliseconds(10);
constexpr int kWriterNice = 10;                     // the writer thread's nice value
constexpr auto kMaxWait = std::chrono::seconds(5);  // back-pressure before dropping
// Frames of the recorder itself at the top of a captured stack (record, on_event).
constexpr int kRecorderFrames = 2;

struct RecordHeader {
  uint32_t len;   // bytes of the whole record, multiple of 8
  uint32_t kind;  // ev::Kind, or kPadKind
  uint32_t n_ips;
  uint32_t n_dims;
  uint32_t str1_len;
  uint32_t str2_len;
};

constexpr size_t align8(size_t n) {
  return (n + 7) & ~size_t{7};
}

struct Ring {
  explicit Ring(size_t capacity)
      : buf(new std::byte[capacity]), cap(capacity), mask(capacity - 1) {}
  std::unique_ptr<std::byte[]> buf;
  size_t cap, mask;
  alignas(64) std::atomic<uint64_t> tail{0};   // written by the producer
  alignas(64) std::atomic<uint64_t> head{0};   // written by the writer thread
  alignas(64) std::atomic<uint64_t> owner{0};  // token of the owning thread; 0 once it exited
  std::mutex producers;                        // only for the shared ring of exiting threads
  // Producer side: the head at which the producer last gave up waiting for room (Note
  // [Recorder rings]); kNoStall when it has not.
  static constexpr uint64_t kNoStall = ~uint64_t{0};
  uint64_t stalled_at = kNoStall;
};

// Rings are reused across threads and recordings, never freed (Note [Recorder lifetime]).
struct RingPool {
  std::mutex mu;
  std::vector<Ring*> free;
  Ring* take(size_t capacity) {
    std::lock_guard<std::mutex> lock(mu);
    for (size_t i = 0; i < free.size(); ++i) {
      if (free[i]->cap == capacity) {
        Ring* r = free[i];
        free.erase(free.begin() + static_cast<std::ptrdiff_t>(i));
        r->head.store(0);
        r->tail.store(0);
        r->stalled_at = Ring::kNoStall;
        return r;
      }
    }
    return new Ring(capacity);
  }
  void give(Ring* r) {
    std::lock_guard<std::mutex> lock(mu);
    free.push_back(r);
  }
};
RingPool& ring_pool() {
  static auto* pool = new RingPool;  // never destroyed: threads may exit after main
  return *pool;
}

std::atomic<uint64_t> g_next_token{1};

class Recorder;

struct ThreadSlot {
  Recorder* recorder = nullptr;
  Ring* ring = nullptr;
  uint64_t token = 0;
  bool exiting = false;
};
thread_local ThreadSlot t_slot;  // trivially destructible: usable during thread exit

struct ThreadExit {
  ~ThreadExit() {
    if (t_slot.ring) {
      uint64_t expected = t_slot.token;
      t_slot.ring->owner.compare_exchange_strong(expected, 0);
    }
    t_slot.ring = nullptr;
    t_slot.exiting = true;
  }
};
thread_local ThreadExit t_exit;

// Note [Shared stacks]
// ~~~~~~~~~~~~~~~~~~~~
// A new tensor is an alloc, then its storage_create, then its tensor_create, emitted back to
// back on one thread from one call site, so the three share one captured stack: the recorder
// keeps the stack it captured last on this thread (LastStack) and gives it to the next event
// when that event follows in this order in the same recording, instead of unwinding again. A
// stamped event (its stack given, Note [Stamped events]) leaves nothing to share. The writer
// sees the repeated stack and skips the prefix-tree walk for it.
//
// The stack captured last on this thread.
struct LastStack {
  const void* recorder = nullptr;
  ev::Kind kind = ev::Kind::mark;
  int n = 0;
  uint64_t ips[kMaxStackDepth];
};
thread_local LastStack t_last_stack;

std::string read_cmdline() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (char& c : raw)
    if (c == '\0') c = ' ';
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  return raw;
}

bool wants_stack(ev::Kind k) {
  switch (k) {
    case ev::Kind::alloc:
    case ev::Kind::segment_alloc:
    case ev::Kind::segment_map:
    case ev::Kind::oom:
    case ev::Kind::tensor_create:
    case ev::Kind::storage_create:
    case ev::Kind::sync:
    case ev::Kind::memcpy:
    case ev::Kind::mark:
    case ev::Kind::collective:
      return true;
    default:
      return false;
  }
}

bool is_tensor_event(ev::Kind k) {
  return k == ev::Kind::tensor_create || k == ev::Kind::tensor_release ||
         k == ev::Kind::storage_create || k == ev::Kind::storage_release;
}

class Recorder final : public ev::Sink {
 public:
  Recorder(Options options, std::unique_ptr<store::TraceWriter> writer)
      : opts_(std::move(options)), writer_(std::move(writer)) {
    shared_ring_ = ring_pool().take(opts_.ring_bytes);
    shared_ring_->owner.store(g_next_token.fetch_add(1));
    writer_thread_ = std::thread([this] { run_writer(); });
  }

  void on_event(const ev::Event& e) noexcept override {
    inflight_.fetch_add(1, std::memory_order_seq_cst);
    if (active_.load(std::memory_order_seq_cst) && (opts_.tensors || !is_tensor_event(e.kind)))
      record(e, nullptr);
    inflight_.fetch_sub(1, std::memory_order_release);
  }

  // Note [Stamped events] (events.h): the stack captured at the event's cause, not here.
  void on_stamped_event(const ev::Event& e, std::span<const uint64_t> stack) noexcept override {
    inflight_.fetch_add(1, std::memory_order_seq_cst);
    if (active_.load(std::memory_order_seq_cst) && (opts_.tensors || !is_tensor_event(e.kind)))
      record(e, &stack);
    inflight_.fetch_sub(1, std::memory_order_release);
  }

  RecordingStats stop() {
    active_.store(false, std::memory_order_seq_cst);
    ev::remove_sink(this);
    while (inflight_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
    {
      std::lock_guard<std::mutex> lock(wake_mu_);
      stopping_ = true;
    }
    wake_.notify_one();
    writer_thread_.join();
    {
      XfszBlocked no_signal;  // Note [File size limit in the recorded process]
      writer_.reset();        // closes the file
    }
    // Every producer is out (Note [Recorder lifetime]): the rings can serve others.
    std::lock_guard<std::mutex> lock(rings_mu_);
    for (Ring* r : rings_) ring_pool().give(r);
    rings_.clear();
    ring_pool().give(shared_ring_);
    return {written_, dropped_.load(), stacks_.size()};
  }

  // Waits until the writer has drained every ring up to where it was at the call, then
  // until it has committed.
  void flush(bool commit) {
    std::vector<std::pair<Ring*, uint64_t>> marks;
    {
      std::lock_guard<std::mutex> lock(rings_mu_);
      for (Ring* r : rings_) marks.emplace_back(r, r->tail.load(std::memory_order_acquire));
    }
    marks.emplace_back(shared_ring_, shared_ring_->tail.load(std::memory_order_acquire));
    for (auto& [r, tail] : marks) {
      while (r->head.load(std::memory_order_acquire) < tail && !failed_) {
        wake_.notify_one();
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    if (!commit) return;
    uint64_t target = commits_.load() + 2;  // a commit that started after the drain
    {
      std::lock_guard<std::mutex> lock(wake_mu_);
      commit_now_ = true;
    }
    wake_.notify_one();
    while (commits_.load() < target && !failed_)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }

  const Options& options() const { return opts_; }
  bool writer_failed() const { return failed_.load(); }

 private:
  Ring* ring_for_thread() {
    if (t_slot.exiting) return shared_ring_;
    if (t_slot.recorder == this && t_slot.ring) return t_slot.ring;
    Ring* r = ring_pool().take(opts_.ring_bytes);
    uint64_t token = g_next_token.fetch_add(1);
    r->owner.store(token);
    {
      std::lock_guard<std::mutex> lock(rings_mu_);
      rings_.push_back(r);
    }
    (void)&t_exit;  // constructs the thread-exit hook for this thread
    t_slot = {this, r, token, false};
    return r;
  }

  // `given`: the stack of a stamped event (Note [Stamped events]); null: capture one here.
  void record(const ev::Event& e, const std::span<const uint64_t>* given) noexcept {
    // The three events of a new tensor share one stack (Note [Shared stacks]).
    const uint64_t* ips = nullptr;
    int n_ips = 0;
    if (given) {
      if (opts_.stack_depth > 0 && wants_stack(e.kind)) {
        ips = given->data();
        n_ips = std::min(static_cast<int>(given->size()), opts_.stack_depth);
      }
      t_last_stack.recorder = nullptr;  // nothing captured here for the next event to share
    } else if (opts_.stack_depth > 0 && wants_stack(e.kind)) {
      LastStack& last = t_last_stack;
      bool follows = (e.kind == ev::Kind::storage_create && last.kind == ev::Kind::alloc) ||
                     (e.kind == ev::Kind::tensor_create && last.kind == ev::Kind::storage_create);
      if (!(follows && last.recorder == this))
        last.n = capture_stack(last.ips, opts_.stack_depth, kRecorderFrames);
      ips = last.ips;
      n_ips = last.n;
    }
    t_last_stack.kind = e.kind;
    if (!given) t_last_stack.recorder = this;
    std::string_view s1, s2;
    std::span<const int64_t> sizes, strides;
    if (e.kind == ev::Kind::tensor_create) {
      s1 = e.tensor.dtype;
      s2 = e.tensor.op;
      sizes = e.tensor.sizes;
      strides = e.tensor.strides;
    } else if (ev::payload_of(e.kind) == ev::Payload::name) {
      s1 = e.name.name;
    }
    s1 = s1.substr(0, kMaxString);
    s2 = s2.substr(0, kMaxString);
    const size_t n_dims = sizes.size();
    const size_t len = align8(sizeof(RecordHeader) + sizeof(ev::Event) +
                              (n_ips + 2 * n_dims) * sizeof(uint64_t) + s1.size() + s2.size());
    Ring* ring = ring_for_thread();
    std::unique_lock<std::mutex> shared_lock;
    if (ring == shared_ring_) shared_lock = std::unique_lock<std::mutex>(ring->producers);
    auto [dst, advance] = reserve(*ring, len);
    if (!dst) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    RecordHeader h{static_cast<uint32_t>(len),       static_cast<uint32_t>(e.kind),
                   static_cast<uint32_t>(n_ips),     static_cast<uint32_t>(n_dims),
                   static_cast<uint32_t>(s1.size()), static_cast<uint32_t>(s2.size())};
    std::byte* p = dst;
    std::memcpy(p, &h, sizeof h);
    p += sizeof h;
    std::memcpy(static_cast<void*>(p), &e, sizeof e);
    p += sizeof e;
    if (n_ips) std::memcpy(p, ips, n_ips * sizeof(uint64_t));  // (memcpy wants non-null)
    p += n_ips * sizeof(uint64_t);
    if (n_dims) {
      std::memcpy(p, sizes.data(), n_dims * sizeof(int64_t));
      p += n_dims * sizeof(int64_t);
      std::memcpy(p, strides.data(), n_dims * sizeof(int64_t));
      p += n_dims * sizeof(int64_t);
    }
    if (!s1.empty()) std::memcpy(p, s1.data(), s1.size());
    p += s1.size();
    if (!s2.empty()) std::memcpy(p, s2.data(), s2.size());
    ring->tail.store(ring->tail.load(std::memory_order_relaxed) + advance,
                     std::memory_order_release);
  }

  struct Slot {
    std::byte* dst;  // nullptr: drop the event
    size_t advance;  // how far the tail moves once the record is written
  };

  // Where a record of `len` bytes goes, writing a pad record first when it would straddle
  // the end of the buffer.
  Slot reserve(Ring& r, size_t len) {
    const uint64_t tail = r.tail.load(std::memory_order_relaxed);
    const size_t off = tail & r.mask;
    const size_t contiguous = r.cap - off;
    const size_t need = len <= contiguous ? len : contiguous + len;
    if (len > r.cap / 2) return {nullptr, 0};
    auto deadline = std::chrono::steady_clock::time_point{};
    for (uint64_t head; tail + need - (head = r.head.load(std::memory_order_acquire)) > r.cap;) {
      if (failed_.load(std::memory_order_relaxed)) return {nullptr, 0};
      if (head == r.stalled_at) return {nullptr, 0};  // the writer has not moved since
      auto now = std::chrono::steady_clock::now();
      if (deadline == std::chrono::steady_clock::time_point{}) {
        deadline = now + kMaxWait;
        wake_.notify_one();
      } else if (now > deadline) {
        r.stalled_at = head;
        return {nullptr, 0};
      }
      std::this_thread::yield();
    }
    if (len > contiguous) {
      // The rest of the buffer may be as small as 8 bytes: a pad record is just len and kind.
      const uint32_t pad[2] = {static_cast<uint32_t>(contiguous), kPadKind};
      std::memcpy(r.buf.get() + off, pad, sizeof pad);
      return {r.buf.get(), contiguous + len};
    }
    return {r.buf.get() + off, len};
  }

  // ---- Writer thread ----------------------------------------------------------------------

  void run_writer() {
    // Background work: on a machine whose cores the program keeps busy, the program's own
    // threads go first (the rings absorb the delay).
    setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kWriterNice);
    XfszBlocked
        no_signal;  // for the thread's life (Note [File size limit in the recorded process])
    auto last_commit = std::chrono::steady_clock::now();
    for (;;) {
      bool stopping, force_commit;
      {
        std::unique_lock<std::mutex> lock(wake_mu_);
        wake_.wait_for(lock, kDrainInterval, [&] { return stopping_ || commit_now_; });
        stopping = stopping_;
        force_commit = commit_now_;
        commit_now_ = false;
      }
      if (!failed_) {
        try {
          drain_all();
          auto now = std::chrono::steady_clock::now();
          if (stopping || force_commit || now - last_commit >= kCommitInterval) {
            report_dropped();
            writer_->commit();
            commits_.fetch_add(1);
            written_committed_ = written_;
            dropped_committed_ = dropped_reported_;
            last_commit = now;
          }
          if (stopping) {
            // Libraries loaded since start: their frames must resolve too.
            if (opts_.stack_depth > 0) writer_->add_modules(read_modules());
            writer_->close(ev::now_ns());
          }
        } catch (const std::exception& ex) {
          fail(ex.what());
        }
      }
      if (failed_) {
        drain_all();                               // counted, not written (Note [Writer failure])
        if (stopping) record_loss(/*last=*/true);  // the count is final (Note [Counted losses])
      }
      if (stopping) return;
    }
  }

  // Note [Writer failure].
  void fail(const std::string& what) {
    error_ = what;
    dropped_.fetch_add(written_ - written_committed_);  // appended, never committed
    written_ = written_committed_;
    failed_ = true;
    drain_all();  // what the rings still hold: counted
    std::fprintf(stderr,
                 "tidemark: recording to %s stopped: %s; events not written are counted as "
                 "dropped\n",
                 opts_.path.c_str(), what.c_str());
    record_loss(/*last=*/false);
  }

  // Stores the events dropped since the last commit and the reason, if the file lets us;
  // `last`: at stop, when the count is final.
  void record_loss(bool last) {
    const uint64_t dropped = dropped_.load();
    try {
      writer_->abandon(dropped - dropped_committed_, ev::now_ns(), error_, last);
      dropped_committed_ = dropped;
    } catch (const std::exception& ex) {
      if (!loss_unrecorded_)
        std::fprintf(stderr, "tidemark: %s: cannot store the count of dropped events either: %s\n",
                     opts_.path.c_str(), ex.what());
      loss_unrecorded_ = true;
    }
  }

  void report_dropped() {
    uint64_t d = dropped_.load(std::memory_order_relaxed);
    if (d != dropped_reported_) {
      writer_->add_dropped(d - dropped_reported_, ev::now_ns());
      dropped_reported_ = d;
    }
  }

  // Hands every ring's records to the writer; once it has failed, counts them as dropped
  // instead (Note [Writer failure]).
  void drain_all() {
    std::vector<Ring*> rings;
    {
      std::lock_guard<std::mutex> lock(rings_mu_);
      rings = rings_;
    }
    rings.push_back(shared_ring_);
    for (Ring* r : rings) {
      bool exited = r != shared_ring_ && r->owner.load(std::memory_order_acquire) == 0;
      drain(*r);
      if (exited && r->head.load() == r->tail.load(std::memory_order_acquire)) {
        std::lock_guard<std::mutex> lock(rings_mu_);
        std::erase(rings_, r);
        ring_pool().give(r);
      }
    }
  }

  void drain(Ring& r) {
    uint64_t head = r.head.load(std::memory_order_relaxed);
    const uint64_t tail = r.tail.load(std::memory_order_acquire);
    while (head < tail) {
      const std::byte* p = r.buf.get() + (head & r.mask);
      uint32_t len_kind[2];
      std::memcpy(len_kind, p, sizeof len_kind);
      if (len_kind[1] != kPadKind && failed_) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
      } else if (len_kind[1] != kPadKind) {
        RecordHeader h;
        std::memcpy(&h, p, sizeof h);
        decode_and_append(h, p + sizeof h);
      }
      head += len_kind[0];
      // Publish progress as we go so a waiting producer can continue.
      r.head.store(head, std::memory_order_release);
    }
  }

  void decode_and_append(const RecordHeader& h, const std::byte* p) {
    ev::Event e;
    std::memcpy(static_cast<void*>(&e), p, sizeof e);
    p += sizeof e;
    const auto* ips = reinterpret_cast<const uint64_t*>(p);
    p += h.n_ips * sizeof(uint64_t);
    const auto* sizes = reinterpret_cast<const int64_t*>(p);
    p += h.n_dims * sizeof(int64_t);
    const auto* strides = reinterpret_cast<const int64_t*>(p);
    p += h.n_dims * sizeof(int64_t);
    std::string_view s1(reinterpret_cast<const char*>(p), h.str1_len);
    std::string_view s2(reinterpret_cast<const char*>(p) + h.str1_len, h.str2_len);
    switch (e.kind) {
      case ev::Kind::tensor_create:
        e.tensor.sizes = {sizes, h.n_dims};
        e.tensor.strides = {strides, h.n_dims};
        e.tensor.dtype = s1;
        e.tensor.op = s2;
        break;
      case ev::Kind::tensor_release:
        e.tensor.sizes = {};
        e.tensor.strides = {};
        e.tensor.dtype = {};
        e.tensor.op = {};
        break;
      default:
        if (ev::payload_of(e.kind) == ev::Payload::name) e.name.name = s1;
        break;
    }
    uint64_t stack_id = 0;
    if (h.n_ips > 0) {
      // Shared stacks arrive as repeats: skip the prefix-tree walk for them.
      if (h.n_ips == last_n_ips_ && std::memcmp(ips, last_ips_, h.n_ips * sizeof(uint64_t)) == 0) {
        stack_id = last_stack_id_;
      } else {
        created_.clear();
        stack_id = stacks_.intern(ips, static_cast<int>(h.n_ips), created_);
        for (const auto& n : created_) writer_->add_stack_node(n.id, n.parent, n.ip);
        last_n_ips_ = h.n_ips;
        std::memcpy(last_ips_, ips, h.n_ips * sizeof(uint64_t));
        last_stack_id_ = stack_id;
      }
    }
    writer_->append(e, stack_id);
    ++written_;
  }

  Options opts_;
  std::unique_ptr<store::TraceWriter> writer_;
  std::atomic<bool> active_{true};
  std::atomic<int64_t> inflight_{0};
  std::atomic<bool> failed_{false};
  std::atomic<uint64_t> dropped_{0};

  std::mutex rings_mu_;
  std::vector<Ring*> rings_;
  Ring* shared_ring_ = nullptr;

  std::mutex wake_mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool commit_now_ = false;
  std::atomic<uint64_t> commits_{0};
  std::thread writer_thread_;

  // Writer-thread state.
  StackTable stacks_;
  std::vector<StackTable::Node> created_;
  uint32_t last_n_ips_ = 0;
  uint64_t last_ips_[kMaxStackDepth];
  uint64_t last_stack_id_ = 0;
  uint64_t written_ = 0;
  uint64_t dropped_reported_ = 0;
  // As of the last commit (Note [Writer failure]).
  uint64_t written_committed_ = 0, dropped_committed_ = 0;
  std::string error_;  // why the writer failed
  bool loss_unrecorded_ = false;
};

std::mutex g_control_mu;  // serialises start/stop
Recorder* g_current = nullptr;

int env_int(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < lo || x > hi) {
    throw std::invalid_argument(std::string("tidemark: ") + name + "='" + v +
                                "' is not an integer in [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "]");
  }
  return static_cast<int>(x);
}

}  // namespace

Options options_from_env() {
  Options o;
  if (const char* p = std::getenv("TIDEMARK_OUTPUT")) o.path = p;
  o.stack_depth = env_int("TIDEMARK_STACKS", 0, 0, kMaxStackDepth);
  o.tensors = env_int("TIDEMARK_TENSORS", 1, 0, 1) == 1;
  o.finalize = env_int("TIDEMARK_FINALIZE", 1, 0, 1) == 1;
  o.force = env_int("TIDEMARK_FORCE", 0, 0, 1) == 1;
  int kb = env_int("TIDEMARK_BUFFER_KB", static_cast<int>(o.ring_bytes >> 10), 64, 1 << 20);
  o.ring_bytes = std::bit_ceil(static_cast<size_t>(kb) << 10);
  return o;
}

void start(const Options& options) {
  std::lock_guard<std::mutex> lock(g_control_mu);
  if (g_current)
    throw std::runtime_error("tidemark: already recording to " + g_current->options().path);
  Options o = options;
  if (o.path.empty()) throw std::runtime_error("tidemark: no output path given");
  // Note [Output patterns]: %p, %r and %% expanded here, in the recorded process.
  const RankEnv ranks = rank_from_env();
  if (std::string problem = shared_file_problem(o.path, ranks); !problem.empty())
    throw std::runtime_error("tidemark: cannot record to " + problem);
  const ExpandedPath expanded = expand_output_path(o.path, getpid(), ranks);
  if (expanded.rank_missing)
    std::fprintf(stderr,
                 "tidemark: %s: no rank in the environment (OMPI_COMM_WORLD_RANK, PMI_RANK, "
                 "RANK), so %%r is 0: recording to %s\n",
                 o.path.c_str(), expanded.path.c_str());
  o.path = expanded.path;
  // The writer replaces what is at the path: only an earlier trace, or with `force` any regular
  // file; never a device, a FIFO, a symlink or a directory. `tidemark record` checks a name it
  // can expand itself; a rank's own name is only known here.
  if (struct stat at{}; ::lstat(o.path.c_str(), &at) == 0) {
    if (!S_ISREG(at.st_mode))
      throw std::runtime_error("tidemark: cannot record to " + o.path +
                               ": it is not a regular file (a directory, a link, a device or a "
                               "FIFO); give a file name");
    if (at.st_size > 0 && !o.force && !store::is_trace_file(o.path))
      throw std::runtime_error("tidemark: cannot record to " + o.path +
                               ": the file exists and is not a Tidemark trace; recording would "
                               "replace it (tidemark record --force, or TIDEMARK_FORCE=1)");
  }
  if (o.stack_depth < 0 || o.stack_depth > kMaxStackDepth)
    throw std::runtime_error("tidemark: stack depth must be 0-64, got " +
                             std::to_string(o.stack_depth));
  o.ring_bytes = std::bit_ceil(std::max<size_t>(o.ring_bytes, 64 << 10));
  if (o.command_line.empty()) o.command_line = read_cmdline();

  store::TraceMeta meta;
  meta.tool_version = TIDEMARK_VERSION;
  meta.command_line = o.command_line;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  meta.host = host;
  meta.pid = getpid();
  meta.rank = ranks.rank;
  meta.world_size = ranks.rank ? ranks.world_size : std::nullopt;
  // `tidemark record` finalizes after the program exits (TIDEMARK_FINALIZE=0): its pid tells a
  // follower (`tidemark watch`) that a finalize is still coming. Not for a process that
  // finalizes its own file (the program's children, which inherit the variable).
  if (const char* f = std::getenv("TIDEMARK_FINALIZER_PID"); f && !o.finalize)
    meta.finalizer_pid = std::atoll(f);
  meta.start_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  ev::calibrate_clock();
  meta.start_ts_ns = ev::now_ns();
  uint64_t ram =
      static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  meta.devices.push_back({ev::DeviceId{ev::DeviceType::cpu, 0}, "cpu", ram});
  if (const char* conf = std::getenv("TL_ALLOC_CONF")) meta.allocator_settings = conf;
  meta.stack_depth = o.stack_depth;

  std::unique_ptr<store::TraceWriter> writer;
  try {
    XfszBlocked no_signal;  // Note [File size limit in the recorded process]
    writer = store::TraceWriter::create(o.path, meta);
    if (o.stack_depth > 0) writer->add_modules(read_modules());
  } catch (const std::exception& ex) {
    throw std::runtime_error(std::string("tidemark: cannot record to ") + o.path + ": " +
                             ex.what());
  }
  // Never deleted (Note [Recorder lifetime]); kept reachable for leak checkers.
  static auto* all_recorders = new std::vector<Recorder*>;
  auto* rec = new Recorder(o, std::move(writer));
  all_recorders->push_back(rec);
  if (!ev::add_sink(rec)) {
    rec->stop();
    throw std::runtime_error("tidemark: no free event sink slot");
  }
  g_current = rec;
}

RecordingStats stop() {
  std::lock_guard<std::mutex> lock(g_control_mu);
  if (!g_current) return {};
  Recorder* rec = g_current;
  g_current = nullptr;
  RecordingStats stats = rec->stop();
  if (rec->options().finalize && !rec->writer_failed()) {
    try {
      XfszBlocked no_signal;  // Note [File size limit in the recorded process]
      finalize_trace(rec->options().path);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "tidemark: finalizing %s failed: %s (rerun `tidemark finalize`)\n",
                   rec->options().path.c_str(), ex.what());
    }
  }
  return stats;
}

void flush(bool commit) {
  std::lock_guard<std::mutex> lock(g_control_mu);
  if (g_current) g_current->flush(commit);
}

bool is_recording() {
  std::lock_guard<std::mutex> lock(g_control_mu);
  return g_current != nullptr;
}

}  // namespace tidemark::record
