// The replay (replay.h): plans read from a trace, run through tensorlib's CachingAllocator on
// a FakeDevice. Note [Replay fidelity] says what comes back exactly and what does not.
#include "profiler/replay/replay.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <thread>
#include <unordered_map>

#include "profiler/analysis/allocator_state.h"
#include "tensorlib/base/error.h"
#include "tensorlib/memory/caching_allocator.h"
#include "tensorlib/memory/fake_device.h"
#include "tensorlib/memory/oom.h"

namespace tidemark::replay {

namespace ev = tidemark::events;
namespace mem = tl::memory;

bool is_allocator_event(ev::Kind k) {
  const ev::Payload p = ev::payload_of(k);
  return p == ev::Payload::block || p == ev::Payload::allocator;
}

namespace {

// Running reserved / allocated of one device and the moment reserved first peaked, the same
// for the recorded events and the replayed ones. The figures "at the peak" are taken when the
// request that first reached it has been served (its block allocated), as a user would look at
// the allocator right after that call returned.
class Curves {
 public:
  // The curves move by Note [Memory curves] (profiler/events/events.h); a replay that starts
  // mid-trace may free what it never saw allocated, so neither goes below zero.
  void on(const ev::Event& e) {
    const ev::Curves d = ev::curve_delta(e);
    reserved_ = grown(reserved_, d.reserved);
    allocated_ = grown(allocated_, d.allocated);
    if (e.kind == ev::Kind::segment_alloc || e.kind == ev::Kind::segment_map) {
      ++f_.device_allocations;
      if (reserved_ > f_.peak_reserved) {
        f_.peak_reserved = reserved_;
        peak_open_ = true;
      }
    }
    if (d.allocated > 0 && allocated_ > f_.peak_allocated) {
      f_.peak_allocated = allocated_;
      f_.peak_allocated_ts = ts_;
    }
  }
  // The request at `ts` is done: closes a peak it reached. Returns true when it did.
  bool request_done(uint64_t ts) {
    if (!peak_open_) return false;
    peak_open_ = false;
    f_.peak_reserved_ts = ts;
    f_.unallocated_at_peak = reserved_ - std::min(reserved_, allocated_);
    return true;
  }
  void set_time(uint64_t ts) { ts_ = ts; }
  // The fillers that held gaps while the starting state was laid out are gone: the allocated
  // peak starts from what is live now.
  void restart_allocated_peak(uint64_t ts) {
    f_.peak_allocated = allocated_;
    f_.peak_allocated_ts = ts;
  }
  Figures& figures() { return f_; }
  uint64_t reserved() const { return reserved_; }
  uint64_t allocated() const { return allocated_; }
  Figures finish() {
    f_.final_reserved = reserved_;
    f_.final_allocated = allocated_;
    return f_;
  }

 private:
  static uint64_t grown(uint64_t v, int64_t by) {
    return by >= 0 ? v + static_cast<uint64_t>(by) : v - std::min(v, static_cast<uint64_t>(-by));
  }
  Figures f_;
  uint64_t reserved_ = 0, allocated_ = 0, ts_ = 0;
  bool peak_open_ = false;
};

// The largest free block of an allocator state: the largest gap between blocks of a segment.
// Mapped ranges of an expandable segment that touch are one run of memory, as the allocator
// sees them (a free block may span pages mapped at different times).
uint64_t largest_gap(const analysis::AllocatorState& s) {
  struct Range {
    uint64_t lo, hi;
    std::vector<std::pair<uint64_t, uint64_t>> blocks;  // [addr, end)
  };
  std::vector<const analysis::SegmentState*> segs;
  for (const auto& seg : s.segments) segs.push_back(&seg);
  std::sort(segs.begin(), segs.end(), [](auto* a, auto* b) { return a->addr < b->addr; });
  std::vector<Range> ranges;
  for (const auto* seg : segs) {
    const bool mapped = seg->kind == "mapped";
    if (mapped && !ranges.empty() && ranges.back().hi == seg->addr) {
      ranges.back().hi = seg->addr + seg->size;
    } else {
      ranges.push_back({seg->addr, seg->addr + seg->size, {}});
    }
    for (const auto& b : seg->blocks) ranges.back().blocks.emplace_back(b.addr, b.addr + b.size);
  }
  uint64_t largest = 0;
  for (Range& r : ranges) {
    std::sort(r.blocks.begin(), r.blocks.end());
    uint64_t cursor = r.lo;
    for (const auto& [lo, hi] : r.blocks) {
      if (lo > cursor) largest = std::max(largest, lo - cursor);
      cursor = std::max(cursor, hi);
    }
    if (r.hi > cursor) largest = std::max(largest, r.hi - cursor);
  }
  return largest;
}

// Builds one device's plan from its events, in seq order.
class PlanBuilder {
 public:
  // `untimed`: times are entry numbers (an imported snapshot without times), so a free and
  // its completion never share one.
  PlanBuilder(Plan& plan, bool imported, bool untimed) : plan_(plan), untimed_(untimed) {
    plan_.imported = imported;
  }

  void on(const ev::Event& e, uint64_t stack_id) {
    if (e.kind == ev::Kind::mark && e.name.name == store::kSnapshotStartMark) {
      initial_left_ = e.name.value;
      return;
    }
    if (!is_allocator_event(e.kind)) return;
    ++plan_.events;
    curves_.set_time(e.ts_ns);
    last_ts_ = e.ts_ns;
    if (initial_left_ > 0) {
      --initial_left_;
      initial(e, stack_id);
      curves_.on(e);
      return;
    }
    // A free whose free_completed follows at once is immediate; otherwise deferred.
    if (pending_free_) {
      size_t r = *pending_free_;
      pending_free_.reset();
      const uint32_t b = plan_.requests[r].block;
      // Immediate: completed at once, at the same time (tensorlib stamps both events with one
      // clock read). A deferred free can be completed by the very next request's wait for all
      // pending frees, right after it in the trace but later.
      if (e.kind == ev::Kind::free_completed && e.block.addr == plan_.blocks[b].addr &&
          (untimed_ || e.ts_ns == plan_.requests[r].ts)) {
        curves_.on(e);
        done(e.ts_ns);
        return;
      }
      plan_.requests[r].deferred = true;
      awaiting_[plan_.blocks[b].addr] = b;
    }
    // A run of segment frees in a snapshot: empty_cache unless a new segment follows.
    if (free_run_ && e.kind != ev::Kind::segment_free) {
      free_run_ = false;
      completed_by_wait(run_bytes_);
      push(Request::Kind::empty_cache, 0, run_event_);
      plan_.requests.back().retry =
          e.kind == ev::Kind::segment_alloc || e.kind == ev::Kind::segment_map;
    }
    curves_.on(e);
    switch (e.kind) {
      case ev::Kind::alloc: {
        uint32_t b = add_block(e, stack_id);
        live_[e.block.addr] = b;
        push(Request::Kind::alloc, b, e, stack_id);
        done(e.ts_ns);
        break;
      }
      case ev::Kind::free_requested: {
        auto it = live_.find(e.block.addr);
        if (it == live_.end()) {
          ++plan_.unknown_frees;
          break;
        }
        uint32_t b = it->second;
        live_.erase(it);
        pending_free_ = plan_.requests.size();
        push(Request::Kind::free, b, e, stack_id);
        break;
      }
      case ev::Kind::free_completed: {
        auto it = awaiting_.find(e.block.addr);
        if (it == awaiting_.end()) break;
        since_request_.push_back({true, plan_.requests.size()});
        push(Request::Kind::complete, it->second, e, stack_id);
        awaiting_.erase(it);
        break;
      }
      case ev::Kind::alloc_retry:
        completed_by_wait(e.allocator.released);
        break;
      case ev::Kind::segment_unmap:
        since_request_.push_back({false, e.block.size});
        break;
      case ev::Kind::segment_alloc:
        plan_.addresses.emplace_back(static_cast<uint32_t>(plan_.requests.size()), e.block.addr);
        break;
      case ev::Kind::segment_map:
        ++plan_.maps;
        // The range's base: reserved once, at the first map of a (stream, pool).
        plan_.addresses.emplace_back(static_cast<uint32_t>(plan_.requests.size()), e.block.segment);
        break;
      case ev::Kind::segment_free:
        since_request_.push_back({false, e.block.size});
        if (plan_.imported && !free_run_) {
          free_run_ = true;
          run_event_ = {e, stack_id};
          run_bytes_ = 0;
        }
        run_bytes_ += e.block.size;
        break;
      case ev::Kind::empty_cache:
        completed_by_wait(e.allocator.released);
        if (!plan_.imported) push(Request::Kind::empty_cache, 0, e, stack_id);
        break;
      case ev::Kind::oom: {
        BlockRequest br;
        br.seq = e.seq;
        br.requested = e.allocator.requested_size;
        br.size = e.allocator.requested_size;
        br.stream = e.allocator.stream;
        br.ts = e.ts_ns;
        br.stack_id = stack_id;
        br.thread = e.thread_id;
        plan_.blocks.push_back(br);
        push(Request::Kind::failed, static_cast<uint32_t>(plan_.blocks.size() - 1), e, stack_id);
        Figures& f = curves_.figures();
        ++f.failed_requests;
        if (plan_.oom_device_total == 0) plan_.oom_device_total = e.allocator.device_total;
        if (!f.first_oom) {
          Oom o;
          o.ts = e.ts_ns;
          o.requested = e.allocator.requested_size;
          o.stream = e.allocator.stream;
          o.allocated = e.allocator.allocated;
          o.reserved = e.allocator.reserved;
          o.device_free = e.allocator.device_free;
          o.stack_id = stack_id;
          f.first_oom = o;
        }
        done(e.ts_ns);
        break;
      }
      default:
        break;
    }
  }

  void finish() {
    curves_.request_done(last_ts_);
    if (free_run_) {
      free_run_ = false;
      completed_by_wait(run_bytes_);
      push(Request::Kind::empty_cache, 0, run_event_);
    }
    plan_.recorded_figures = curves_.finish();
  }

  // When the recorded reserved peak's request was done (absolute).
  uint64_t peak_request_ts() const { return plan_.recorded_figures.peak_reserved_ts; }

 private:
  struct Source {
    ev::Event event;
    uint64_t stack_id = 0;
  };

  uint32_t add_block(const ev::Event& e, uint64_t stack_id) {
    BlockRequest br;
    br.seq = e.seq;
    br.addr = e.block.addr;
    br.size = e.block.size;
    br.requested = e.block.requested_size ? e.block.requested_size : e.block.size;
    br.stream = e.block.stream;
    br.ts = e.ts_ns;
    br.stack_id = stack_id;
    br.thread = e.thread_id;
    br.category = e.block.category;
    plan_.blocks.push_back(br);
    return static_cast<uint32_t>(plan_.blocks.size() - 1);
  }

  // A wait for every pending free (the retry after a failed cudaMalloc, empty_cache) that
  // then released `released` bytes has just ended. A request's events run: frees completed as
  // it began; segments garbage collection or the oversize rule released; then the wait's own
  // completed frees and the segments it released. Walking back over segment frees worth
  // `released` bytes finds the wait's completions just before them: Request::retry. Earlier
  // ones were completed as the request began and stay as they are.
  void completed_by_wait(uint64_t released) {
    size_t i = since_request_.size();
    uint64_t freed = 0;
    while (i > 0 && !since_request_[i - 1].complete && freed < released)
      freed += since_request_[--i].value;
    while (i > 0 && since_request_[i - 1].complete)
      plan_.requests[since_request_[--i].value].retry = true;
    since_request_.clear();
  }

  void push(Request::Kind kind, uint32_t block, const ev::Event& e, uint64_t stack_id) {
    if (kind != Request::Kind::complete) since_request_.clear();
    Request r;
    r.kind = kind;
    r.block = block;
    r.seq = e.seq;
    r.ts = e.ts_ns;
    r.thread = e.thread_id;
    r.stack_id = stack_id;
    plan_.requests.push_back(r);
  }
  void push(Request::Kind kind, uint32_t block, const Source& s) {
    push(kind, block, s.event, s.stack_id);
  }

  void done(uint64_t ts) { curves_.request_done(ts); }

  // The synthetic events of an imported snapshot's starting state.
  void initial(const ev::Event& e, uint64_t stack_id) {
    switch (e.kind) {
      case ev::Kind::segment_alloc:
      case ev::Kind::segment_map: {
        InitialSegment s;
        s.addr = e.block.addr;
        s.size = e.block.size;
        s.stream = e.block.stream;
        s.pool = e.block.pool;
        s.mapped = e.kind == ev::Kind::segment_map;
        plan_.initial.push_back(s);
        break;
      }
      case ev::Kind::alloc: {
        uint32_t b = add_block(e, stack_id);
        live_[e.block.addr] = b;
        plan_.initial_blocks.push_back(b);
        break;
      }
      case ev::Kind::free_requested: {
        auto it = live_.find(e.block.addr);
        if (it == live_.end()) break;
        plan_.initial_pending.push_back(it->second);
        awaiting_[e.block.addr] = it->second;
        live_.erase(it);
        break;
      }
      default:
        break;
    }
  }

  Plan& plan_;
  bool untimed_ = false;
  Curves curves_;
  uint64_t last_ts_ = 0;
  uint64_t initial_left_ = 0;
  std::unordered_map<uint64_t, uint32_t> live_;      // recorded address -> block
  std::unordered_map<uint64_t, uint32_t> awaiting_;  // deferred frees not yet complete
  std::optional<size_t> pending_free_;               // request index of the last free
  struct Step {
    bool complete;  // a complete request (value: its index), else a segment freed (value: bytes)
    uint64_t value;
  };
  std::vector<Step> since_request_;  // completions and segment frees since the last request
  uint64_t run_bytes_ = 0;           // bytes of the current run of segment frees (snapshots)
  bool free_run_ = false;
  Source run_event_;
};

// ---- Running a plan ------------------------------------------------------------------------

// The replay's own view of its allocator's events: curves, and the caller's callback.
class ReplaySink final : public ev::Sink {
 public:
  ReplaySink(Curves& curves, const EventFn& fn) : curves_(curves), fn_(fn) {}
  void on_event(const ev::Event& e) noexcept override {
    curves_.on(e);
    if (fn_ && during_) fn_(e, *during_);
  }
  void set_request(const Request* r) { during_ = r; }

 private:
  Curves& curves_;
  const EventFn& fn_;
  const Request* during_ = nullptr;
};

class Run {
 public:
  Run(const Plan& plan, const Settings& settings, const EventFn& fn, const analysis::Trace* trace)
      : plan_(plan), trace_(trace), sink_(curves_, fn) {
    capacity_ = settings.capacity ? *settings.capacity : plan.capacity.value_or(kUnlimited);
    // The fake device's own name does not matter: replayed events are the plan's device's.
    auto fake = std::make_unique<mem::FakeDevice>(capacity_);
    fake_ = fake.get();
    allocator_ = std::make_unique<mem::CachingAllocator>(std::move(fake), settings.conf.config);
    allocator_->set_event_sink(&sink_);
    if (settings.memory_fraction) allocator_->set_memory_fraction(*settings.memory_fraction);
    ptrs_.resize(plan.blocks.size());
    if (fn) result_.addresses.resize(plan.blocks.size());
    rederived_ = rederives(plan, settings);
    prime_request_.ts = plan.requests.empty() ? 0 : plan.requests.front().ts;
    if (!plan.initial_blocks.empty())
      prime_request_.ts = plan.blocks[plan.initial_blocks.front()].ts;
  }
  ~Run() { allocator_->set_event_sink(nullptr); }

  Result go() {
    if (rederived_) {
      prime_fresh();
    } else {
      prime();
      curves_.restart_allocated_peak(prime_request_.ts);
    }
    pass();
    const uint64_t end = plan_.requests.empty() ? prime_request_.ts : plan_.requests.back().ts;
    if (curves_.request_done(end)) largest_free_at_peak_ = allocator_->largest_cached_block();
    result_.figures = curves_.finish();
    result_.figures.largest_free_at_peak = largest_free_at_peak_;
    result_.figures.failed_requests = failed_;
    result_.figures.first_oom = std::move(first_oom_);
    result_.capacity = capacity_;
    result_.rederived = rederived_;
    return std::move(result_);
  }

 private:
  // The window's requests once, in order.
  void pass() {
    size_t next_address = 0;
    const auto& addresses = plan_.addresses;
    for (size_t i = 0; i < plan_.requests.size(); ++i) {
      const Request& r = plan_.requests[i];
      while (next_address < addresses.size() && addresses[next_address].first < i) ++next_address;
      if (next_address < addresses.size() && addresses[next_address].first == i)
        fake_->prefer_address(addresses[next_address].second);
      sink_.set_request(&r);
      curves_.set_time(r.ts);
      step(r);
      fake_->prefer_address(0);
      if (curves_.request_done(r.ts)) largest_free_at_peak_ = allocator_->largest_cached_block();
    }
    sink_.set_request(nullptr);
  }

  // Note [Rederived start]: a fresh allocator holding the blocks live before the window, in
  // address order, at their requested sizes; those freed before the window still pending.
  void prime_fresh() {
    sink_.set_request(&prime_request_);
    std::vector<uint32_t> blocks = plan_.initial_blocks;
    std::sort(blocks.begin(), blocks.end(),
              [&](uint32_t a, uint32_t b) { return plan_.blocks[a].addr < plan_.blocks[b].addr; });
    for (uint32_t b : blocks) {
      try {
        ptrs_[b] = allocator_->allocate(plan_.blocks[b].requested, plan_.blocks[b].stream);
        note_address(b);
      } catch (const tl::OutOfMemoryError&) {
        ++failed_;
      }
    }
    for (uint32_t b : plan_.initial_pending) release(b, true);
    sink_.set_request(nullptr);
  }

  void step(const Request& r) {
    switch (r.kind) {
      case Request::Kind::alloc:
        allocate(r.block, r);
        break;
      case Request::Kind::failed: {
        if (allocate(r.block, r)) release(r.block, false);
        break;
      }
      case Request::Kind::free:
        release(r.block, r.deferred);
        break;
      case Request::Kind::complete: {
        if (r.retry) break;  // the allocator's own wait completes it
        auto it = pending_.find(r.block);
        if (it == pending_.end()) break;
        for (mem::EventId e = it->second.first; e < it->second.second; ++e)
          fake_->complete_event(e);
        pending_.erase(it);
        break;
      }
      case Request::Kind::empty_cache:
        if (!r.retry || capacity_ == kUnlimited) allocator_->empty_cache();
        break;
    }
  }

  bool allocate(uint32_t b, const Request& r) {
    const BlockRequest& br = plan_.blocks[b];
    try {
      ptrs_[b] = allocator_->allocate(br.requested, br.stream);
      note_address(b);
      return true;
    } catch (const tl::OutOfMemoryError& e) {
      ++failed_;
      if (!first_oom_) {
        Oom o;
        o.ts = r.ts;
        o.requested = br.requested;
        o.stream = br.stream;
        o.allocated = curves_.allocated();
        o.reserved = curves_.reserved();
        o.device_free = capacity_ - std::min<uint64_t>(capacity_, fake_->bytes_in_use());
        o.stack_id = r.stack_id;
        o.live = live_sites();
        first_oom_ = std::move(o);
      }
      return false;
    }
  }

  void note_address(uint32_t b) {
    if (!result_.addresses.empty()) result_.addresses[b] = reinterpret_cast<uint64_t>(ptrs_[b].ptr);
  }

  void release(uint32_t b, bool deferred) {
    mem::DataPtr& p = ptrs_[b];
    if (p.ptr == nullptr) return;  // never allocated (an OOM in the replay)
    if (deferred) {
      // A stream of its own per deferred free: the allocator polls each stream's events in
      // order and stops at the first incomplete one, so a shared stream would hold back a free
      // the recording completed behind one it had not; stream ids from 2^62 on name no real
      // stream, and count up so frees completed together complete in the order they were
      // deferred.
      allocator_->record_stream(p, next_deferred_stream_++);
      mem::EventId before = fake_->next_event_id();
      allocator_->deallocate(p);
      pending_[b] = {before, fake_->next_event_id()};
    } else {
      allocator_->deallocate(p);
    }
    p = {};
  }

  std::vector<Oom::Live> live_sites() const {
    std::map<std::string, Oom::Live> by_site;
    for (size_t b = 0; b < ptrs_.size(); ++b) {
      if (ptrs_[b].ptr == nullptr) continue;
      const BlockRequest& br = plan_.blocks[b];
      std::string site = trace_ ? trace_->site(br.stack_id).label : std::string("(no stack)");
      Oom::Live& l = by_site[site];
      l.site = site;
      l.bytes += mem::CachingAllocator::round_size(br.requested, allocator_->config());
      ++l.count;
    }
    std::vector<Oom::Live> out;
    for (auto& [k, v] : by_site) out.push_back(v);
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
      return a.bytes != b.bytes ? a.bytes > b.bytes : a.site < b.site;
    });
    if (out.size() > 5) out.resize(5);
    return out;
  }

  // Note [Replay fidelity]: the state before an imported snapshot's history. Each whole
  // segment is reserved again at its recorded address by one request that makes a segment of
  // its size, freed, and carved in address order: blocks take their place, gaps are held by
  // fillers so no later request lands in them, and fillers are freed once every segment is
  // laid out. Mapped ranges of expandable segments are carved the same way, without the
  // reserving request.
  void prime() {
    if (plan_.initial.empty() && plan_.initial_blocks.empty()) return;
    sink_.set_request(&prime_request_);
    // Blocks by segment.
    std::vector<uint32_t> blocks = plan_.initial_blocks;
    std::sort(blocks.begin(), blocks.end(),
              [&](uint32_t a, uint32_t b) { return plan_.blocks[a].addr < plan_.blocks[b].addr; });
    std::vector<InitialSegment> segments = plan_.initial;
    std::sort(segments.begin(), segments.end(), [](auto& a, auto& b) { return a.addr < b.addr; });
    std::vector<mem::DataPtr> fillers;
    size_t bi = 0;
    std::vector<bool> placed(plan_.blocks.size(), false);
    for (const InitialSegment& s : segments) {
      if (!s.mapped) {
        fake_->prefer_address(s.addr);
        try {
          // A small-pool request makes a 2 MiB segment; a large one of `size` bytes, its size
          // (rounded to 2 MiB, or 20 MiB under 10 MiB).
          uint64_t primer = s.pool == ev::Pool::small ? mem::kSmallSize : s.size;
          mem::DataPtr p = allocator_->allocate(primer, s.stream);
          allocator_->deallocate(p);
        } catch (const tl::OutOfMemoryError&) {
        }
        fake_->prefer_address(0);
      }
      uint64_t cursor = s.addr;
      auto carve = [&](uint64_t bytes, uint64_t stream) -> mem::DataPtr {
        try {
          return allocator_->allocate(bytes, stream);
        } catch (const tl::OutOfMemoryError&) {
          return {};
        }
      };
      // Holds a free gap so nothing lands in it until every segment is laid out: small-pool
      // gaps with requests of at most 1 MiB (larger ones go to the large pool); large-pool gaps
      // with one request, when over 1 MiB (a smaller one no large request fits anyway).
      auto fill = [&](uint64_t gap) {
        if (s.pool == ev::Pool::small) {
          for (uint64_t left = gap; left > 0;) {
            uint64_t piece = std::min<uint64_t>(left, mem::kSmallSize);
            mem::DataPtr f = carve(piece, s.stream);
            if (f.ptr) fillers.push_back(f);
            left -= piece;
          }
        } else if (gap > mem::kSmallSize) {
          mem::DataPtr f = carve(gap, s.stream);
          if (f.ptr) fillers.push_back(f);
        }
      };
      while (bi < blocks.size() && plan_.blocks[blocks[bi]].addr < s.addr) ++bi;  // outside any
      for (; bi < blocks.size() && plan_.blocks[blocks[bi]].addr < s.addr + s.size; ++bi) {
        const uint32_t b = blocks[bi];
        const BlockRequest& br = plan_.blocks[b];
        if (br.addr > cursor) fill(br.addr - cursor);
        // The block's own size when its request would round to less (an unsplit remainder).
        uint64_t ask =
            mem::CachingAllocator::round_size(br.requested, allocator_->config()) == br.size
                ? br.requested
                : br.size;
        ptrs_[b] = carve(ask, br.stream);
        note_address(b);
        placed[b] = ptrs_[b].ptr != nullptr && reinterpret_cast<uint64_t>(ptrs_[b].ptr) == br.addr;
        cursor = std::max(cursor, br.addr + br.size);
      }
      if (s.addr + s.size > cursor) fill(s.addr + s.size - cursor);
    }
    for (; bi < blocks.size(); ++bi) {  // blocks outside every segment (a damaged snapshot)
      const uint32_t b = blocks[bi];
      try {
        ptrs_[b] = allocator_->allocate(plan_.blocks[b].requested, plan_.blocks[b].stream);
        note_address(b);
      } catch (const tl::OutOfMemoryError&) {
      }
    }
    for (const mem::DataPtr& f : fillers) allocator_->deallocate(f);
    for (uint32_t b : plan_.initial_blocks)
      if (!placed[b]) ++result_.unplaced;
    for (uint32_t b : plan_.initial_pending) release(b, true);
    sink_.set_request(nullptr);
  }

  const Plan& plan_;
  const analysis::Trace* trace_;
  Curves curves_;
  ReplaySink sink_;
  uint64_t capacity_ = 0;
  mem::FakeDevice* fake_ = nullptr;
  std::unique_ptr<mem::CachingAllocator> allocator_;
  std::vector<mem::DataPtr> ptrs_;
  std::unordered_map<uint32_t, std::pair<mem::EventId, mem::EventId>> pending_;
  uint64_t failed_ = 0;
  uint64_t largest_free_at_peak_ = 0;
  std::optional<Oom> first_oom_;
  Result result_;
  Request prime_request_;  // what the starting state's events are attributed to (seq 0)
  uint64_t next_deferred_stream_ = uint64_t{1} << 62;
  bool rederived_ = false;
};

}  // namespace

std::vector<Plan> build_plans(const analysis::Trace& trace, const std::vector<int64_t>& devices) {
  const store::TraceReader& reader = trace.reader();
  std::vector<Plan> plans;
  for (const analysis::DeviceRef& d : trace.devices()) {
    if (!devices.empty() && std::find(devices.begin(), devices.end(), d.id) == devices.end())
      continue;
    Plan p;
    p.device = d;
    plans.push_back(std::move(p));
  }
  std::map<int64_t, size_t> by_row;
  for (size_t i = 0; i < plans.size(); ++i) by_row[plans[i].device.id] = i;
  std::vector<std::unique_ptr<PlanBuilder>> builders;
  for (Plan& p : plans)
    builders.push_back(
        std::make_unique<PlanBuilder>(p, trace.imported_snapshot(), trace.synthetic_times()));
  std::map<std::pair<int, int>, PlanBuilder*> by_device;
  for (const store::DeviceRow& row : reader.devices()) {
    auto it = by_row.find(row.id);
    if (it == by_row.end()) continue;
    plans[it->second].event_device = row.info.id;
    by_device[{static_cast<int>(row.info.id.type), row.info.id.index}] = builders[it->second].get();
  }
  reader.for_each_event([&](const ev::Event& e, uint64_t stack_id) {
    auto it = by_device.find({static_cast<int>(e.device.type), e.device.index});
    if (it != by_device.end()) it->second->on(e, stack_id);
  });
  std::vector<uint64_t> peak_ts;
  for (auto& b : builders) {
    b->finish();
    peak_ts.push_back(b->peak_request_ts());
  }

  const std::string settings = reader.meta_value("allocator_settings").value_or("");
  AllocConf recorded = recorded_settings(settings);
  std::vector<Plan> out;
  for (size_t i = 0; i < plans.size(); ++i) {
    Plan& p = plans[i];
    bool any_alloc = std::any_of(p.requests.begin(), p.requests.end(),
                                 [](const Request& r) { return r.kind == Request::Kind::alloc; });
    if (!any_alloc && p.initial_blocks.empty()) continue;
    p.recorded = recorded;
    if (p.maps > 0 && !p.recorded.config.expandable_segments) {
      p.recorded.config.expandable_segments = true;
      p.settings_note =
          "the trace maps pages into expandable segments, so expandable_segments:True "
          "is taken as recorded although allocator_settings does not say so";
    }
    if (p.oom_device_total > 0) {
      p.capacity = p.oom_device_total;
      p.capacity_source = "the device's total at the OOM";
    } else if (p.device.capacity > 0) {
      p.capacity = p.device.capacity;
      p.capacity_source = "recorded";
    } else if (const auto& o = p.recorded_figures.first_oom; o && o->device_free > 0) {
      p.capacity = o->reserved + o->device_free;
      p.capacity_source = "inferred from the OOM: reserved + device free";
    }
    if (p.recorded_figures.peak_reserved > 0) {
      analysis::AllocatorState s = analysis::allocator_state(trace, p.device.id, peak_ts[i]);
      p.recorded_figures.largest_free_at_peak = largest_gap(s);
    }
    out.push_back(std::move(p));
  }
  if (out.empty())
    throw SettingsError(trace.shown_path() +
                        ": no allocations to replay (the trace has no alloc events" +
                        (devices.empty() ? "" : " on that device") + ")");
  return out;
}

bool rederives(const Plan& plan, const Settings& settings) {
  if (plan.initial.empty() && plan.initial_blocks.empty()) return false;
  switch (settings.start) {
    case Start::recorded:
      return false;
    case Start::rederived:
      return true;
    case Start::automatic:
      break;
  }
  return settings.conf.text() != plan.recorded.text();
}

Result run(const Plan& plan, const Settings& settings, const EventFn& on_event,
           const analysis::Trace* trace_for_sites) {
  Run r(plan, settings, on_event, trace_for_sites);
  return r.go();
}

std::vector<Settings> default_sweep() {
  std::vector<Settings> out;
  for (bool expandable : {false, true})
    for (int split : {0, 64, 256})
      for (int divisions : {0, 4})
        for (bool gc : {false, true}) {
          std::string conf;
          auto add = [&](const std::string& kv) { conf += (conf.empty() ? "" : ",") + kv; };
          if (expandable) add("expandable_segments:True");
          if (split) add("max_split_size_mb:" + std::to_string(split));
          if (divisions) add("roundup_power2_divisions:" + std::to_string(divisions));
          if (gc) add("garbage_collection_threshold:0.8");
          Settings s;
          s.conf = parse_alloc_conf(conf);
          if (gc) s.memory_fraction = 1.0;
          s.label = conf.empty() ? "(defaults)" : conf;
          out.push_back(std::move(s));
        }
  return out;
}

std::vector<Result> sweep(const Plan& plan, const std::vector<Settings>& settings,
                          unsigned threads) {
  std::vector<Result> results(settings.size());
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<unsigned>(threads, static_cast<unsigned>(settings.size()));
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> errors(settings.size());
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < settings.size();) {
      try {
        results[i] = run(plan, settings[i]);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return results;
}

}  // namespace tidemark::replay
