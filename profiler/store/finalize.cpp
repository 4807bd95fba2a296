// finalize(): one pass over the raw events in seq order builds every derived table
// (docs/trace-format.md, "How finalize derives the tables").
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <sqlite3.h>

#include "profiler/store/allocator_tables.h"
#include "profiler/store/compress.h"
#include "profiler/store/event_stream.h"
#include "profiler/store/lod.h"
#include "profiler/store/meta_keys.h"
#include "profiler/store/schema.h"
#include "profiler/store/trace_file.h"
#include "profiler/store/trace_writer.h"

namespace tidemark::store {

namespace ev = events;
using detail::Db;
using detail::Stmt;

namespace {

struct Key {
  int64_t device;
  uint64_t addr;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    return std::hash<uint64_t>{}(k.addr * 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(k.device));
  }
};

const char* direction_name(ev::CopyDirection d) {
  switch (d) {
    case ev::CopyDirection::host_to_device:
      return "host_to_device";
    case ev::CopyDirection::device_to_host:
      return "device_to_host";
    case ev::CopyDirection::device_to_device:
      return "device_to_device";
    case ev::CopyDirection::host_to_host:
      return "host_to_host";
  }
  return "host_to_host";
}

std::string json_dims(std::span<const int64_t> v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s + "]";
}

struct OpenAlloc {
  int64_t device;
  ev::BlockInfo block;
  uint64_t alloc_ts, seq, thread, stack;
  std::optional<uint64_t> free_requested_ts;
  std::optional<int64_t> scope;
  ev::Category category;
};

struct OpenSegment {
  int64_t device;
  const char* kind;  // "segment" or "mapped"
  uint64_t addr, size, segment, stream;
  ev::Pool pool;
  uint64_t alloc_ts, seq, thread, stack;  // of the segment_alloc / segment_map
};

struct OpenStorage {
  int64_t device;
  uint64_t storage_id, addr, nbytes, create_ts, thread, stack;
};

struct OpenTensor {
  int64_t device;
  uint64_t tensor_id, storage_id, base_id;
  std::string sizes, strides;
  int64_t offset;
  uint64_t dtype, op, create_ts, thread, stack;
};

// Note [Rows in id order]
// `tensors` and `storages` are keyed by id (schema 5), and a row is complete only at its
// release, which comes in another order than the ids (creation order). SQLite packs a table
// densely when rows arrive in key order, and an insert into the middle of a full page splits
// it in two half-empty ones; so released rows wait in a window of the kIdWindow smallest
// pending ids and are written smallest first. Almost every row then arrives in order (those
// alive at the end, the parameters, are few). Measured on the demo trace (821k events):
// tensors and storages 0.6 MB smaller.
template <class Row>
class InIdOrder {
 public:
  static constexpr size_t kIdWindow = 4096;
  void add(uint64_t id, Row row, std::optional<uint64_t> release) {
    heap_.push_back({id, next_++, std::move(row), release});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }
  bool full() const { return heap_.size() > kIdWindow; }
  bool empty() const { return heap_.empty(); }
  // Removes the row of the smallest pending id (the first added, among equal ids).
  std::pair<Row, std::optional<uint64_t>> pop() {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    Item item = std::move(heap_.back());
    heap_.pop_back();
    return {std::move(item.row), item.release};
  }

 private:
  struct Item {
    uint64_t id, order;
    Row row;
    std::optional<uint64_t> release;
  };
  struct Later {
    bool operator()(const Item& a, const Item& b) const {
      return a.id != b.id ? a.id > b.id : a.order > b.order;
    }
  };
  std::vector<Item> heap_;
  uint64_t next_ = 0;
};

struct OpenScope {
  uint64_t name;
  int64_t path;
  std::string path_text;  // empty where cut
  uint64_t value, push_ts, seq, stack;
  bool cut = false;  // Note [Scope path bound]: the path ends in "/…" and is shared inside
};

// Note [Scope path bound]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A scope's path names every scope open around it, so N nested scopes cost O(N²) bytes of
// paths: a program (or a snapshot's annotations) that opens 10,000 ranges and never closes
// them would write gigabytes. A path is at most kMaxScopePath bytes: a scope whose full path
// would be longer gets its parent's path followed by "/…", and every scope inside it shares
// that path (`name` and `depth` stay exact). Real paths are a few hundred bytes.
constexpr size_t kMaxScopePath = 4096;

class Finalizer {
 public:
  Finalizer(Db& db, const FinalizeOptions& options) : db_(db), options_(options) {}

  void run() {
    keep_frames();
    for (const char* t : detail::kDerivedTables)
      db_.exec(("DROP TABLE IF EXISTS " + std::string(t)).c_str());
    db_.exec(detail::kDerivedSchema);
    load_strings();
    load_devices();
    prepare();
    {
      Stmt q(db_, "SELECT EXISTS (SELECT 1 FROM meta WHERE key = ?)");
      q.bind(1, meta_keys::kMergedRanks);
      merged_ = q.step() && q.i64(0) != 0;
    }

    detail::EventStream stream(db_);
    while (stream.next()) on_event(stream.current());
    flush_open();
    for (auto& [device, lod] : lod_) lod.write(db_, device);
    symbolize();
    db_.exec(detail::kDerivedIndexes);

    namespace k = meta_keys;
    Stmt meta(db_, "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)");
    auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
    meta.bind(1, k::kFinalized).bind(2, int64_t{1}).run();
    meta.bind(1, k::kFinalizedUnixNs).bind(2, static_cast<int64_t>(now)).run();
    meta.bind(1, k::kFinalizedToolVersion).bind(2, TIDEMARK_VERSION).run();
    // A trace of an older schema this build upgrades becomes current here: its raw tables are
    // those of this version and every derived table was just rebuilt (in this transaction).
    meta.bind(1, k::kSchemaVersion).bind(2, int64_t{kSchemaVersion}).run();
    db_.exec(("PRAGMA user_version = " + std::to_string(kSchemaVersion)).c_str());
    if (have_ts_) {
      meta.bind(1, k::kFirstTsNs).bind(2, first_ts_).run();
      meta.bind(1, k::kLastTsNs).bind(2, last_ts_).run();
    }
    if (duplicate_ids_)
      meta.bind(1, k::kDuplicateIds).bind(2, duplicate_ids_).run();
    else
      Stmt(db_, "DELETE FROM meta WHERE key = ?").bind(1, k::kDuplicateIds).run();
  }

 private:
  void load_strings() {
    Stmt s(db_, "SELECT id, text FROM strings");
    while (s.step()) {
      std::string text = s.text(1);
      paths_.emplace(text, s.i64(0));
      auto id = static_cast<size_t>(s.i64(0));
      if (id >= strings_.size()) strings_.resize(id + 1);
      strings_[id] = std::move(text);
    }
  }

  const std::string& text(uint64_t id) const {
    static const std::string empty;
    return id < strings_.size() ? strings_[id] : empty;
  }

  // Scope paths are interned into `strings` (the raw events never use these ids).
  int64_t intern_path(const std::string& path) {
    auto it = paths_.find(path);
    if (it != paths_.end()) return it->second;
    int64_t id = static_cast<int64_t>(std::max<size_t>(strings_.size(), 1));
    Stmt(db_, "INSERT INTO strings (id, text) VALUES (?, ?)").bind(1, id).bind(2, path).run();
    strings_.resize(static_cast<size_t>(id) + 1);
    strings_[static_cast<size_t>(id)] = path;
    paths_.emplace(path, id);
    return id;
  }

  void load_devices() {
    Stmt s(db_, "SELECT id, type, idx FROM devices");
    while (s.step()) devices_[{s.text(1) == "cuda" ? 1 : 0, static_cast<int>(s.i64(2))}] = s.i64(0);
  }

  int64_t device_id(ev::DeviceId d) {
    std::pair<int, int> key{static_cast<int>(d.type), d.index};
    if (key == last_device_key_) return last_device_;
    auto it = devices_.find(key);
    if (it == devices_.end()) {
      Stmt(db_, "INSERT INTO devices (type, idx, name, capacity) VALUES (?, ?, ?, 0)")
          .bind(1, d.type == ev::DeviceType::cuda ? "cuda" : "cpu")
          .bind(2, int{d.index})
          .bind(3, d.type == ev::DeviceType::cuda ? "cuda:" + std::to_string(d.index) : "cpu")
          .run();
      it = devices_.emplace(key, last_rowid()).first;
    }
    last_device_key_ = key;
    last_device_ = it->second;
    return it->second;
  }
  int64_t last_rowid() {
    Stmt s(db_, "SELECT last_insert_rowid()");
    s.step();
    return s.i64(0);
  }

  void prepare() {
    ins_alloc_ =
        Stmt(db_,
             "INSERT INTO allocations (device, addr, size, requested_size, stream, segment, "
             "pool, alloc_ts, free_requested_ts, free_completed_ts, seq, thread, stack, "
             "scope, category) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    ins_segment_ = Stmt(db_,
                        "INSERT INTO segments (device, kind, addr, size, segment, stream, pool, "
                        "alloc_ts, free_ts, seq, thread, stack) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    ins_storage_ =
        Stmt(db_,
             "INSERT OR IGNORE INTO storages (storage_id, device, addr, nbytes, create_ts, "
             "release_ts, thread, stack) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
    ins_tensor_ = Stmt(
        db_,
        "INSERT OR IGNORE INTO tensors (tensor_id, storage_id, base_id, device, sizes, strides, "
        "storage_offset, dtype, op, create_ts, release_ts, thread, stack) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    ins_sync_ =
        Stmt(db_,
             "INSERT INTO syncs (ts, seq, device, kind, duration_ns, stream, thread, stack) "
             "VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
    ins_memcpy_ = Stmt(db_,
                       "INSERT INTO memcpys (ts, seq, device, direction, bytes, stream, pinned, "
                       "async, thread, stack) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    ins_scope_ = Stmt(db_,
                      "INSERT INTO scopes (thread, name, path, depth, value, push_ts, pop_ts, "
                      "push_seq, stack) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
    ins_step_ = Stmt(db_,
                     "INSERT INTO steps (number, ts, end_ts, seq, thread, name) "
                     "VALUES (?, ?, ?, ?, ?, ?)");
    ins_mark_ = Stmt(db_,
                     "INSERT INTO marks (ts, seq, device, name, value, thread, stack) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)");
    ins_collective_ = Stmt(db_,
                           "INSERT INTO collectives (ts, seq, device, op, bytes, group_size, rank, "
                           "group_id, duration_ns, thread, stack) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    ins_allocator_ = Stmt(db_,
                          "INSERT INTO allocator_events (ts, seq, device, kind, requested_size, "
                          "stream, device_free, device_total, allocated, reserved, released, "
                          "thread, stack) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  }

  void on_event(const DecodedEvent& d) {
    const ev::Event& e = d.event;
    if (!have_ts_) first_ts_ = last_ts_ = e.ts_ns;
    have_ts_ = true;
    first_ts_ = std::min(first_ts_, e.ts_ns);
    last_ts_ = std::max(last_ts_, e.ts_ns);
    switch (e.kind) {
      case ev::Kind::segment_alloc:
      case ev::Kind::segment_free:
      case ev::Kind::segment_map:
      case ev::Kind::segment_unmap:
        on_segment(d);
        break;
      case ev::Kind::alloc:
      case ev::Kind::free_requested:
      case ev::Kind::free_completed:
        on_block(d);
        break;
      case ev::Kind::empty_cache:
      case ev::Kind::alloc_retry:
      case ev::Kind::oom: {
        const ev::AllocatorInfo& a = e.allocator;
        ins_allocator_.bind(1, e.ts_ns)
            .bind(2, e.seq)
            .bind(3, device_id(e.device))
            .bind(4, std::string(ev::kind_name(e.kind)))
            .bind(5, a.requested_size)
            .bind(6, a.stream)
            .bind(7, a.device_free)
            .bind(8, a.device_total)
            .bind(9, a.allocated)
            .bind(10, a.reserved)
            .bind(11, a.released)
            .bind(12, e.thread_id)
            .bind(13, d.stack_id)
            .run();
        break;
      }
      case ev::Kind::storage_create: {
        auto [it, fresh] = storages_.try_emplace(e.storage.storage_id);
        OpenStorage& s = it->second;
        if (!fresh) write_storage(s, std::nullopt);  // Note [Duplicate ids]
        s = {device_id(e.device),
             e.storage.storage_id,
             e.storage.addr,
             e.storage.nbytes,
             e.ts_ns,
             e.thread_id,
             d.stack_id};
        break;
      }
      case ev::Kind::storage_release: {
        auto it = storages_.find(e.storage.storage_id);
        if (it != storages_.end()) {
          write_storage(it->second, e.ts_ns);
          storages_.erase(it);
        }
        break;
      }
      case ev::Kind::tensor_create: {
        const ev::TensorInfo& t = e.tensor;
        auto [it, fresh] = tensors_.try_emplace(t.tensor_id);
        OpenTensor& o = it->second;
        if (!fresh) write_tensor(o, std::nullopt);
        o = {device_id(e.device),  t.tensor_id,      t.storage_id, t.base_id, json_dims(t.sizes),
             json_dims(t.strides), t.storage_offset, d.str_a,      d.str_b,   e.ts_ns,
             e.thread_id,          d.stack_id};
        break;
      }
      case ev::Kind::tensor_release: {
        auto it = tensors_.find(e.tensor.tensor_id);
        if (it != tensors_.end()) {
          write_tensor(it->second, e.ts_ns);
          tensors_.erase(it);
        }
        break;
      }
      case ev::Kind::category: {
        auto it = allocs_.find({device_id(e.device), e.category.addr});
        if (it != allocs_.end()) it->second.category = e.category.category;
        break;
      }
      case ev::Kind::sync:
        ins_sync_.bind(1, e.ts_ns)
            .bind(2, e.seq)
            .bind(3, device_id(e.device))
            .bind(4, std::string(ev::sync_kind_name(e.sync.kind)))
            .bind(5, e.sync.duration_ns)
            .bind(6, e.sync.stream)
            .bind(7, e.thread_id)
            .bind(8, d.stack_id)
            .run();
        break;
      case ev::Kind::collective: {
        const ev::CollectiveInfo& c = e.collective;
        ins_collective_.bind(1, e.ts_ns)
            .bind(2, e.seq)
            .bind(3, device_id(e.device))
            .bind(4, std::string(ev::collective_op_name(c.op)))
            .bind(5, c.bytes)
            .bind(6, int64_t{c.group_size})
            .bind(7, int64_t{c.rank})
            .bind(8, c.group)
            .bind(9, c.duration_ns)
            .bind(10, e.thread_id)
            .bind(11, d.stack_id)
            .run();
        break;
      }
      case ev::Kind::memcpy:
        ins_memcpy_.bind(1, e.ts_ns)
            .bind(2, e.seq)
            .bind(3, device_id(e.device))
            .bind(4, direction_name(e.memcpy.direction))
            .bind(5, e.memcpy.bytes)
            .bind(6, e.memcpy.stream)
            .bind(7, int{e.memcpy.pinned})
            .bind(8, int{e.memcpy.async})
            .bind(9, e.thread_id)
            .bind(10, d.stack_id)
            .run();
        break;
      case ev::Kind::scope_push: {
        auto& stack = scopes_[e.thread_id];
        if (!stack.empty() && stack.back().cut) {
          stack.push_back(
              {d.str_a, stack.back().path, {}, e.name.value, e.ts_ns, e.seq, d.stack_id, true});
          break;
        }
        const std::string& name = text(d.str_a);
        const std::string parent = stack.empty() ? std::string() : stack.back().path_text + "/";
        const bool cut = parent.size() + name.size() > kMaxScopePath;
        std::string path = parent + (cut ? "…" : name);
        int64_t path_id = intern_path(path);
        if (cut) path.clear();
        stack.push_back(
            {d.str_a, path_id, std::move(path), e.name.value, e.ts_ns, e.seq, d.stack_id, cut});
        break;
      }
      case ev::Kind::scope_pop: {
        // Pops the innermost scope of that name (and any left open inside it); a pop without
        // a name pops the innermost; a pop matching nothing is ignored.
        auto& stack = scopes_[e.thread_id];
        size_t k = stack.size();
        if (d.str_a != 0) {
          while (k > 0 && stack[k - 1].name != d.str_a) --k;
        }
        if (k == 0) break;
        while (stack.size() >= k) {
          write_scope(e.thread_id, stack.size() - 1, stack.back(), e.ts_ns);
          stack.pop_back();
        }
        break;
      }
      case ev::Kind::step: {
        // A step ends at the next step of its run: in a merged trace, of its rank.
        const uint64_t run = merged_ ? e.thread_id >> kMergedRankShift : 0;
        if (auto it = pending_steps_.find(run); it != pending_steps_.end()) {
          write_step(it->second, e.ts_ns);
          it->second = d;
        } else {
          pending_steps_.emplace(run, d);
        }
        break;
      }
      case ev::Kind::mark:
        ins_mark_.bind(1, e.ts_ns)
            .bind(2, e.seq)
            .bind(3, device_id(e.device))
            .bind(4, d.str_a)
            .bind(5, e.name.value)
            .bind(6, e.thread_id)
            .bind(7, d.stack_id)
            .run();
        break;
    }
  }

  // A block event changes its device's curves (Note [Memory curves] in
  // profiler/events/events.h): level 0 of the level of detail keeps the curves after it.
  void add_change(int64_t dev, const ev::Event& e) {
    detail::Curves& c = curves_[dev];
    c += ev::curve_delta(e);
    lod_[dev].add(e.ts_ns, e.seq, c);
  }

  void on_segment(const DecodedEvent& d) {
    const ev::Event& e = d.event;
    const ev::BlockInfo& b = e.block;
    int64_t dev = device_id(e.device);
    switch (e.kind) {
      case ev::Kind::segment_alloc: {
        auto [it, fresh] = segments_.try_emplace({dev, b.addr});
        OpenSegment& s = it->second;
        if (!fresh) write_segment(s, std::nullopt);
        s = {dev,    "segment", b.addr, b.size,      b.segment, b.stream,
             b.pool, e.ts_ns,   e.seq,  e.thread_id, d.stack_id};
        break;
      }
      case ev::Kind::segment_free: {
        auto it = segments_.find({dev, b.addr});
        if (it != segments_.end()) {
          write_segment(it->second, e.ts_ns);
          segments_.erase(it);
        }
        break;
      }
      case ev::Kind::segment_map:
        mapped_[dev][b.addr] = {dev,    "mapped", b.addr, b.size,      b.segment, b.stream,
                                b.pool, e.ts_ns,  e.seq,  e.thread_id, d.stack_id};
        break;
      case ev::Kind::segment_unmap: {
        // Unmapping may cover part of one mapped range or several: the covered pieces end
        // here, the rest stays mapped with its original start time.
        auto& ranges = mapped_[dev];
        const uint64_t lo = b.addr, hi = b.addr + b.size;
        auto it = ranges.lower_bound(lo);
        if (it != ranges.begin() && std::prev(it)->second.addr + std::prev(it)->second.size > lo)
          --it;
        while (it != ranges.end() && it->first < hi) {
          OpenSegment r = it->second;
          it = ranges.erase(it);
          uint64_t r_end = r.addr + r.size;
          uint64_t cut_lo = std::max(lo, r.addr), cut_hi = std::min(hi, r_end);
          OpenSegment cut = r;
          cut.addr = cut_lo;
          cut.size = cut_hi - cut_lo;
          write_segment(cut, e.ts_ns);
          if (r.addr < cut_lo) {
            OpenSegment left = r;
            left.size = cut_lo - r.addr;
            ranges[left.addr] = left;
          }
          if (cut_hi < r_end) {
            OpenSegment right = r;
            right.addr = cut_hi;
            right.size = r_end - cut_hi;
            it = ranges.emplace(right.addr, right).first;
            ++it;
          }
        }
        break;
      }
      default:
        break;
    }
    add_change(dev, e);
  }

  void on_block(const DecodedEvent& d) {
    const ev::Event& e = d.event;
    const ev::BlockInfo& b = e.block;
    if (b.size > kMaxEventBytes || b.requested_size > kMaxEventBytes)
      throw StoreError(db_.path() + ": damaged trace: event " + std::to_string(e.seq) + " (" +
                       std::string(ev::kind_name(e.kind)) + ") has a size of " +
                       std::to_string(std::max(b.size, b.requested_size)) +
                       " bytes, more than 2^56");
    int64_t dev = device_id(e.device);
    switch (e.kind) {
      case ev::Kind::alloc: {
        auto [it, fresh] = allocs_.try_emplace({dev, b.addr});
        OpenAlloc& a = it->second;
        if (!fresh) write_alloc(a, std::nullopt);  // never freed (events were lost)
        std::optional<int64_t> scope;
        auto sit = scopes_.find(e.thread_id);
        if (sit != scopes_.end() && !sit->second.empty()) scope = sit->second.back().path;
        a = {dev, b, e.ts_ns, e.seq, e.thread_id, d.stack_id, std::nullopt, scope, b.category};
        break;
      }
      case ev::Kind::free_requested: {
        auto it = allocs_.find({dev, b.addr});
        if (it != allocs_.end() && !it->second.free_requested_ts)
          it->second.free_requested_ts = e.ts_ns;
        break;
      }
      case ev::Kind::free_completed: {
        auto it = allocs_.find({dev, b.addr});
        if (it != allocs_.end()) {
          write_alloc(it->second, e.ts_ns);
          allocs_.erase(it);
        }
        break;
      }
      default:
        break;
    }
    add_change(dev, e);
  }

  void write_alloc(const OpenAlloc& a, std::optional<uint64_t> free_completed) {
    const ev::BlockInfo& b = a.block;
    ins_alloc_.bind(1, a.device)
        .bind(2, b.addr)
        .bind(3, b.size)
        .bind(4, b.requested_size)
        .bind(5, b.stream)
        .bind(6, b.segment)
        .bind(7, pool_name(b.pool))
        .bind(8, a.alloc_ts)
        .bind(9, a.free_requested_ts)
        .bind(10, free_completed)
        .bind(11, a.seq)
        .bind(12, a.thread)
        .bind(13, a.stack)
        .bind(14, a.scope)
        .bind(15, std::string(ev::category_name(a.category)))
        .run();
  }

  void write_segment(const OpenSegment& s, std::optional<uint64_t> free_ts) {
    ins_segment_.bind(1, s.device)
        .bind(2, s.kind)
        .bind(3, s.addr)
        .bind(4, s.size)
        .bind(5, s.segment)
        .bind(6, s.stream)
        .bind(7, pool_name(s.pool))
        .bind(8, s.alloc_ts)
        .bind(9, free_ts)
        .bind(10, s.seq)
        .bind(11, s.thread)
        .bind(12, s.stack)
        .run();
  }

  // Note [Duplicate ids]
  // `tensors` and `storages` are keyed by the ids the program gave (schema 5): tensorlib draws
  // them from process-wide counters, so an id created twice means a damaged trace. The first
  // record of an id is kept -- the row of a record created again before its release says
  // "never released" -- every later one is counted in meta `duplicate_ids`, never an error
  // that would lose the whole trace.
  // Note [Rows in id order]: a row waits in its window; `drain_pending_rows` writes the rest.
  void write_storage(const OpenStorage& s, std::optional<uint64_t> release_ts) {
    pending_storages_.add(s.storage_id, s, release_ts);
    if (pending_storages_.full()) insert_storage(pending_storages_.pop());
  }
  void write_tensor(const OpenTensor& t, std::optional<uint64_t> release_ts) {
    pending_tensors_.add(t.tensor_id, t, release_ts);
    if (pending_tensors_.full()) insert_tensor(pending_tensors_.pop());
  }
  void drain_pending_rows() {
    while (!pending_storages_.empty()) insert_storage(pending_storages_.pop());
    while (!pending_tensors_.empty()) insert_tensor(pending_tensors_.pop());
  }
  void insert_storage(const std::pair<OpenStorage, std::optional<uint64_t>>& row) {
    const auto& [s, release_ts] = row;
    ins_storage_.bind(1, s.storage_id)
        .bind(2, s.device)
        .bind(3, s.addr)
        .bind(4, s.nbytes)
        .bind(5, s.create_ts)
        .bind(6, release_ts)
        .bind(7, s.thread)
        .bind(8, s.stack)
        .run();
    count_duplicate();
  }
  void insert_tensor(const std::pair<OpenTensor, std::optional<uint64_t>>& row) {
    const auto& [t, release_ts] = row;
    ins_tensor_.bind(1, t.tensor_id)
        .bind(2, t.storage_id)
        .bind(3, t.base_id)
        .bind(4, t.device)
        .bind(5, t.sizes)
        .bind(6, t.strides)
        .bind(7, t.offset)
        .bind(8, t.dtype)
        .bind(9, t.op)
        .bind(10, t.create_ts)
        .bind(11, release_ts)
        .bind(12, t.thread)
        .bind(13, t.stack)
        .run();
    count_duplicate();
  }

  // After an INSERT OR IGNORE: no row changed means the id had one already.
  void count_duplicate() {
    if (sqlite3_changes(db_.handle()) == 0) ++duplicate_ids_;
  }

  void write_scope(uint64_t thread, size_t depth, const OpenScope& s,
                   std::optional<uint64_t> pop_ts) {
    ins_scope_.bind(1, thread)
        .bind(2, s.name)
        .bind(3, s.path)
        .bind(4, static_cast<int64_t>(depth))
        .bind(5, s.value)
        .bind(6, s.push_ts)
        .bind(7, pop_ts)
        .bind(8, s.seq)
        .bind(9, s.stack)
        .run();
  }

  void write_step(const DecodedEvent& d, std::optional<uint64_t> end_ts) {
    ins_step_.bind(1, d.event.name.value)
        .bind(2, d.event.ts_ns)
        .bind(3, end_ts)
        .bind(4, d.event.seq)
        .bind(5, d.event.thread_id)
        .bind(6, d.str_a)
        .run();
  }

  // What is still open at the end of the trace gets its row with NULL end times.
  void flush_open() {
    std::vector<const OpenAlloc*> allocs;
    for (auto& [k, a] : allocs_) allocs.push_back(&a);
    std::sort(allocs.begin(), allocs.end(), [](auto* x, auto* y) { return x->seq < y->seq; });
    for (auto* a : allocs) write_alloc(*a, std::nullopt);
    std::vector<const OpenSegment*> segs;
    for (auto& [k, s] : segments_) segs.push_back(&s);
    for (auto& [dev, ranges] : mapped_)
      for (auto& [addr, s] : ranges) segs.push_back(&s);
    std::sort(segs.begin(), segs.end(), [](auto* x, auto* y) { return x->seq < y->seq; });
    for (auto* s : segs) write_segment(*s, std::nullopt);
    for (auto& [id, s] : std::map<uint64_t, OpenStorage>(storages_.begin(), storages_.end()))
      write_storage(s, std::nullopt);
    for (auto& [id, t] : std::map<uint64_t, OpenTensor>(tensors_.begin(), tensors_.end()))
      write_tensor(t, std::nullopt);
    drain_pending_rows();
    for (auto& [thread, stack] :
         std::map<uint64_t, std::vector<OpenScope>>(scopes_.begin(), scopes_.end()))
      for (size_t i = 0; i < stack.size(); ++i) write_scope(thread, i, stack[i], std::nullopt);
    std::vector<const DecodedEvent*> last_steps;
    for (const auto& [run, d] : pending_steps_) last_steps.push_back(&d);
    std::sort(
        last_steps.begin(), last_steps.end(),
        [](const DecodedEvent* x, const DecodedEvent* y) { return x->event.seq < y->event.seq; });
    for (const DecodedEvent* d : last_steps) write_step(*d, std::nullopt);
  }

  // Note [Kept frames]: the frames an earlier finalize stored were resolved where and when the
  // trace was recorded (or given by an importer). An address the symbolizer cannot resolve now
  // -- the binary is gone or was never here, there is no module list, an imported snapshot's
  // frame numbers -- keeps them, so finalizing again (to upgrade an older schema, say) never
  // loses symbols.
  void keep_frames() {
    if (!db_.table_exists("frames")) return;
    Stmt s(db_, "SELECT ip, function, file, line, inlined, module FROM frames ORDER BY ip, depth");
    while (s.step()) {
      kept_frames_[s.u64(0)].push_back(
          {s.text(1), s.text(2), static_cast<int>(s.i64(3)), s.i64(4) != 0, s.text(5)});
    }
  }

  void symbolize() {
    if (!options_.symbolize && kept_frames_.empty()) return;
    Stmt ips(db_, "SELECT DISTINCT ip FROM stack_nodes ORDER BY ip");
    Stmt ins(db_,
             "INSERT INTO frames (ip, depth, function, file, line, inlined, module) "
             "VALUES (?, ?, ?, ?, ?, ?, ?)");
    while (ips.step()) {
      uint64_t ip = ips.u64(0);
      std::vector<ResolvedFrame> frames;
      if (options_.symbolize) frames = options_.symbolize(ip);
      if (frames.empty()) {
        if (auto kept = kept_frames_.find(ip); kept != kept_frames_.end())
          frames = std::move(kept->second);
      }
      for (size_t i = 0; i < frames.size(); ++i) {
        const ResolvedFrame& f = frames[i];
        ins.bind(1, ip)
            .bind(2, static_cast<int64_t>(i))
            .bind(3, f.function)
            .bind(4, f.file)
            .bind(5, f.line)
            .bind(6, int{f.inlined})
            .bind(7, f.module)
            .run();
      }
    }
  }

  Db& db_;
  const FinalizeOptions& options_;
  std::vector<std::string> strings_;
  std::unordered_map<std::string, int64_t> paths_;
  std::map<std::pair<int, int>, int64_t> devices_;
  std::pair<int, int> last_device_key_{-1, -1};
  int64_t last_device_ = 0;
  Stmt ins_alloc_, ins_segment_, ins_storage_, ins_tensor_, ins_sync_, ins_memcpy_, ins_scope_,
      ins_step_, ins_mark_, ins_allocator_, ins_collective_;

  std::unordered_map<Key, OpenAlloc, KeyHash> allocs_;
  std::unordered_map<Key, OpenSegment, KeyHash> segments_;
  std::map<int64_t, std::map<uint64_t, OpenSegment>> mapped_;
  std::unordered_map<uint64_t, OpenStorage> storages_;
  std::unordered_map<uint64_t, OpenTensor> tensors_;
  InIdOrder<OpenStorage> pending_storages_;
  InIdOrder<OpenTensor> pending_tensors_;
  std::unordered_map<uint64_t, std::vector<OpenScope>> scopes_;
  std::map<uint64_t, DecodedEvent> pending_steps_;  // by run: the rank in a merged trace, else 0
  bool merged_ = false;
  std::unordered_map<uint64_t, std::vector<ResolvedFrame>> kept_frames_;  // by ip
  std::map<int64_t, detail::Curves> curves_;
  std::map<int64_t, detail::LodBuilder> lod_;
  bool have_ts_ = false;
  uint64_t first_ts_ = 0, last_ts_ = 0;
  uint64_t duplicate_ids_ = 0;
};

}  // namespace

namespace {
// Versions before 5 stored each event block's encoding as it is, 5 and 6 in a zstd frame
// without a checksum (Note [Compressed blobs]); 7 seals it with its row in a checksummed
// frame (Note [Sealed blocks] in event_codec.cpp). Upgrading such a trace seals its blocks in
// place, in finalize's transaction, so the raw tables are this version's too. A block that
// does not decode as its version wrote it is damaged: finalize refuses it, the file unchanged.
void seal_event_blocks(Db& db, int version) {
  const BlockForm form = block_form(version);
  std::vector<int64_t> ids;
  for (Stmt s(db, "SELECT id FROM event_blocks ORDER BY id"); s.step();) ids.push_back(s.i64(0));
  Stmt read(db, (std::string("SELECT data, ") + detail::kBlockHeaderColumns +
                 " FROM event_blocks WHERE id = ?")
                    .c_str());
  Stmt write(db, "UPDATE event_blocks SET data = ? WHERE id = ?");
  std::vector<uint8_t> encoding;
  DecodedBlock check;
  for (int64_t id : ids) {
    read.reset();
    read.bind(1, id);
    if (!read.step()) continue;
    const std::string what = db.path() + ": event block " + std::to_string(id);
    const BlockHeader header = detail::block_header(read, 1, what);
    block_encoding(read.blob(0), header, form, encoding, what);
    decode_block(encoding, header, BlockForm::encoded, check, what);
    std::vector<uint8_t> stored = seal_block(encoding, header);
    read.reset();
    write.bind_blob(1, stored).bind(2, id).run();
  }
}
bool has_column(Db& db, const char* table, const char* column) {
  for (Stmt s(db, ("PRAGMA table_info(" + std::string(table) + ")").c_str()); s.step();)
    if (s.text(1) == column) return true;
  return false;
}
}  // namespace

void finalize(const std::string& path, const FinalizeOptions& options) {
  int version = 0;
  std::unique_ptr<Db> db;
  std::error_code ec;
  const bool had_wal = std::filesystem::exists(path + "-wal", ec),
             had_shm = std::filesystem::exists(path + "-shm", ec);
  try {
    // Opening writes too (the -shm, the WAL index, grows): no room there is no room.
    db = detail::open_trace(path, Db::Mode::read_write, detail::Need::upgradable, &version);
    if (options.journal == Journal::none) detail::write_without_journal(*db);
    detail::Transaction tx(*db);
    if (version < 7) seal_event_blocks(*db, version);
    if (version < 6 && !has_column(*db, "devices", "rank")) db->exec(detail::kDevicesV6);
    Finalizer(*db, options).run();
    tx.commit();
  } catch (const StoreError& e) {
    if (e.cause() != StoreError::Cause::disk_full) throw;
    // The transaction rolled back: the raw events are as they were, finalize can run later,
    // and the -wal and -shm that opening made (empty: nothing was committed) go too, when
    // closing could not remove them itself: the files are what they were.
    db.reset();
    if (!had_wal && std::filesystem::exists(path + "-wal", ec) &&
        std::filesystem::file_size(path + "-wal", ec) == 0 && !ec) {
      std::filesystem::remove(path + "-wal", ec);
      if (!had_shm) std::filesystem::remove(path + "-shm", ec);
    }
    // The derived tables take several times the raw events' size (docs/trace-format.md).
    // A recording that was killed holds its events in the -wal, the main file a few pages:
    // the trace is both.
    std::error_code size_ec, wal_ec, dir_ec;
    uint64_t bytes = std::filesystem::file_size(path, size_ec);
    const uint64_t wal = std::filesystem::file_size(path + "-wal", wal_ec);
    if (!wal_ec) bytes += wal;
    const std::filesystem::path dir = std::filesystem::absolute(path, dir_ec).parent_path();
    const uint64_t need_mib = size_ec ? 1 : std::max<uint64_t>(1, (8 * bytes) >> 20);
    throw StoreError(
        path + ": cannot finalize: no room to write in " + dir.string() +
            " (a full disk, a quota or a file size limit); the trace is unchanged: "
            "free about " +
            std::to_string(need_mib) +
            " MiB there (eight times the trace, its -wal included) and run `tidemark finalize " +
            path + "`",
        StoreError::Cause::disk_full);
  }
  // The derived tables are large: fold them into the main file right away. Best effort: the
  // transaction is committed in the -wal, which every reader reads with the file, and a
  // checkpoint that fails (no room for the main file to grow) leaves the -wal whole; the next
  // writer, or reader that can, folds it in.
  try {
    if (options.journal == Journal::none)
      db->exec("PRAGMA journal_mode = WAL");
    else
      db->exec("PRAGMA wal_checkpoint(TRUNCATE)");
  } catch (const StoreError&) {
  }
}

}  // namespace tidemark::store
