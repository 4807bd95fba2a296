// Phase 3 of the PyTorch snapshot importer (pytorch_snapshot.cpp): the trace events a
// snapshot becomes. The Emitter writes allocator, scope and step events with the block and
// range bookkeeping the curves need; Contexts turns the entries' compile_context and
// user_metadata into scopes (internal to profiler/importers).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>

#include "profiler/events/events.h"
#include "profiler/importers/snapshot_reader.h"
#include "profiler/store/trace_writer.h"

namespace tidemark::importers::snapshot {

class Emitter {
 public:
  Emitter(store::TraceWriter& writer, const std::string& source_name)
      : writer_(writer), name_(source_name) {}

  struct LiveBlock {
    uint64_t size, requested, segment;
    ev::Pool pool;
  };
  struct LiveRange {
    uint64_t end;
    ev::Pool pool;
  };
  struct Device {
    ev::DeviceId id;
    std::unordered_map<uint64_t, LiveBlock> blocks;
    std::map<uint64_t, LiveRange> ranges;  // segments and mapped ranges by start
    ev::Curves curves;                     // after the events emitted so far
  };

  void block_event(Device& d, ev::Kind kind, uint64_t ts, uint64_t addr, uint64_t size,
                   uint64_t requested, uint64_t stream, uint64_t segment, ev::Pool pool,
                   uint64_t stack, ev::Category category = ev::Category::unknown) {
    ev::Event e;
    e.kind = kind;
    e.device = d.id;
    e.block = {};
    e.block.addr = addr;
    e.block.size = size;
    e.block.requested_size = requested;
    e.block.stream = stream;
    e.block.segment = segment;
    e.block.pool = pool;
    e.block.category = category;
    const ev::Curves by = ev::curve_delta(e);
    d.curves += by;
    if (by.allocated > 0) check_live(d.curves.allocated, "allocated");
    if (by.reserved > 0) check_live(d.curves.reserved, "reserved");
    append(e, ts, stack);
  }

  void mark(Device& d, uint64_t ts, const char* name, uint64_t value) {
    named(d, ev::Kind::mark, ts, name, value);
  }

  void segment_alloc(Device& d, uint64_t ts, bool mapped, uint64_t addr, uint64_t size,
                     uint64_t stream, ev::Pool pool, uint64_t segment, uint64_t stack) {
    d.ranges[addr] = {addr + size, pool};
    block_event(d, mapped ? ev::Kind::segment_map : ev::Kind::segment_alloc, ts, addr, size, 0,
                stream, segment, pool, stack);
  }

  // The segment or mapped range holding `addr`, if any.
  const std::pair<const uint64_t, LiveRange>* range_of(Device& d, uint64_t addr) {
    auto it = d.ranges.upper_bound(addr);
    if (it == d.ranges.begin()) return nullptr;
    --it;
    return addr < it->second.end ? &*it : nullptr;
  }

  void alloc(Device& d, uint64_t ts, uint64_t addr, uint64_t size, uint64_t requested,
             uint64_t stream, uint64_t stack, ev::Category category = ev::Category::unknown) {
    uint64_t segment = addr;
    ev::Pool pool = requested <= kSmallSize ? ev::Pool::small : ev::Pool::large;
    if (auto* r = range_of(d, addr)) segment = r->first, pool = r->second.pool;
    d.blocks[addr] = {size, requested, segment, pool};
    block_event(d, ev::Kind::alloc, ts, addr, size, requested, stream, segment, pool, stack,
                category);
  }

  void free(Device& d, ev::Kind kind, uint64_t ts, uint64_t addr, uint64_t trace_size,
            uint64_t stream, uint64_t stack) {
    LiveBlock b{round_block(trace_size), trace_size, addr,
                trace_size <= kSmallSize ? ev::Pool::small : ev::Pool::large};
    auto it = d.blocks.find(addr);
    if (it != d.blocks.end()) b = it->second;
    if (kind == ev::Kind::free_completed && it != d.blocks.end()) d.blocks.erase(it);
    block_event(d, kind, ts, addr, b.size, b.requested, stream, b.segment, b.pool, stack);
  }

  void segment_free(Device& d, uint64_t ts, bool mapped, uint64_t addr, uint64_t size,
                    uint64_t stream, uint64_t stack) {
    ev::Pool pool = size == kSmallBuffer ? ev::Pool::small : ev::Pool::large;
    uint64_t segment = addr;
    if (!mapped) {
      auto it = d.ranges.find(addr);
      if (it != d.ranges.end()) {
        size = it->second.end - addr;  // the whole segment, as it was allocated
        pool = it->second.pool;
        d.ranges.erase(it);
      }
    } else {
      if (auto* r = range_of(d, addr)) pool = r->second.pool, segment = r->first;
      unmap(d, addr, addr + size);
    }
    block_event(d, mapped ? ev::Kind::segment_unmap : ev::Kind::segment_free, ts, addr, size, 0,
                stream, segment, pool, stack);
  }

  void oom(Device& d, uint64_t ts, const Entry& e, uint64_t stack) {
    ev::Event x;
    x.kind = ev::Kind::oom;
    x.device = d.id;
    x.allocator = {};
    x.allocator.requested_size = e.size;
    x.allocator.stream = e.stream;
    x.allocator.device_free = e.device_free();
    x.allocator.allocated = static_cast<uint64_t>(std::max<int64_t>(d.curves.allocated, 0));
    x.allocator.reserved = static_cast<uint64_t>(std::max<int64_t>(d.curves.reserved, 0));
    append(x, ts, stack);
  }

  // A record_function range (external_annotations) opening or closing: a scope on thread 1,
  // the thread of every imported allocation, so allocations fall inside it.
  void scope(Device& d, uint64_t ts, bool push, std::string_view name) {
    named(d, push ? ev::Kind::scope_push : ev::Kind::scope_pop, ts, name, 0);
  }

  // An iteration boundary inferred from an annotation (Note [Inferred steps]).
  void step(Device& d, uint64_t ts, uint64_t number, std::string_view name) {
    named(d, ev::Kind::step, ts, name, number);
  }

  uint64_t count() const { return seq_; }

 private:
  // A mark, scope or step: a name and a value.
  void named(Device& d, ev::Kind kind, uint64_t ts, std::string_view name, uint64_t value) {
    ev::Event e;
    e.kind = kind;
    e.device = d.id;
    e.name = {};
    e.name.name = name;
    e.name.value = value;
    append(e, ts, 0);
  }

  void unmap(Device& d, uint64_t lo, uint64_t hi) {
    auto it = d.ranges.lower_bound(lo);
    if (it != d.ranges.begin() && std::prev(it)->second.end > lo) --it;
    while (it != d.ranges.end() && it->first < hi) {
      uint64_t start = it->first;
      LiveRange r = it->second;
      it = d.ranges.erase(it);
      if (start < lo) d.ranges[start] = {lo, r.pool};
      if (hi < r.end) it = d.ranges.emplace(hi, LiveRange{r.end, r.pool}).first, ++it;
    }
  }

  // Sizes are each at most 2^56 (the reader checks), but a corrupt file could sum them past
  // what the curves hold.
  void check_live(int64_t bytes, const char* curve) const {
    if (bytes > kMaxLive)
      throw ImportError(name_ + ": not a PyTorch memory snapshot: the " + curve +
                        " bytes it describes pass 2^62 (corrupt sizes?)");
  }

  void append(ev::Event& e, uint64_t ts, uint64_t stack) {
    e.ts_ns = ts;
    e.thread_id = 1;
    e.seq = ++seq_;
    writer_.append(e, stack);
    if (seq_ % (1 << 18) == 0) writer_.commit();
  }

  store::TraceWriter& writer_;
  const std::string& name_;
  uint64_t seq_ = 0;
};

// Note [Entry contexts]
// ~~~~~~~~~~~~~~~~~~~~~
// PyTorch 2.5+ writes two strings on every trace entry: `compile_context`, the torch.compile
// region the allocator was called from ("Torch-Compiled Region: 0/0"; "N/A" outside one, when
// `_record_memory_history(compile_context=True)` is off or no region is running), and
// `user_metadata`, what `torch.cuda.memory._set_memory_metadata(str)` last set ("" when
// nothing is). Both are kept as scopes, the way annotations are, so `top --by scope`,
// `summary` and the GUI group allocations by them: a maximal run of entries with the same
// value is one scope, named `compile: <value>` or `metadata: <value>`. They live on thread 1
// with the allocations and the annotations, and are kept innermost so scopes nest:
//   * a compile scope holds the metadata scope inside it (the compile region is the larger);
//   * an annotation opening or closing inside a run closes the run's scopes first, and the
//     next entry of the run opens them again inside (so one run may be several scope rows of
//     one name, each inside one record_function range);
//   * a run ends at the first entry whose value differs (its scope closes at that entry's
//     time) or at the last entry; runs are taken in the merged order of the devices' entries,
//     which on one device is that device's order.
// A value that is not a str is counted in the notes and read as none. Names are cut to 200
// bytes and control characters read as spaces, so a scope path stays one line.
class Contexts {
 public:
  Contexts(Emitter& out, const SnapshotReader& reader) : out_(out), reader_(reader) {}

  // Before an entry of device `d` at `ts` with these contexts.
  void enter(Emitter::Device& d, uint64_t ts, ContextId compile, ContextId metadata) {
    if (open_[0] != compile)
      close(ts, 1), close(ts, 0);
    else if (open_[1] != metadata)
      close(ts, 1);
    if (!open_[0] && compile) open(d, ts, 0, compile);
    if (!open_[1] && metadata) open(d, ts, 1, metadata);
  }
  // Before an annotation's scope event, and at the end.
  void leave(uint64_t ts) { close(ts, 1), close(ts, 0); }
  uint64_t scopes() const { return scopes_; }

 private:
  const std::string& name(int level, ContextId id) {
    auto [it, fresh] = names_.try_emplace(uint64_t{id} << 1 | static_cast<uint64_t>(level));
    if (fresh) {
      std::string_view v = reader_.context_text(id);
      if (v.size() > kMaxName) {
        size_t cut = kMaxName;  // not inside a UTF-8 sequence
        while (cut > 0 && (static_cast<unsigned char>(v[cut]) & 0xc0) == 0x80) --cut;
        it->second = std::string(v.substr(0, cut)) + "...";
      } else {
        it->second = v;
      }
      for (char& c : it->second)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
      it->second.insert(0, level == 0 ? "compile: " : "metadata: ");
    }
    return it->second;
  }
  void open(Emitter::Device& d, uint64_t ts, int level, ContextId id) {
    out_.scope(d, ts, true, name(level, id));
    open_[level] = id;
    device_[level] = &d;
    ++scopes_;
  }
  void close(uint64_t ts, int level) {
    if (!open_[level]) return;
    out_.scope(*device_[level], ts, false, name(level, open_[level]));
    open_[level] = 0;
  }

  static constexpr size_t kMaxName = 200;
  Emitter& out_;
  const SnapshotReader& reader_;
  ContextId open_[2] = {0, 0};  // compile, metadata
  Emitter::Device* device_[2] = {nullptr, nullptr};
  std::unordered_map<uint64_t, std::string> names_;
  uint64_t scopes_ = 0;
};

// A device of the reader (a CUDA index, or kPinnedHost) as the trace names it.
inline ev::DeviceId device_id(int d) {
  if (d == kPinnedHost) return {ev::DeviceType::cpu, 1};
  return {ev::DeviceType::cuda, static_cast<int8_t>(d)};
}

}  // namespace tidemark::importers::snapshot
