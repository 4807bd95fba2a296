// PyTorch memory snapshot -> Tidemark trace (pytorch_snapshot.h, docs/importers.md). Phase 1
// (reading) is in snapshot_reader.cpp.
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

#include "profiler/importers/snapshot_emitter.h"
#include "profiler/importers/snapshot_file.h"
#include "profiler/importers/snapshot_infer.h"
#include "profiler/importers/snapshot_reader.h"
#include "profiler/importers/snapshot_stacks.h"
#include "profiler/pickle/pickle.h"
#include "profiler/store/trace_writer.h"

namespace tidemark::importers {

// The step mark `tidemark record`'s Python hook writes (Note [Inferred steps]).
constexpr std::string_view kStepMark = "tidemark.step";

namespace {
// TIDEMARK_IMPORT_PHASES=1: each phase's time since the import began and the process's memory,
// on stderr (docs/performance.md). A diagnostic for whoever measures the importer.
void phase(const char* what) {
  static const bool on = std::getenv("TIDEMARK_IMPORT_PHASES") != nullptr;
  if (!on) return;
  static auto t0 = std::chrono::steady_clock::now();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  long rss = 0, hwm = 0, file = 0;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      std::sscanf(line, "VmRSS: %ld", &rss);
      std::sscanf(line, "VmHWM: %ld", &hwm);
      std::sscanf(line, "RssFile: %ld", &file);  // of it, mapped file pages (the input's)
    }
    std::fclose(f);
  }
  std::fprintf(stderr, "[phase] %-20s %7.2f s  rss %6ld MB  hwm %6ld MB  file %6ld MB\n", what, s,
               rss / 1024, hwm / 1024, file / 1024);
}
}  // namespace

namespace ev = tidemark::events;

namespace {

using namespace snapshot;  // NOLINT: the reader's model, shared by the phases
using pickle::Ref;
using pickle::Type;

// Note [Annotation depth]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Annotations become scopes on one thread, and a scope's path names every scope around it, so
// N ranges that open and never close cost O(N²) bytes of paths (10,000 START-only entries, a
// 0.4 MB pickle, made a 1.8 GB trace). Real programs nest record_function ranges a few dozen
// deep, and a ring buffer that dropped the ENDs leaves a few hundred open at most. A START
// deeper than kMaxAnnotationDepth open ranges is left out, and so is the END that closes it (an
// END of that name while some are left out; closing an outer range closes them all), counted
// in the notes. Step marks are not scopes and do not count.
constexpr size_t kMaxAnnotationDepth = 256;

void bound_annotation_depth(std::vector<Annotation>& annotations, Notes& notes) {
  std::vector<std::string_view> open;  // innermost last
  std::unordered_map<std::string_view, uint64_t> skipped;
  uint64_t skipped_total = 0, left_out = 0;
  size_t kept = 0;
  for (const Annotation& a : annotations) {
    bool keep = true;
    if (a.name == kStepMark) {
    } else if (a.start) {
      if (open.size() >= kMaxAnnotationDepth) {
        keep = false, ++skipped[a.name], ++skipped_total;
      } else {
        open.push_back(a.name);
      }
    } else if (auto it = skipped.find(a.name); it != skipped.end() && it->second > 0) {
      keep = false, --it->second, --skipped_total;
    } else {
      // As finalize pops: the innermost range of that name, and any left open inside it.
      size_t k = open.size();
      while (k > 0 && open[k - 1] != a.name) --k;
      if (k > 0) {
        open.resize(k - 1);
        if (skipped_total) skipped.clear(), skipped_total = 0;
      }
    }
    if (keep)
      annotations[kept++] = a;
    else
      ++left_out;
  }
  annotations.resize(kept);
  if (left_out)
    notes.add("annotations nested deeper than " + std::to_string(kMaxAnnotationDepth) +
                  " open ranges (left out)",
              left_out);
}

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
    for (const Segment& s : segments)
      (s.expandable ? expandable_ : whole_)[{s.device, s.addr}] = &s;
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

DeviceState reconstruct(int device, const std::vector<Segment>& segments,
                        const FinalSegments& final, const std::vector<Entry>& trace) {
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
    for (const Block& b : s.blocks)
      blocks[b.addr] = {b.state, b.size, b.requested, s.stream, true, b.frames};
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
        if (fresh)
          it->second = {
              BlockState::allocated, round_block(e.size), e.size, e.stream, false, e.frames};
        it->second.state = BlockState::allocated;
        break;
      }
      case Action::free_completed:
        blocks[e.addr] = {
            BlockState::pending, round_block(e.size), e.size, e.stream, false, e.frames};
        break;
      case Action::free:  // before it: allocated
        blocks[e.addr] = {
            BlockState::allocated, round_block(e.size), e.size, e.stream, false, e.frames};
        break;
      case Action::segment_alloc:
        segs.erase(e.addr);
        break;
      case Action::segment_free:
        segs[e.addr] = {e.size, e.stream,
                        e.size == kSmallBuffer ? ev::Pool::small : ev::Pool::large, e.frames};
        break;
      case Action::segment_map:
        mapped.remove(e.addr, e.addr + e.size);
        break;
      case Action::segment_unmap:
        mapped.add(e.addr, e.addr + e.size);
        break;
      default:
        break;
    }
  }
  for (auto& [addr, s] : segs)
    out.segments.push_back({addr, s.size, s.stream, s.pool, false, s.frames});
  for (auto& [lo, hi] : mapped.ranges()) {
    ev::Pool pool = ev::Pool::large;
    if (const Segment* s = final.expandable_at(device, lo)) pool = s->pool;
    out.segments.push_back({lo, hi - lo, 0, pool, true, {}});
  }
  for (auto& [addr, b] : blocks)
    out.blocks.push_back({addr, b.size, b.requested, b.stream, b.state, b.frames});
  std::sort(out.blocks.begin(), out.blocks.end(), [](const InitialBlock& x, const InitialBlock& y) {
    return std::pair(x.state != BlockState::pending, x.addr) <
           std::pair(y.state != BlockState::pending, y.addr);
  });
  return out;
}

// ---- Phase 3: emitting (the events: snapshot_emitter.h) ----------------------------------------

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
    const ev::DeviceId id = device_id(s.device);  // the trace's name for it: "cuda:0", "cpu:1"
    p.device =
        std::string(id.type == ev::DeviceType::cpu ? "cpu:" : "cuda:") + std::to_string(id.index);
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
    j += (j.size() > 1 ? ", " : "") + std::string("{\"device\": \"") + p.device +
         "\", \"pool\": [" + std::to_string(p.pool.first) + ", " + std::to_string(p.pool.second) +
         "], \"segments\": " + std::to_string(p.segments) +
         ", \"reserved_bytes\": " + std::to_string(p.reserved_bytes) + "}";
  return j + "]";
}

}  // namespace

namespace detail {

static ImportStats convert(Input input, const std::string& source_name,
                           const OpenWriter& open_writer, store::SymbolizeFn* symbolize,
                           uint64_t* end_ts_ns, const ImportOptions& options) {
  check_pickle_start(input.bytes.substr(0, 16), source_name);
  const uint64_t input_bytes = input.bytes.size();
  phase("start");
  SnapshotReader reader(source_name);
  reader.on_consumed = input.drop_before;
  reader.set_limits(input_bytes, options.max_events);
  pickle::Document doc;
  try {
    doc = pickle::parse(input.bytes, std::move(input.keep), {}, &reader);
  } catch (const pickle::PickleError& e) {
    throw ImportError(source_name + ": " + e.what());
  }

  phase("parsed");
  reader.set_document(&doc);
  reader.read(doc.root());

  phase("read");
  // Devices: any with segments or trace entries.
  std::map<int, DeviceState> states;
  for (const Segment& s : reader.segments()) states.try_emplace(s.device);
  for (auto& [d, t] : reader.traces()) states.try_emplace(d);
  static const std::vector<Entry> kNoEntries;
  const FinalSegments final(reader.segments());
  for (auto& [d, state] : states) {
    auto it = reader.traces().find(d);
    state = reconstruct(d, reader.segments(), final,
                        it == reader.traces().end() ? kNoEntries : it->second);
  }

  phase("reconstructed");
  // Annotations on a device without memory are left out (there is no device to put them on).
  std::vector<Annotation> annotations;
  for (const Annotation& a : reader.annotations()) {
    if (states.count(a.device))
      annotations.push_back(a);
    else
      reader.notes().add("annotations on a device with no memory in the snapshot (left out)");
  }
  bound_annotation_depth(annotations, reader.notes());

  uint64_t t0 = 0, t_end = 0;
  bool any = false;
  auto span = [&](uint64_t t) {
    if (!any || t < t0) t0 = t;
    t_end = std::max(t_end, t);
    any = true;
  };
  for (auto& [d, t] : reader.traces())
    for (const Entry& e : t) span(e.time_ns);
  for (const Annotation& a : annotations) span(a.time_ns);

  // Note [Inferred categories] (infer.cpp): a snapshot none of whose allocs names a category
  // (PyTorch's own) gets them inferred from frames, annotations and lifetimes.
  bool has_categories = false;
  for (auto& [d, t] : reader.traces())
    for (const Entry& e : t) has_categories = has_categories || e.category != ev::Category::unknown;
  std::map<int, DeviceInference> inferred;
  // Frames left out past the bound read alike (Note [Frame bound]): the allocations past it
  // would look like one site repeated, a loop's steps.
  if (!has_categories && reader.frames_left_out() > 0) {
    reader.notes().add(
        "devices whose categories and steps were not inferred (frames were left out)",
        states.size());
  } else if (!has_categories) {
    for (auto& [d, state] : states) {
      std::vector<StartBlock> start;
      for (const InitialBlock& b : state.blocks)
        start.push_back({b.addr, b.state == BlockState::pending, b.frames, b.requested});
      std::vector<Annotation> mine;
      for (const Annotation& a : annotations)
        if (a.device == d) mine.push_back(a);
      auto it = reader.traces().find(d);
      inferred[d] = infer_device(reader, it == reader.traces().end() ? kNoEntries : it->second,
                                 start, mine, t0);
    }
  }
  std::vector<const DeviceInference*> inference;
  for (auto& [d, i] : inferred) inference.push_back(&i);

  Stacks stacks(reader, reader.notes());
  store::TraceMeta meta;
  meta.categories_inferred = inference_basis(inference);
  meta.command_line = "pytorch-snapshot:" + source_name;
  // PyTorch's time_us is Unix time; synthetic times (Note [Synthetic times]) are not.
  meta.start_unix_ns = reader.synthetic_times() ? 0 : static_cast<int64_t>(t0);
  meta.start_ts_ns = t0;
  meta.synthetic_times = reader.synthetic_times();
  meta.allocator_settings = reader.allocator_settings();
  meta.estimated = reader.estimated();
  meta.rank = options.rank;
  meta.world_size = options.world_size;
  for (auto& [d, state] : states) {
    store::DeviceInfo info;
    info.id = device_id(d);
    info.name = d == kPinnedHost ? "pinned host" : "cuda:" + std::to_string(d);
    meta.devices.push_back(info);
  }
  std::vector<PrivatePool> pools = private_pools(reader.segments());
  meta.private_pools = private_pools_json(pools);
  // stack_depth: the deepest frames list (a cheap pass; lists are shared between entries).
  {
    size_t depth = 0;
    for (auto& [d, t] : reader.traces())
      for (const Entry& e : t) depth = std::max(depth, reader.run_items(e.frames).second);
    for (const Segment& s : reader.segments())
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
  // Marks come first: `tidemark.step`, a point (START and END at one time) that `tidemark
  // record`'s Python hook writes where each optimizer step (or the --step-on function) ended;
  // a step begins at each, and the marks are not scopes.
  // Steps from where iterations end (optimizer steps' ends here, the optimizer's or backward's
  // frames and repeated allocations below) begin a step at each end but the last when nothing
  // follows it -- a snapshot dumped right after its optimizer step -- and then one at the
  // window's start instead: the window's iterations are its steps (one recorded iteration is
  // one step, where it was a step of 1 ns after it).
  enum class StepRule { none, marked, profiler_step, zero_grad, optimizer_step };
  StepRule rule = StepRule::none;
  auto rule_of = [](std::string_view name) {
    if (name == kStepMark) return StepRule::marked;
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
  // The optimizer steps' last end, when no entry follows it: the window's start begins the
  // first step instead.
  const Annotation* trailing_end = nullptr;
  if (rule == StepRule::optimizer_step) {
    for (const Annotation& a : annotations)
      if (!a.start && rule_of(a.name) == rule &&
          (!trailing_end || a.time_ns >= trailing_end->time_ns))
        trailing_end = &a;
    for (auto& [d, t] : reader.traces())
      if (trailing_end && !t.empty() && t.back().time_ns > trailing_end->time_ns)
        trailing_end = nullptr;
  }
  auto maybe_step = [&](const Annotation& a) {
    if (rule == StepRule::none || rule_of(a.name) != rule) return;
    if (a.start != (rule != StepRule::optimizer_step)) return;
    if (&a == trailing_end) return;
    out.step(devices[a.device], a.time_ns, ++steps,
             rule == StepRule::marked ? std::string("marked by tidemark record's Python hook")
                                      : "inferred from " + std::string(a.name));
  };
  if (trailing_end) {
    uint64_t first = trailing_end->time_ns;
    for (auto& [d, t] : reader.traces())
      if (!t.empty()) first = std::min(first, t.front().time_ns);
    for (const Annotation& a : annotations) first = std::min(first, a.time_ns);
    out.step(devices[trailing_end->device], first, ++steps,
             "inferred from " + std::string(trailing_end->name));
  }

  // The trace, merged across devices by time (each device's own order kept), with the
  // annotations as scopes: one opening at time t comes before the entries at t, one closing
  // after them.
  struct Cursor {
    int device;
    const std::vector<Entry>* entries;
    size_t next;
  };
  std::vector<Cursor> cursors;
  for (auto& [d, t] : reader.traces()) cursors.push_back({d, &t, 0});
  size_t next_annotation = 0;
  // Steps from the optimizer's frames when no annotation gave any (Note [Inferred categories],
  // rule 4); from the repeated allocations (rule 5) only when no device's frames gave any, and
  // then from the one device with the most iterations (the same loop drives every GPU: their
  // repetitions would be the same steps again). Each comes between two entries of its device
  // (by order, not time: a fast loop's entries share microseconds). Per device, the entries a
  // step comes just before (entries.size(): after the last).
  std::map<int, std::vector<uint64_t>> frame_steps;
  infer::StepBasis step_basis = infer::StepBasis::none;
  if (rule == StepRule::none) {
    for (auto& [d, i] : inferred)
      if (d != kPinnedHost && !i.step_ends.empty() &&
          (i.step_basis == infer::StepBasis::optimizer ||
           i.step_basis == infer::StepBasis::backward)) {
        frame_steps[d] = i.step_ends;  // the GPUs' steps: the same iterations
        step_basis = i.step_basis;
      }
    if (frame_steps.empty()) {
      const snapshot::DeviceInference* most = nullptr;
      int most_device = 0;
      for (auto& [d, i] : inferred)
        if (d != kPinnedHost && i.step_basis == infer::StepBasis::repetition &&
            (!most || i.step_ends.size() > most->step_ends.size()))
          most = &i, most_device = d;
      if (most) {
        frame_steps[most_device] = most->step_ends;
        step_basis = infer::StepBasis::repetition;
      }
    }
  }
  for (auto& [d, ends] : frame_steps)  // the last end with nothing after it: the start instead
    if (auto t = reader.traces().find(d);
        t != reader.traces().end() && !ends.empty() && ends.back() >= t->second.size()) {
      ends.pop_back();
      if (ends.empty() || ends.front() != 0) ends.insert(ends.begin(), 0);
    }
  const char* step_name = step_basis == infer::StepBasis::backward ? "inferred from backward frames"
                          : step_basis == infer::StepBasis::repetition
                              ? "inferred from repeated allocations"
                              : "inferred from optimizer frames";
  std::map<int, size_t> next_frame_step;
  // The next frame step due on a device whose entries before it are all written, if any; its
  // time is the last entry's (a step sits between entries of one time by its order).
  auto due_frame_step = [&]() -> bool {
    for (Cursor& k : cursors) {
      auto it = frame_steps.find(k.device);
      if (it == frame_steps.end()) continue;
      size_t& next = next_frame_step[k.device];
      if (next == it->second.size() || it->second[next] > k.next) continue;
      ++next;
      const uint64_t ts = k.next > 0                   ? (*k.entries)[k.next - 1].time_ns
                          : k.next < k.entries->size() ? (*k.entries)[k.next].time_ns
                                                       : t0;
      out.step(devices[k.device], ts, ++steps, step_name);
      return true;
    }
    return false;
  };
  Contexts contexts(out, reader);
  uint64_t last_ts = t0;
  for (;;) {
    Cursor* c = nullptr;
    for (Cursor& k : cursors)
      if (k.next < k.entries->size() &&
          (!c || (*k.entries)[k.next].time_ns < (*c->entries)[c->next].time_ns))
        c = &k;
    if (due_frame_step()) continue;
    if (next_annotation < annotations.size()) {
      const Annotation& a = annotations[next_annotation];
      if (!c || a.time_ns < (*c->entries)[c->next].time_ns ||
          (a.start && a.time_ns == (*c->entries)[c->next].time_ns)) {
        if (a.start) maybe_step(a);
        if (a.name != kStepMark) {
          contexts.leave(a.time_ns);  // Note [Entry contexts]: they stay innermost
          out.scope(devices[a.device], a.time_ns, a.start, a.name);
        }
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
        const ev::Category category =
            inferred.empty() ? e.category : inferred[c->device].entries[i];
        out.alloc(dev, ts, e.addr, size, e.size, e.stream, stack, category);
        break;
      }
      case Action::free_requested:
        out.free(dev, ev::Kind::free_requested, ts, e.addr, e.size, e.stream, stack);
        break;
      case Action::free_completed:
        out.free(dev, ev::Kind::free_completed, ts, e.addr, e.size, e.stream, stack);
        break;
      case Action::free:
        out.free(dev, ev::Kind::free_requested, ts, e.addr, e.size, e.stream, stack);
        out.free(dev, ev::Kind::free_completed, ts, e.addr, e.size, e.stream, stack);
        break;
      case Action::segment_alloc:
      case Action::segment_map: {
        const bool mapped = e.action == Action::segment_map;
        ev::Pool pool = e.size == kSmallBuffer ? ev::Pool::small : ev::Pool::large;
        if (const Segment* s =
                mapped ? final.expandable_at(c->device, e.addr) : final.whole_at(c->device, e.addr))
          pool = s->pool;
        out.segment_alloc(dev, ts, mapped, e.addr, e.size, e.stream, pool, e.addr, stack);
        break;
      }
      case Action::segment_free:
      case Action::segment_unmap:
        out.segment_free(dev, ts, e.action == Action::segment_unmap, e.addr, e.size, e.stream,
                         stack);
        break;
      case Action::snapshot:
        out.mark(dev, ts, kSnapshotMark, e.size);
        break;
      case Action::oom:
        out.oom(dev, ts, e, stack);
        break;
      case Action::other:
        break;
    }
  }
  contexts.leave(last_ts);

  phase("emitted");
  ImportStats stats;
  stats.events = out.count();
  stats.segments = reader.segments().size();
  stats.frames = stacks.frame_count();
  stats.devices = static_cast<int>(states.size());
  stats.annotations =
      static_cast<uint64_t>(std::count_if(annotations.begin(), annotations.end(),
                                          [](const Annotation& a) { return a.name != kStepMark; }));
  stats.context_scopes = contexts.scopes();
  stats.inferred_steps = frame_steps.empty() ? steps : 0;
  stats.frame_steps = frame_steps.empty() ? 0 : steps;
  if (!frame_steps.empty())
    stats.frame_steps_from = step_basis == infer::StepBasis::backward     ? "backward"
                             : step_basis == infer::StepBasis::repetition ? "repetition"
                                                                          : "optimizer";
  stats.categories_inferred = meta.categories_inferred;
  stats.synthetic_times = reader.synthetic_times();
  stats.notes = reader.notes().lines();
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
  for (const char* suffix : {"", "-wal", "-shm", "-journal"})
    std::filesystem::remove(path + suffix, ec);
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
ImportStats import_input(detail::Input input, const std::string& trace_path,
                         const std::string& source_name, const ImportOptions& options) {
  std::unique_ptr<store::TraceWriter> writer;
  bool writing = false;  // from here on, a failure leaves a partial trace to remove
  try {
    store::SymbolizeFn symbolize;
    uint64_t end_ts = 0;
    ImportStats stats = detail::convert(
        std::move(input), source_name,
        [&](const store::TraceMeta& meta) -> store::TraceWriter& {
          writing = true;
          writer = store::TraceWriter::create(trace_path, meta, store::Journal::none);
          return *writer;
        },
        &symbolize, &end_ts, options);
    writer->close(end_ts);
    writer.reset();
    phase("closed");
    store::FinalizeOptions options;
    options.journal = store::Journal::none;  // Note [Part files]
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
                                         const std::string& source_name,
                                         const ImportOptions& options) {
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
