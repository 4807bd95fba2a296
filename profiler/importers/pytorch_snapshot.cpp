// PyTorch memory snapshot -> Tidemark trace (pytorch_snapshot.h, docs/importers.md). Phase 1
// (reading) is in snapshot_reader.h.
//
// Three phases, so little is written before the snapshot has been checked (frames are checked
// as they are interned; a failure then removes the partial trace):
//   1. read: the pickle (pickle.h) into plain structs, checking every field used;
//   2. reconstruct: per device, walk device_traces backwards from the final segments to the
//      state before the trace (blocks allocated or pending free, segments, mapped ranges);
//   3. emit: that state as synthetic events at the first trace time, then the trace, merged
//      across devices by time, through store::TraceWriter; then close and finalize.
//
// Note [Synthetic times]
// ~~~~~~~~~~~~~~~~~~~~~~
// PyTorch before 2.1 wrote trace entries without `time_us`. memory_viz then draws the entries
// in order, one step each, and so does the importer: when any entry lacks a time, every entry's
// time is its place in its device's trace (entry i at i microseconds), the meta says so
// (`synthetic_times`, start_unix_ns 0) and the CLI and GUI show event numbers, not seconds.
// Devices are then merged in device order at equal places; annotations, whose times would
// not fit the entries', are left out (counted in the notes).
#include "profiler/importers/pytorch_snapshot.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "profiler/importers/pickle.h"
#include "profiler/importers/snapshot_file.h"
#include "profiler/importers/snapshot_infer.h"
#include "profiler/importers/snapshot_stacks.h"
#include "profiler/importers/snapshot_reader.h"
#include "profiler/store/trace_writer.h"

namespace tidemark::importers {

namespace {
// TIDEMARK_IMPORT_PHASES=1: each phase's time since the import began and the process's memory,
// on stderr (docs/performance.md). A diagnostic for whoever measures the importer.
void phase(const char* what) {
  static const bool on = std::getenv("TIDEMARK_IMPORT_PHASES") != nullptr;
  if (!on) return;
  static auto t0 = std::chrono::steady_clock::now();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  long rss = 0, hwm = 0;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      std::sscanf(line, "VmRSS: %ld", &rss);
      std::sscanf(line, "VmHWM: %ld", &hwm);
    }
    std::fclose(f);
  }
  std::fprintf(stderr, "[phase] %-20s %7.2f s  rss %6ld MB  hwm %6ld MB\n", what, s, rss / 1024, hwm / 1024);
}
}  // namespace

namespace ev = tidemark::events;

namespace {

using namespace snapshot;  // NOLINT: the reader's model, shared by the phases
using pickle::Ref;
using pickle::Type;

// ---- Phase 2: the state before the trace --------------------------------------------------------

// Disjoint [start, end) ranges (mapped parts of expandable segments).
class RangeSet {
 public:
  void add(uint64_t lo, uint64_t hi) {
    if (lo >= hi) return;
    remove(lo, hi);
    ranges_[lo] = hi;
  }
  void remove(uint64_t lo, uint64_t hi) {
    if (lo >= hi) return;
    auto it = ranges_.lower_bound(lo);
    if (it != ranges_.begin() && std::prev(it)->second > lo) --it;
    while (it != ranges_.end() && it->first < hi) {
      uint64_t start = it->first, end = it->second;
      it = ranges_.erase(it);
      if (start < lo) ranges_[start] = lo;
      if (hi < end) it = ranges_.emplace(hi, end).first, ++it;
    }
  }
  const std::map<uint64_t, uint64_t>& ranges() const { return ranges_; }

 private:
  std::map<uint64_t, uint64_t> ranges_;
};

struct InitialBlock {
  uint64_t addr, size, requested, stream;
  BlockState state;
  FrameRun frames;
};
struct InitialSegment {
  uint64_t addr, size, stream;
  ev::Pool pool;
  bool mapped;
  FrameRun frames;
};

struct DeviceState {
  std::vector<InitialSegment> segments;  // whole segments, then mapped ranges
  std::vector<InitialBlock> blocks;      // pending-free ones first
  // Trace index of an alloc whose block is still allocated at the end -> its exact size.
  std::unordered_map<size_t, uint64_t> exact_size;
};

// The snapshot's final segments by device and address, for the pool of a segment event.
class FinalSegments {
 public:
  explicit FinalSegments(const std::vector<Segment>& segments) {
    for (const Segment& s : segments) (s.expandable ? expandable_ : whole_)[{s.device, s.addr}] = &s;
  }
  const Segment* whole_at(int device, uint64_t addr) const {
    auto it = whole_.find({device, addr});
    return it == whole_.end() ? nullptr : it->second;
  }
  // The expandable segment whose final mapped range holds `addr`.
  const Segment* expandable_at(int device, uint64_t addr) const {
    auto it = expandable_.upper_bound({device, addr});
    if (it == expandable_.begin()) return nullptr;
    --it;
    const Segment* s = it->second;
    return s->device == device && addr < s->addr + s->size ? s : nullptr;
  }

 private:
  std::map<std::pair<int, uint64_t>, const Segment*> whole_, expandable_;
};

DeviceState reconstruct(int device, const std::vector<Segment>& segments, const FinalSegments& final,
                        const std::vector<Entry>& trace) {
  struct Live {
    BlockState state;
    uint64_t size, requested, stream;
    bool exact;  // from the final segments
    FrameRun frames;
  };
  struct LiveSegment {
    uint64_t size, stream;
    ev::Pool pool;
    FrameRun frames;
  };
  std::unordered_map<uint64_t, Live> blocks;
  std::map<uint64_t, LiveSegment> segs;
  RangeSet mapped;
  for (const Segment& s : segments) {
    if (s.device != device) continue;
    if (s.expandable)
      mapped.add(s.addr, s.addr + s.size);
    else
      segs[s.addr] = {s.size, s.stream, s.pool, s.frames};
    for (const Block& b : s.blocks) blocks[b.addr] = {b.state, b.size, b.requested, s.stream, true, b.frames};
  }

  DeviceState out;
  // Undo each action, last to first.
  for (size_t i = trace.size(); i-- > 0;) {
    const Entry& e = trace[i];
    switch (e.action) {
      case Action::alloc: {
        auto it = blocks.find(e.addr);
        if (it != blocks.end()) {
          if (it->second.exact) out.exact_size[i] = it->second.size;
          blocks.erase(it);
        }
        break;
      }
      case Action::free_requested: {
        auto [it, fresh] = blocks.try_emplace(e.addr);
        if (fresh) it->second = {BlockState::allocated, round_block(e.size), e.size, e.stream, false, e.frames};
        it->second.state = BlockState::allocated;
        break;
      }
      case Action::free_completed:
        blocks[e.addr] = {BlockState::pending, round_block(e.size), e.size, e.stream, false, e.frames};
        break;
      case Action::free:  // before it: allocated
        blocks[e.addr] = {BlockState::allocated, round_block(e.size), e.size, e.stream, false, e.frames};
        break;
      case Action::segment_alloc: segs.erase(e.addr); break;
      case Action::segment_free:
        segs[e.addr] = {e.size, e.stream, e.size == kSmallBuffer ? ev::Pool::small : ev::Pool::large, e.frames};
        break;
      case Action::segment_map: mapped.remove(e.addr, e.addr + e.size); break;
      case Action::segment_unmap: mapped.add(e.addr, e.addr + e.size); break;
      default: break;
    }
  }
  for (auto& [addr, s] : segs) out.segments.push_back({addr, s.size, s.stream, s.pool, false, s.frames});
  for (auto& [lo, hi] : mapped.ranges()) {
    ev::Pool pool = ev::Pool::large;
    if (const Segment* s = final.expandable_at(device, lo)) pool = s->pool;
    out.segments.push_back({lo, hi - lo, 0, pool, true, {}});
  }
  for (auto& [addr, b] : blocks) out.blocks.push_back({addr, b.size, b.requested, b.stream, b.state, b.frames});
  std::sort(out.blocks.begin(), out.blocks.end(), [](const InitialBlock& x, const InitialBlock& y) {
    return std::pair(x.state != BlockState::pending, x.addr) < std::pair(y.state != BlockState::pending, y.addr);
  });
  return out;
}

// ---- Phase 3: emitting ------------------------------------------------------------------------

class Emitter {
 public:
  Emitter(store::TraceWriter& writer, const std::string& source_name) : writer_(writer), name_(source_name) {}

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
    int64_t allocated = 0, reserved = 0;
  };

  void block_event(Device& d, ev::Kind kind, uint64_t ts, uint64_t addr, uint64_t size, uint64_t requested,
                   uint64_t stream, uint64_t segment, ev::Pool pool, uint64_t stack,
                   ev::Category category = ev::Category::unknown) {
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
    append(e, ts, stack);
  }

  void mark(Device& d, uint64_t ts, const char* name, uint64_t value) {
    named(d, ev::Kind::mark, ts, name, value);
  }

  void segment_alloc(Device& d, uint64_t ts, bool mapped, uint64_t addr, uint64_t size, uint64_t stream,
                     ev::Pool pool, uint64_t segment, uint64_t stack) {
    d.ranges[addr] = {addr + size, pool};
    d.reserved += static_cast<int64_t>(size);
    check_live(d.reserved, "reserved");
    block_event(d, mapped ? ev::Kind::segment_map : ev::Kind::segment_alloc, ts, addr, size, 0, stream,
                segment, pool, stack);
  }

  // The segment or mapped range holding `addr`, if any.
  const std::pair<const uint64_t, LiveRange>* range_of(Device& d, uint64_t addr) {
    auto it = d.ranges.upper_bound(addr);
    if (it == d.ranges.begin()) return nullptr;
    --it;
    return addr < it->second.end ? &*it : nullptr;
  }

  void alloc(Device& d, uint64_t ts, uint64_t addr, uint64_t size, uint64_t requested, uint64_t stream,
             uint64_t stack, ev::Category category = ev::Category::unknown) {
    uint64_t segment = addr;
    ev::Pool pool = requested <= kSmallSize ? ev::Pool::small : ev::Pool::large;
    if (auto* r = range_of(d, addr)) segment = r->first, pool = r->second.pool;
    d.blocks[addr] = {size, requested, segment, pool};
    d.allocated += static_cast<int64_t>(size);
    check_live(d.allocated, "allocated");
    block_event(d, ev::Kind::alloc, ts, addr, size, requested, stream, segment, pool, stack, category);
  }

  void free(Device& d, ev::Kind kind, uint64_t ts, uint64_t addr, uint64_t trace_size, uint64_t stream,
            uint64_t stack) {
    LiveBlock b{round_block(trace_size), trace_size, addr,
                trace_size <= kSmallSize ? ev::Pool::small : ev::Pool::large};
    auto it = d.blocks.find(addr);
    if (it != d.blocks.end()) b = it->second;
    if (kind == ev::Kind::free_requested) d.allocated -= static_cast<int64_t>(b.size);
    if (kind == ev::Kind::free_completed && it != d.blocks.end()) d.blocks.erase(it);
    block_event(d, kind, ts, addr, b.size, b.requested, stream, b.segment, b.pool, stack);
  }

  void segment_free(Device& d, uint64_t ts, bool mapped, uint64_t addr, uint64_t size, uint64_t stream,
                    uint64_t stack) {
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
    d.reserved -= static_cast<int64_t>(size);
    block_event(d, mapped ? ev::Kind::segment_unmap : ev::Kind::segment_free, ts, addr, size, 0, stream,
                segment, pool, stack);
  }

  void oom(Device& d, uint64_t ts, const Entry& e, uint64_t stack) {
    ev::Event x;
    x.kind = ev::Kind::oom;
    x.device = d.id;
    x.allocator = {};
    x.allocator.requested_size = e.size;
    x.allocator.stream = e.stream;
    x.allocator.device_free = e.device_free();
    x.allocator.allocated = static_cast<uint64_t>(std::max<int64_t>(d.allocated, 0));
    x.allocator.reserved = static_cast<uint64_t>(std::max<int64_t>(d.reserved, 0));
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
ev::DeviceId device_id(int d) {
  if (d == kPinnedHost) return {ev::DeviceType::cpu, 1};
  return {ev::DeviceType::cuda, static_cast<int8_t>(d)};
}

// Note [Private pools]
// ~~~~~~~~~~~~~~~~~~~~
// A segment's `segment_pool_id` is (0, 0) in the caching allocator's default pool and another
// pair in a private one: a CUDA graph's (torch.cuda.graph, the CUDA graph trees of
// torch.compile's reduce-overhead mode) or a torch.cuda.MemPool's, whose blocks serve only
// that pool's requests. The event contract has no pool identity (events.h `Pool` is the small
// or large pool), and the curves stay as memory_stats() counts them (a private pool's
// segments in reserved, its blocks in allocated), so the import keeps its events as they are
// and records, per device and private pool, the segments and reserved bytes of the snapshot's
// `segments` (the state when it was taken) in the optional meta key `private_pools`:
//   [{"device": "cuda:0", "pool": [0, 1], "segments": 44, "reserved_bytes": 4194304}, ...]
// by device, then pool; absent when every segment is in the default pool. Trace entries name
// no pool, so a private pool's segments freed before the snapshot are not counted. `tidemark
// summary` lists them per device; `tidemark replay` still treats them as the default pool's.
std::vector<PrivatePool> private_pools(const std::vector<Segment>& segments) {
  std::map<std::pair<int, std::pair<int64_t, int64_t>>, PrivatePool> by_pool;
  for (const Segment& s : segments) {
    if (s.pool_id == std::pair<int64_t, int64_t>{0, 0}) continue;
    PrivatePool& p = by_pool[{s.device, s.pool_id}];
    p.device = s.device == kPinnedHost ? "cpu:1" : "cuda:" + std::to_string(s.device);
    p.pool = s.pool_id;
    ++p.segments;
    p.reserved_bytes += s.size;
  }
  std::vector<PrivatePool> out;
  for (auto& [k, p] : by_pool) out.push_back(std::move(p));
  return out;
}

std::string private_pools_json(const std::vector<PrivatePool>& pools) {
  if (pools.empty()) return {};
  std::string j = "[";
  for (const PrivatePool& p : pools)
    j += (j.size() > 1 ? ", " : "") + std::string("{\"device\": \"") + p.device + "\", \"pool\": [" +
         std::to_string(p.pool.first) + ", " + std::to_string(p.pool.second) +
         "], \"segments\": " + std::to_string(p.segments) +
         ", \"reserved_bytes\": " + std::to_string(p.reserved_bytes) + "}";
  return j + "]";
}

}  // namespace

namespace detail {

static ImportStats convert(Input input, const std::string& source_name, const OpenWriter& open_writer,
                           store::SymbolizeFn* symbolize, uint64_t* end_ts_ns, const ImportOptions& options) {
  check_pickle_start(input.bytes.substr(0, 16), source_name);
  const uint64_t input_bytes = input.bytes.size();
  phase("start");
  SnapshotReader reader(source_name);
  reader.on_consumed = input.drop_before;
  pickle::Document doc;
  try {
    doc = pickle::parse(input.bytes, std::move(input.keep), {}, &reader);
  } catch (const pickle::PickleError& e) {
    throw ImportError(source_name + ": " + e.what());
  }

  phase("parsed");
  reader.set_document(&doc);
  reader.set_limits(input_bytes, options.max_events);
  reader.read(doc.root());

  phase("read");
  // Devices: any with segments or trace entries.
  std::map<int, DeviceState> states;
  for (const Segment& s : reader.segments_) states.try_emplace(s.device);
  for (auto& [d, t] : reader.traces_) states.try_emplace(d);
  static const std::vector<Entry> kNoEntries;
  const FinalSegments final(reader.segments_);
  for (auto& [d, state] : states) {
    auto it = reader.traces_.find(d);
    state = reconstruct(d, reader.segments_, final, it == reader.traces_.end() ? kNoEntries : it->second);
  }

  phase("reconstructed");
  // Annotations on a device without memory are left out (there is no device to put them on).
  std::vector<Annotation> annotations;
  for (const Annotation& a : reader.annotations_) {
    if (states.count(a.device))
      annotations.push_back(a);
    else
      reader.notes_.add("annotations on a device with no memory in the snapshot (left out)");
  }

  uint64_t t0 = 0, t_end = 0;
  bool any = false;
  auto span = [&](uint64_t t) {
    if (!any || t < t0) t0 = t;
    t_end = std::max(t_end, t);
    any = true;
  };
  for (auto& [d, t] : reader.traces_)
    for (const Entry& e : t) span(e.time_ns);
  for (const Annotation& a : annotations) span(a.time_ns);

  // Note [Inferred categories] (infer.cpp): a snapshot none of whose allocs names a category
  // (PyTorch's own) gets them inferred from frames, annotations and lifetimes.
  bool has_categories = false;
  for (auto& [d, t] : reader.traces_)
    for (const Entry& e : t) has_categories = has_categories || e.category != ev::Category::unknown;
  std::map<int, DeviceInference> inferred;
  if (!has_categories) {
    for (auto& [d, state] : states) {
      std::vector<StartBlock> start;
      for (const InitialBlock& b : state.blocks) start.push_back({b.addr, b.state == BlockState::pending, b.frames});
      std::vector<Annotation> mine;
      for (const Annotation& a : annotations)
        if (a.device == d) mine.push_back(a);
      auto it = reader.traces_.find(d);
      inferred[d] = infer_device(reader, it == reader.traces_.end() ? kNoEntries : it->second, start, mine, t0);
    }
  }
  std::vector<const DeviceInference*> inference;
  for (auto& [d, i] : inferred) inference.push_back(&i);

  Stacks stacks(reader, reader.notes_);
  store::TraceMeta meta;
  meta.categories_inferred = inference_basis(inference);
  meta.command_line = "pytorch-snapshot:" + source_name;
  // PyTorch's time_us is Unix time; synthetic times (Note [Synthetic times]) are not.
  meta.start_unix_ns = reader.synthetic_times_ ? 0 : static_cast<int64_t>(t0);
  meta.start_ts_ns = t0;
  meta.synthetic_times = reader.synthetic_times_;
  meta.allocator_settings = reader.allocator_settings_;
  for (auto& [d, state] : states) {
    store::DeviceInfo info;
    info.id = device_id(d);
    info.name = d == kPinnedHost ? "pinned host" : "cuda:" + std::to_string(d);
    meta.devices.push_back(info);
  }
  std::vector<PrivatePool> pools = private_pools(reader.segments_);
  meta.private_pools = private_pools_json(pools);
  // stack_depth: the deepest frames list (a cheap pass; lists are shared between entries).
  {
    size_t depth = 0;
    for (auto& [d, t] : reader.traces_)
      for (const Entry& e : t) depth = std::max(depth, reader.run_items(e.frames).second);
    for (const Segment& s : reader.segments_)
      for (const Block& b : s.blocks) depth = std::max(depth, reader.run_items(b.frames).second);
    meta.stack_depth = static_cast<int>(std::min<size_t>(depth, std::numeric_limits<int>::max()));
  }
  store::TraceWriter& writer = open_writer(meta);
  stacks.set_writer(&writer);
  Emitter out(writer, source_name);

  // The state before the trace, at its first time.
  std::map<int, Emitter::Device> devices;
  for (auto& [d, state] : states) {
    Emitter::Device& dev = devices[d];
    dev.id = device_id(d);
    uint64_t synthetic = state.segments.size() + state.blocks.size();
    for (const InitialBlock& b : state.blocks) synthetic += b.state == BlockState::pending;
    out.mark(dev, t0, kStartMark, synthetic);
    for (const InitialSegment& s : state.segments) {
      uint64_t stack = stacks.stack(s.frames);
      out.segment_alloc(dev, t0, s.mapped, s.addr, s.size, s.stream, s.pool, s.addr, stack);
    }
    const DeviceInference* inf = inferred.count(d) ? &inferred[d] : nullptr;
    for (size_t j = 0; j < state.blocks.size(); ++j) {
      const InitialBlock& b = state.blocks[j];
      uint64_t stack = stacks.stack(b.frames);
      out.alloc(dev, t0, b.addr, b.size, b.requested, b.stream, stack,
                inf ? inf->start[j] : ev::Category::unknown);
      if (b.state == BlockState::pending)
        out.free(dev, ev::Kind::free_requested, t0, b.addr, b.requested, b.stream, stack);
    }
  }

  // Note [Inferred steps]
  // ~~~~~~~~~~~~~~~~~~~~~
  // A snapshot says nothing of iterations, but the record_function ranges PyTorch writes into
  // external_annotations often do: torch.profiler's `ProfilerStep#N`, and the optimizer's
  // `Optimizer.zero_grad#<class>.zero_grad` and `Optimizer.step#<class>.step`. A step event is
  // written, numbered 1, 2, ..., at the start of each ProfilerStep range when the snapshot has
  // any; else at the start of each zero_grad range (a training loop clears the gradients as
  // an iteration begins); else at the end of each optimizer step (the next iteration begins
  // there). The event's name says it was inferred and from what ("inferred from
  // Optimizer.zero_grad#AdamW.zero_grad"), so `tidemark steps`, per-step growth and the
  // detectors that need steps work on the snapshot, and say where the steps came from.
  enum class StepRule { none, profiler_step, zero_grad, optimizer_step };
  StepRule rule = StepRule::none;
  auto rule_of = [](std::string_view name) {
    if (name.starts_with("ProfilerStep#")) return StepRule::profiler_step;
    if (name.starts_with("Optimizer.zero_grad")) return StepRule::zero_grad;
    if (name.starts_with("Optimizer.step")) return StepRule::optimizer_step;
    return StepRule::none;
  };
  for (const Annotation& a : annotations) {
    StepRule r = rule_of(a.name);
    if (r != StepRule::none && (rule == StepRule::none || r < rule)) rule = r;
  }
  uint64_t steps = 0;
  auto maybe_step = [&](const Annotation& a) {
    if (rule == StepRule::none || rule_of(a.name) != rule) return;
    if (a.start != (rule != StepRule::optimizer_step)) return;
    out.step(devices[a.device], a.time_ns, ++steps, "inferred from " + std::string(a.name));
  };

  // The trace, merged across devices by time (each device's own order kept), with the
  // annotations as scopes: one opening at time t comes before the entries at t, one closing
  // after them.
  struct Cursor {
    int device;
    const std::vector<Entry>* entries;
    size_t next;
  };
  std::vector<Cursor> cursors;
  for (auto& [d, t] : reader.traces_) cursors.push_back({d, &t, 0});
  size_t next_annotation = 0;
  // Steps from the optimizer's frames when no annotation gave any (Note [Inferred categories],
  // rule 4), each after the entries at its time.
  std::vector<std::pair<uint64_t, int>> frame_steps;
  if (rule == StepRule::none)
    for (auto& [d, i] : inferred)
      for (uint64_t ts : i.step_ends)
        if (d != kPinnedHost) frame_steps.emplace_back(ts, d);  // the GPUs' steps: the same iterations
  std::sort(frame_steps.begin(), frame_steps.end());
  size_t next_frame_step = 0;
  Contexts contexts(out, reader);
  uint64_t last_ts = t0;
  for (;;) {
    Cursor* c = nullptr;
    for (Cursor& k : cursors)
      if (k.next < k.entries->size() && (!c || (*k.entries)[k.next].time_ns < (*c->entries)[c->next].time_ns)) c = &k;
    if (next_frame_step < frame_steps.size() &&
        (!c || frame_steps[next_frame_step].first < (*c->entries)[c->next].time_ns)) {
      auto [ts, d] = frame_steps[next_frame_step++];
      out.step(devices[d], ts, ++steps,
               inferred[d].step_basis == infer::Phase::backward ? "inferred from backward frames"
                                                                 : "inferred from optimizer frames");
      continue;
    }
    if (next_annotation < annotations.size()) {
      const Annotation& a = annotations[next_annotation];
      if (!c || a.time_ns < (*c->entries)[c->next].time_ns ||
          (a.start && a.time_ns == (*c->entries)[c->next].time_ns)) {
        if (a.start) maybe_step(a);
        contexts.leave(a.time_ns);  // Note [Entry contexts]: they stay innermost
        out.scope(devices[a.device], a.time_ns, a.start, a.name);
        if (!a.start) maybe_step(a);
        ++next_annotation;
        continue;
      }
    }
    if (!c) break;
    const size_t i = c->next++;
    const Entry& e = (*c->entries)[i];
    Emitter::Device& dev = devices[c->device];
    const DeviceState& state = states[c->device];
    uint64_t stack = stacks.stack(e.frames);
    const uint64_t ts = e.time_ns;
    contexts.enter(dev, ts, e.compile_context, e.user_metadata);
    last_ts = std::max(last_ts, ts);
    switch (e.action) {
      case Action::alloc: {
        auto exact = state.exact_size.find(i);
        uint64_t size = exact != state.exact_size.end() ? exact->second : round_block(e.size);
        const ev::Category category = inferred.empty() ? e.category : inferred[c->device].entries[i];
        out.alloc(dev, ts, e.addr, size, e.size, e.stream, stack, category);
        break;
      }
      case Action::free_requested: out.free(dev, ev::Kind::free_requested, ts, e.addr, e.size, e.stream, stack); break;
      case Action::free_completed: out.free(dev, ev::Kind::free_completed, ts, e.addr, e.size, e.stream, stack); break;
      case Action::free:
        out.free(dev, ev::Kind::free_requested, ts, e.addr, e.size, e.stream, stack);
        out.free(dev, ev::Kind::free_completed, ts, e.addr, e.size, e.stream, stack);
        break;
      case Action::segment_alloc:
      case Action::segment_map: {
        const bool mapped = e.action == Action::segment_map;
        ev::Pool pool = e.size == kSmallBuffer ? ev::Pool::small : ev::Pool::large;
        if (const Segment* s = mapped ? final.expandable_at(c->device, e.addr) : final.whole_at(c->device, e.addr))
          pool = s->pool;
        out.segment_alloc(dev, ts, mapped, e.addr, e.size, e.stream, pool, e.addr, stack);
        break;
      }
      case Action::segment_free:
      case Action::segment_unmap:
        out.segment_free(dev, ts, e.action == Action::segment_unmap, e.addr, e.size, e.stream, stack);
        break;
      case Action::snapshot: out.mark(dev, ts, kSnapshotMark, e.size); break;
      case Action::oom: out.oom(dev, ts, e, stack); break;
      case Action::other: break;
    }
  }
  contexts.leave(last_ts);

  phase("emitted");
  ImportStats stats;
  stats.events = out.count();
  stats.segments = reader.segments_.size();
  stats.frames = stacks.frame_count();
  stats.devices = static_cast<int>(states.size());
  stats.annotations = annotations.size();
  stats.context_scopes = contexts.scopes();
  stats.inferred_steps = frame_steps.empty() ? steps : 0;
  stats.frame_steps = frame_steps.empty() ? 0 : steps;
  for (const auto& [d, i] : inferred)
    if (!i.step_ends.empty() && d != kPinnedHost)
      stats.frame_steps_from = i.step_basis == infer::Phase::backward ? "backward" : "optimizer";
  stats.categories_inferred = meta.categories_inferred;
  stats.synthetic_times = reader.synthetic_times_;
  stats.notes = reader.notes_.lines();
  stats.private_pools = std::move(pools);
  if (end_ts_ns) *end_ts_ns = t_end;
  if (symbolize) {
    auto frames = std::make_shared<std::vector<store::ResolvedFrame>>(stacks.take_frames());
    *symbolize = [frames](uint64_t ip) -> std::vector<store::ResolvedFrame> {
      if (ip == 0 || ip > frames->size()) return {};
      return {(*frames)[ip - 1]};
    };
  }
  return stats;
}

ImportStats convert_pytorch_snapshot(std::string pickle_bytes, const std::string& source_name,
                                     const OpenWriter& open_writer, store::SymbolizeFn* symbolize,
                                     uint64_t* end_ts_ns, const ImportOptions& options) {
  auto data = std::make_shared<const std::string>(std::move(pickle_bytes));
  Input in;
  in.bytes = *data;
  in.keep = std::move(data);
  return convert(std::move(in), source_name, open_writer, symbolize, end_ts_ns, options);
}

void remove_trace(const std::string& path) noexcept {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path + suffix, ec);
}

void rethrow_as_import_error(const std::string& source_name) {
  try {
    throw;
  } catch (const ImportError&) {
    throw;
  } catch (const store::StoreError& e) {
    throw ImportError(std::string(e.what()));
  } catch (const std::bad_alloc&) {
    throw ImportError(source_name + ": out of memory while importing");
  }
}

}  // namespace detail

namespace {
ImportStats import_input(detail::Input input, const std::string& trace_path, const std::string& source_name,
                         const ImportOptions& options) {
  std::unique_ptr<store::TraceWriter> writer;
  bool writing = false;  // from here on, a failure leaves a partial trace to remove
  try {
    store::SymbolizeFn symbolize;
    uint64_t end_ts = 0;
    ImportStats stats = detail::convert(
        std::move(input), source_name,
        [&](const store::TraceMeta& meta) -> store::TraceWriter& {
          writing = true;
          writer = store::TraceWriter::create(trace_path, meta);
          return *writer;
        },
        &symbolize, &end_ts, options);
    writer->close(end_ts);
    writer.reset();
    phase("closed");
    store::FinalizeOptions options;
    options.symbolize = symbolize;
    store::finalize(trace_path, options);
    phase("finalized");
    return stats;
  } catch (...) {
    writer.reset();
    if (writing) detail::remove_trace(trace_path);
    detail::rethrow_as_import_error(source_name);
  }
}

}  // namespace

ImportStats import_pytorch_snapshot_data(std::string pickle_bytes, const std::string& trace_path,
                                         const std::string& source_name, const ImportOptions& options) {
  auto data = std::make_shared<const std::string>(std::move(pickle_bytes));
  detail::Input in;
  in.bytes = *data;
  in.keep = std::move(data);
  return import_input(std::move(in), trace_path, source_name, options);
}

ImportStats import_pytorch_snapshot(const std::string& pickle_path, const std::string& trace_path,
                                    const ImportOptions& options) {
  phase("begin");
  return import_input(detail::open_snapshot_file(pickle_path), trace_path, pickle_path, options);
}

}  // namespace tidemark::importers
