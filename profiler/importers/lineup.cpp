// Note [Snapshot line-up] (lineup.h).
#include "profiler/importers/lineup.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "profiler/store/trace_reader.h"
#include "profiler/store/trace_writer.h"

namespace tidemark::importers {

namespace ev = tidemark::events;

namespace {

// Snapshot ips are frame numbers 1..N; in the merged trace they are tagged so they never meet
// the recording's return addresses (user-space addresses are below 2^47).
constexpr uint64_t kSnapshotIp = uint64_t{1} << 62;

// The snapshot's events, kept in memory instead of written. A name (a mark, a scope, a step)
// is valid only during append (Note [Event lifetime]): the conversion builds some and frees
// its document when it returns, so the names are kept here.
class Collect final : public store::TraceWriter {
 public:
  struct Item {
    ev::Event event;
    uint64_t stack;
  };
  void append(const ev::Event& e, uint64_t stack_id) override {
    events.push_back({e, stack_id});
    if (ev::payload_of(e.kind) == ev::Payload::name) {
      auto it = names_.emplace(e.name.name).first;  // node-based: the views stay valid
      events.back().event.name.name = *it;
    }
  }
  void add_stack_node(uint64_t id, uint64_t parent, uint64_t ip) override {
    nodes.push_back({id, parent, ip});
  }
  void add_modules(const std::vector<store::ModuleInfo>&) override {}
  void add_dropped(uint64_t, uint64_t) override {}
  void commit() override {}
  void close(uint64_t) override {}
  std::vector<Item> events;
  std::vector<store::StackNode> nodes;
  store::TraceMeta meta;

 private:
  std::set<std::string, std::less<>> names_;
};

bool is_segment(ev::Kind k) {
  return k == ev::Kind::segment_alloc || k == ev::Kind::segment_free ||
         k == ev::Kind::segment_map || k == ev::Kind::segment_unmap;
}

bool grows(ev::Kind k) {
  return k == ev::Kind::segment_alloc || k == ev::Kind::segment_map;
}

using SegmentKey = std::tuple<int, int, uint64_t, uint64_t>;  // kind, device, addr, size

SegmentKey key_of(const ev::Event& e) {
  return {static_cast<int>(e.kind), e.device.index, e.block.addr, e.block.size};
}

}  // namespace

LineupStats import_pytorch_snapshot_onto(const std::string& pickle_path,
                                         const std::string& recorded_path,
                                         const std::string& trace_path,
                                         const ImportOptions& options) {
  std::error_code ec;
  if (std::filesystem::equivalent(recorded_path, trace_path, ec))
    throw ImportError(trace_path +
                      ": is the recorded trace itself; write the merged trace elsewhere");
  std::unique_ptr<store::TraceWriter> writer;
  bool writing = false;  // from here on, a failure leaves a partial trace to remove
  try {
    const store::TraceReader recorded =
        store::TraceReader::open(recorded_path, store::TraceReader::Require::finalized);
    const store::TraceMeta rec_meta = recorded.meta();
    if (rec_meta.command_line.rfind("pytorch-snapshot:", 0) == 0)
      throw ImportError(recorded_path +
                        ": is an imported snapshot, not a recording (its blocks would be counted "
                        "twice); give the trace `tidemark record` wrote");
    std::vector<store::RecordedEvent> rec_events = recorded.events();

    Collect snap;
    store::SymbolizeFn snapshot_frames;
    uint64_t snap_end = 0;
    LineupStats stats;
    static_cast<ImportStats&>(stats) = detail::convert_pytorch_snapshot(
        detail::read_snapshot_file(pickle_path), pickle_path,
        [&](const store::TraceMeta& meta) -> store::TraceWriter& {
          snap.meta = meta;
          return snap;
        },
        &snapshot_frames, &snap_end, options);
    if (stats.synthetic_times)
      throw ImportError(pickle_path +
                        ": has no times (PyTorch before 2.1), so it cannot be lined up with a "
                        "recording; import it alone");

    // Recorded segment events by (kind, device, address, size), with their times.
    std::map<SegmentKey, std::vector<uint64_t>> rec_segments;
    for (const auto& r : rec_events)
      if (is_segment(r.event.kind) && r.event.device.type == ev::DeviceType::cuda)
        rec_segments[key_of(r.event)].push_back(r.event.ts_ns);

    // Mapped ranges (expandable segments): PyTorch writes one entry for a range it maps with
    // several cuMemMap calls, so a snapshot range matches when recorded mappings cover it.
    std::map<std::pair<int, uint64_t>, uint64_t> rec_mapped;  // (device, start) -> end, merged
    {
      std::vector<std::tuple<int, uint64_t, uint64_t>> ranges;
      for (const auto& r : rec_events)
        if (r.event.kind == ev::Kind::segment_map && r.event.device.type == ev::DeviceType::cuda)
          ranges.emplace_back(r.event.device.index, r.event.block.addr,
                              r.event.block.addr + r.event.block.size);
      std::sort(ranges.begin(), ranges.end());
      for (const auto& [d, lo, hi] : ranges) {
        auto it = rec_mapped.upper_bound({d, lo});
        if (it != rec_mapped.begin() && std::prev(it)->first.first == d &&
            std::prev(it)->second >= lo) {
          auto& end = std::prev(it)->second;
          end = std::max(end, hi);
        } else {
          rec_mapped[{d, lo}] = hi;
        }
      }
    }
    auto recorded_has = [&](const ev::Event& e) {
      if (e.device.type != ev::DeviceType::cuda) return false;
      if (rec_segments.count(key_of(e))) return true;
      if (e.kind != ev::Kind::segment_map && e.kind != ev::Kind::segment_unmap) return false;
      auto it = rec_mapped.upper_bound({e.device.index, e.block.addr});
      if (it == rec_mapped.begin()) return false;
      --it;
      return it->first.first == e.device.index && it->second >= e.block.addr + e.block.size;
    };

    // Clock: Unix time -> the recording's clock, then the median difference of matched
    // segment growths (the snapshot's state at its start, all stamped with its first time, is
    // not a time of its own and does not vote).
    const int64_t guess = static_cast<int64_t>(rec_meta.start_ts_ns) - rec_meta.start_unix_ns;
    const uint64_t snap_start = snap.meta.start_ts_ns;
    std::vector<int64_t> diffs;
    for (const auto& [e, stack] : snap.events) {
      if (!grows(e.kind)) continue;
      ++stats.snapshot_segments;
      if (!recorded_has(e)) continue;
      ++stats.matched_segments;
      auto it = rec_segments.find(key_of(e));
      if (it == rec_segments.end() || e.ts_ns == snap_start) continue;  // votes: exact ones
      const int64_t want = static_cast<int64_t>(e.ts_ns) + guess;
      int64_t best = 0;
      bool any = false;
      for (uint64_t t : it->second) {
        const int64_t d = static_cast<int64_t>(t) - want;
        if (!any || std::llabs(d) < std::llabs(best)) best = d, any = true;
      }
      diffs.push_back(best);
    }
    int64_t offset = guess;
    if (!diffs.empty()) {
      std::nth_element(diffs.begin(), diffs.begin() + diffs.size() / 2, diffs.end());
      offset += diffs[diffs.size() / 2];
    }
    stats.clock_offset_ns = offset;

    // Recorded start times of segments by (device, start), for keeping blocks inside them.
    std::map<std::pair<int, uint64_t>, std::vector<uint64_t>> seg_starts;
    for (const auto& r : rec_events)
      if (grows(r.event.kind) && r.event.device.type == ev::DeviceType::cuda)
        seg_starts[{r.event.device.index, r.event.block.addr}].push_back(r.event.ts_ns);
    for (auto& [k, v] : seg_starts) std::sort(v.begin(), v.end());
    auto not_before_segment = [&](const ev::Event& e, uint64_t ts) {
      auto it = seg_starts.find({e.device.index, e.block.segment});
      if (it == seg_starts.end()) return ts;
      auto after = std::upper_bound(it->second.begin(), it->second.end(), ts);
      if (after == it->second.begin()) return *after;  // before its first start: at it
      return ts;
    };

    // The merged events, by time; recorded first on ties (a segment before its blocks).
    struct Out {
      ev::Event event;
      uint64_t stack;  // spans and strings point into rec_events / static marks
      int source;      // 0 recorded, 1 snapshot
      size_t order;
    };
    std::vector<Out> out;
    out.reserve(rec_events.size() + snap.events.size());
    for (size_t i = 0; i < rec_events.size(); ++i)
      out.push_back({rec_events[i].event, rec_events[i].stack_id, 0, i});
    stats.recorded_events = rec_events.size();
    uint64_t max_node = 0;
    const std::vector<store::StackNode> rec_nodes = recorded.stack_nodes();
    for (const auto& n : rec_nodes) max_node = std::max(max_node, n.id);
    std::unordered_map<uint64_t, uint64_t> alloc_ts;  // snapshot block address -> placed alloc
    for (size_t i = 0; i < snap.events.size(); ++i) {
      ev::Event e = snap.events[i].event;
      if (is_segment(e.kind) && recorded_has(e)) continue;  // the recording has it
      uint64_t ts =
          static_cast<uint64_t>(std::max<int64_t>(static_cast<int64_t>(e.ts_ns) + offset, 0));
      if (e.kind == ev::Kind::alloc) {
        ts = not_before_segment(e, ts);
        alloc_ts[e.block.addr] = ts;
      } else if (e.kind == ev::Kind::free_requested || e.kind == ev::Kind::free_completed) {
        if (auto a = alloc_ts.find(e.block.addr); a != alloc_ts.end()) ts = std::max(ts, a->second);
      }
      e.ts_ns = ts;
      const uint64_t stack = snap.events[i].stack ? snap.events[i].stack + max_node : 0;
      out.push_back({e, stack, 1, i});
    }
    std::stable_sort(out.begin(), out.end(), [](const Out& a, const Out& b) {
      return std::tie(a.event.ts_ns, a.source, a.order) <
             std::tie(b.event.ts_ns, b.source, b.order);
    });

    store::TraceMeta meta = rec_meta;
    meta.command_line = rec_meta.command_line + " + pytorch-snapshot:" + pickle_path;
    if (meta.allocator_settings.empty()) meta.allocator_settings = snap.meta.allocator_settings;
    meta.stack_depth = std::max(meta.stack_depth, snap.meta.stack_depth);
    // The snapshot's blocks bring the categories inferred for them (Note [Inferred categories]).
    if (meta.categories_inferred.empty()) meta.categories_inferred = snap.meta.categories_inferred;
    meta.private_pools = snap.meta.private_pools;  // Note [Private pools]: the snapshot's
    for (const store::DeviceInfo& d : snap.meta.devices) {
      bool known = false;
      for (const store::DeviceInfo& m : meta.devices) known = known || m.id == d.id;
      if (!known) meta.devices.push_back(d);
    }
    writing = true;
    writer = store::TraceWriter::create(trace_path, meta, store::Journal::none);
    writer->add_modules(recorded.modules());
    for (const auto& n : rec_nodes) writer->add_stack_node(n.id, n.parent, n.ip);
    for (const auto& n : snap.nodes)
      writer->add_stack_node(n.id + max_node, n.parent ? n.parent + max_node : 0,
                             n.ip | kSnapshotIp);
    uint64_t seq = 0, end = 0;
    for (Out& o : out) {
      o.event.seq = ++seq;
      writer->append(o.event, o.stack);
      end = std::max(end, o.event.ts_ns);
      if (seq % (1 << 18) == 0) writer->commit();
    }
    stats.events = out.size();
    writer->close(end);
    writer.reset();

    // Frames: the recording's as it resolved them, the snapshot's by frame number.
    auto native =
        std::make_shared<std::unordered_map<uint64_t, std::vector<store::ResolvedFrame>>>();
    for (const auto& n : rec_nodes)
      if (!native->count(n.ip)) (*native)[n.ip] = recorded.frames(n.ip);
    store::FinalizeOptions options;
    options.journal = store::Journal::none;  // Note [Part files]
    options.symbolize = [native,
                         snapshot_frames](uint64_t ip) -> std::vector<store::ResolvedFrame> {
      if (ip & kSnapshotIp)
        return snapshot_frames ? snapshot_frames(ip & ~kSnapshotIp)
                               : std::vector<store::ResolvedFrame>{};
      auto it = native->find(ip);
      return it == native->end() ? std::vector<store::ResolvedFrame>{} : it->second;
    };
    store::finalize(trace_path, options);
    return stats;
  } catch (...) {
    writer.reset();
    if (writing) detail::remove_trace(trace_path);
    detail::rethrow_as_import_error(pickle_path);
  }
}

}  // namespace tidemark::importers
