// PyTorch memory snapshot export (docs/export.md, "PyTorch memory snapshot"): a trace written
// as the pickle torch.cuda.memory._dump_snapshot writes, for PyTorch's memory_viz.
//
// Note [Snapshot export]
// The snapshot is `segments` (the allocator's state when it was taken) plus `device_traces`
// (the history that led there). PyTorch's viewer rebuilds every earlier state by walking the
// history backwards from `segments`, so the two must agree exactly: `segments` is the state
// after the trace's last event, read from the derived tables (segments and allocations still
// live at the end), and every block must lie inside a segment. A recording started after
// memory was reserved (tl::profiler::start once the model is built) has blocks in segments it
// never saw: those blocks and their entries are left out, and counted, rather than drawn
// outside any segment (which breaks the viewer). Trace entries carry requested
// sizes, as PyTorch's do (the viewer plots requested bytes; the block's rounded size only
// appears in `segments`). The viewer's unpickler is its own and reads protocols 2-4 and a
// fixed set of opcodes, so the writer keeps to protocol 4 without FRAME and to plain
// containers, ints, strings, bools and a tuple. Entries are streamed one device at a time
// (one pass over the raw events per device): a pickle list must be written in one piece.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "profiler/analysis/export.h"
#include "profiler/analysis/sql.h"
#include "profiler/analysis/trace.h"
#include "profiler/importers/pickle_writer.h"

namespace tidemark::analysis {

namespace {

namespace ev = events;
using detail::Query;
using importers::pickle::PickleWriter;

constexpr size_t kDrainBytes = 1 << 16;
constexpr int kBatch = 1000;  // items per APPENDS, as Python's pickler batches them

struct DeviceSlot {
  int64_t row_id = 0;  // devices.id
  ev::DeviceId id;
  std::string name;
  int index = 0;
};

// Reserved address ranges (segments and mapped ranges) live at one point of the history.
class Reserved {
 public:
  void add(uint64_t addr, uint64_t size) {
    remove(addr, size);
    ranges_[addr] = addr + size;
  }
  void remove(uint64_t addr, uint64_t size) {
    const uint64_t end = addr + size;
    auto it = ranges_.upper_bound(addr);
    if (it != ranges_.begin()) --it;
    if (it != ranges_.end() && it->second <= addr) ++it;  // ends before the range removed
    while (it != ranges_.end() && it->first < end) {
      auto [start, stop] = *it;
      it = ranges_.erase(it);
      if (start < addr) ranges_[start] = addr;
      if (stop > end) ranges_[end] = stop;
    }
  }
  bool contains(uint64_t addr) const {
    auto it = ranges_.upper_bound(addr);
    return it != ranges_.begin() && addr < std::prev(it)->second;
  }

 private:
  std::map<uint64_t, uint64_t> ranges_;  // start -> end
};

struct FinalBlock {
  uint64_t addr = 0, size = 0, requested = 0, stack = 0;
  bool pending = false;  // free_requested, not yet free_completed
};

struct FinalSegment {
  uint64_t addr = 0, size = 0, stream = 0, stack = 0;
  bool small = false, expandable = false;
  uint64_t parent = 0;  // the expandable segment a mapped range belongs to
  std::vector<FinalBlock> blocks;
};

class SnapshotWriter {
 public:
  SnapshotWriter(const Trace& trace, std::ostream& out) : trace_(trace), out_(out) {
    store::TraceMeta meta = trace.reader().meta();
    unix_offset_ = meta.start_unix_ns - static_cast<int64_t>(meta.start_ts_ns);
    settings_ = meta.allocator_settings;
    Query q(trace.db(), "SELECT 1 FROM allocations WHERE category != 'unknown' LIMIT 1");
    categories_ = q.step();
  }

  SnapshotExport write() {
    std::vector<DeviceSlot> devices = device_slots();
    w_.empty_dict().mark();
    key("segments");
    w_.empty_list();
    int in_batch = 0;
    bool open = false;
    for (const DeviceSlot& d : devices) {
      for (const FinalSegment& s : final_segments(d)) {
        if (!open) w_.mark(), open = true;
        segment(d, s);
        if (++in_batch == kBatch) w_.appends(), open = false, in_batch = 0;
      }
    }
    if (open) w_.appends();

    key("device_traces");
    w_.empty_list().mark();
    int next_index = 0;
    for (const DeviceSlot& d : devices) {
      for (; next_index < d.index; ++next_index) w_.empty_list();  // indices no device has
      stats_.devices.push_back({d.name, d.index, device_trace(d)});
      ++next_index;
    }
    w_.appends();

    key("allocator_settings");
    allocator_settings();
    key("external_annotations");
    w_.empty_list();
    w_.setitems();
    w_.op('.');
    drain(true);
    return stats_;
  }

 private:
  // cuda:N at N; the CPU after the last CUDA device. Sorted by index.
  std::vector<DeviceSlot> device_slots() const {
    std::vector<DeviceSlot> slots;
    int next_free = 0;
    for (const store::DeviceRow& row : trace_.reader().devices())
      if (row.info.id.type == ev::DeviceType::cuda)
        next_free = std::max(next_free, static_cast<int>(row.info.id.index) + 1);
    for (const store::DeviceRow& row : trace_.reader().devices()) {
      DeviceSlot s{row.id, row.info.id, device_name(row.info.id), 0};
      s.index = s.id.type == ev::DeviceType::cuda ? s.id.index : next_free++;
      slots.push_back(std::move(s));
    }
    std::sort(slots.begin(), slots.end(),
              [](const DeviceSlot& a, const DeviceSlot& b) { return a.index < b.index; });
    return slots;
  }

  // ---- segments: the state at the end ----------------------------------------------------

  std::vector<FinalSegment> final_segments(const DeviceSlot& d) {
    std::vector<FinalSegment> segs;
    Query q(trace_.db(),
            "SELECT kind, addr, size, segment, stream, pool, stack FROM segments "
            "WHERE device = ?1 AND free_ts IS NULL ORDER BY addr");
    q.bind(1, d.row_id);
    while (q.step()) {
      FinalSegment s;
      s.expandable = q.text(0) == "mapped";
      s.addr = q.u64(1);
      s.size = q.u64(2);
      s.parent = q.u64(3);
      s.stream = q.u64(4);
      s.small = q.text(5) == "small";
      s.stack = q.u64(6);
      // Contiguous mapped ranges of one expandable segment are one segment to PyTorch.
      if (s.expandable && !segs.empty()) {
        FinalSegment& last = segs.back();
        if (last.expandable && last.parent == s.parent && last.stream == s.stream &&
            last.addr + last.size == s.addr) {
          last.size += s.size;
          continue;
        }
      }
      segs.push_back(std::move(s));
    }
    Query b(trace_.db(),
            "SELECT addr, size, requested_size, free_requested_ts IS NOT NULL, stack "
            "FROM allocations WHERE device = ?1 AND free_completed_ts IS NULL ORDER BY addr");
    b.bind(1, d.row_id);
    size_t i = 0;
    while (b.step()) {
      FinalBlock blk{b.u64(0), b.u64(1), b.u64(2), b.u64(4), b.i64(3) != 0};
      while (i < segs.size() && segs[i].addr + segs[i].size <= blk.addr) ++i;
      bool inside = i < segs.size() && segs[i].addr <= blk.addr &&
                    blk.addr + blk.size <= segs[i].addr + segs[i].size;
      if (inside && !segs[i].blocks.empty()) {
        const FinalBlock& prev = segs[i].blocks.back();
        inside = prev.addr + prev.size <= blk.addr;  // never overlapping blocks
      }
      if (!inside) {
        ++stats_.blocks_left_out;
        continue;
      }
      segs[i].blocks.push_back(blk);
    }
    return segs;
  }

  void segment(const DeviceSlot& d, const FinalSegment& s) {
    uint64_t allocated = 0, active = 0, requested = 0;
    for (const FinalBlock& b : s.blocks) {
      if (!b.pending) allocated += b.size;
      active += b.size;
      requested += b.requested;
    }
    w_.empty_dict().mark();
    key("device"), w_.integer(d.index);
    key("address"), integer(s.addr);
    key("total_size"), integer(s.size);
    key("allocated_size"), integer(allocated);
    key("active_size"), integer(active);
    key("requested_size"), integer(requested);
    key("stream"), integer(s.stream);
    key("segment_type"), key(s.small ? "small" : "large");
    key("segment_pool_id"), w_.integer(0).integer(0).tuple_n(2);
    key("is_expandable"), w_.boolean(s.expandable);
    key("frames"), frames(s.stack);
    key("blocks");
    w_.empty_list().mark();
    // The blocks tile the segment: the gaps are free (inactive) blocks, as PyTorch lists them.
    uint64_t at = s.addr;
    auto gap = [&](uint64_t end) {
      if (end > at) block(at, end - at, 0, "inactive", 0);
    };
    for (const FinalBlock& b : s.blocks) {
      gap(b.addr);
      block(b.addr, b.size, b.requested, b.pending ? "active_pending_free" : "active_allocated",
            b.stack);
      at = b.addr + b.size;
      ++stats_.blocks;
    }
    gap(s.addr + s.size);
    w_.appends();
    w_.setitems();
    ++stats_.segments;
    drain();
  }

  void block(uint64_t addr, uint64_t size, uint64_t requested, std::string_view state,
             uint64_t stack) {
    w_.empty_dict().mark();
    key("address"), integer(addr);
    key("size"), integer(size);
    key("requested_size"), integer(requested);
    key("state"), key(state);
    key("frames"), frames(stack);
    w_.setitems();
  }

  // ---- device_traces: the history --------------------------------------------------------

  uint64_t device_trace(const DeviceSlot& d) {
    // Each block's category: the one the allocations table settled on (the latest `category`
    // event while it was allocated, else the alloc's), read beside the events in seq order.
    std::optional<Query> cats;
    if (categories_) {
      cats.emplace(trace_.db(), "SELECT seq, category FROM allocations WHERE device = ?1 ORDER BY seq");
      cats->bind(1, d.row_id);
    }
    bool cat_row = cats && cats->step();
    std::unordered_map<uint64_t, std::string> live_category;  // block addr -> category
    Reserved reserved;

    w_.empty_list();
    uint64_t n = 0;
    int in_batch = 0;
    trace_.reader().for_each_event([&](const ev::Event& e, uint64_t stack) {
      if (!(e.device == d.id)) return;
      std::string_view action = ev::kind_name(e.kind);
      bool block_event = e.kind == ev::Kind::alloc || e.kind == ev::Kind::free_requested ||
                         e.kind == ev::Kind::free_completed;
      bool segment_event = e.kind == ev::Kind::segment_alloc || e.kind == ev::Kind::segment_free ||
                           e.kind == ev::Kind::segment_map || e.kind == ev::Kind::segment_unmap;
      if (!block_event && !segment_event && e.kind != ev::Kind::oom) return;
      if (segment_event) {
        if (e.kind == ev::Kind::segment_alloc || e.kind == ev::Kind::segment_map)
          reserved.add(e.block.addr, e.block.size);
        else
          reserved.remove(e.block.addr, e.block.size);
      } else if (block_event && !reserved.contains(e.block.addr)) {
        // A block in memory reserved before the recording started: `segments` cannot hold it
        // (Note [Snapshot export]), so neither does the history.
        ++stats_.entries_left_out;
        return;
      }
      if (in_batch == 0) w_.mark();
      w_.empty_dict().mark();
      key("action"), key(action);
      if (e.kind == ev::Kind::oom) {
        key("size"), integer(e.allocator.requested_size);
        key("device_free"), integer(e.allocator.device_free);
        key("stream"), integer(e.allocator.stream);
      } else {
        key("addr"), integer(e.block.addr);
        key("size"), integer(block_event ? e.block.requested_size : e.block.size);
        key("stream"), integer(e.block.stream);
      }
      key("time_us"), w_.integer((static_cast<int64_t>(e.ts_ns) + unix_offset_) / 1000);
      key("frames"), frames(stack);
      if (categories_ && (block_event || segment_event)) {
        key("category");
        if (e.kind == ev::Kind::alloc) {
          while (cat_row && cats->u64(0) < e.seq) cat_row = cats->step();
          std::string c = cat_row && cats->u64(0) == e.seq
                              ? cats->text(1)
                              : std::string(ev::category_name(e.block.category));
          key(c);
          live_category[e.block.addr] = std::move(c);
        } else if (block_event) {
          auto it = live_category.find(e.block.addr);
          key(it != live_category.end() ? std::string_view(it->second) : "unknown");
          if (e.kind == ev::Kind::free_completed && it != live_category.end())
            live_category.erase(it);
        } else {
          // Segments have no role. Naming them "unknown" also puts "unknown" among the
          // categories, which some memory_viz versions fail without.
          key("unknown");
        }
      }
      w_.setitems();
      ++n;
      if (++in_batch == kBatch) w_.appends(), in_batch = 0;
      drain();
    });
    if (in_batch > 0) w_.appends();
    stats_.entries += n;
    return n;
  }

  // ---- values ----------------------------------------------------------------------------

  void integer(uint64_t v) { w_.integer(static_cast<int64_t>(v)); }

  // Strings that repeat (keys, actions, states, categories) are written once and memoized.
  void key(std::string_view s) {
    auto it = strings_.find(s);
    if (it != strings_.end()) {
      w_.get(it->second);
      return;
    }
    w_.str(s);
    strings_.emplace(std::string(s), w_.memoize());
  }

  // A stack as PyTorch frames (innermost first), each distinct stack written once.
  void frames(uint64_t stack_id) {
    auto it = stacks_.find(stack_id);
    if (it != stacks_.end()) {
      w_.get(it->second);
      return;
    }
    w_.empty_list();
    if (stack_id != 0) {
      w_.mark();
      for (uint64_t ip : trace_.reader().stack(stack_id)) frames_of(ip);
      w_.appends();
    }
    stacks_.emplace(stack_id, w_.memoize());
  }

  // The frames of one return address (inlined ones first), each frame dict memoized.
  void frames_of(uint64_t ip) {
    auto it = ips_.find(ip);
    if (it != ips_.end()) {
      for (uint32_t idx : it->second) w_.get(idx);
      return;
    }
    std::vector<store::ResolvedFrame> fs = trace_.reader().frames(ip);
    if (fs.empty()) fs.push_back({});
    std::vector<uint32_t> memo;  // not consecutive: strings met on the way are memoized too
    for (size_t k = 0; k < fs.size(); ++k) {
      const store::ResolvedFrame& f = fs[k];
      char hex[2 + 16 + 1];
      std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(ip));
      w_.empty_dict().mark();
      key("name"), w_.str(f.function.empty() ? std::string_view(hex) : f.function);
      key("filename"), key(!f.file.empty() ? f.file : !f.module.empty() ? f.module : "??");
      key("line"), w_.integer(f.line);
      w_.setitems();
      memo.push_back(w_.memoize());
    }
    ips_.emplace(ip, std::move(memo));
  }

  void allocator_settings() {
    // TL_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF text, `key:value,key:value`, as a dict.
    w_.empty_dict();
    std::vector<std::pair<std::string, std::string>> kv;
    size_t pos = 0;
    while (pos < settings_.size()) {
      size_t end = settings_.find(',', pos);
      if (end == std::string::npos) end = settings_.size();
      std::string item = settings_.substr(pos, end - pos);
      size_t colon = item.find(':');
      if (colon != std::string::npos && colon > 0)
        kv.emplace_back(item.substr(0, colon), item.substr(colon + 1));
      pos = end + 1;
    }
    if (kv.empty()) return;
    w_.mark();
    for (const auto& [k, v] : kv) {
      w_.str(k);
      int64_t n = 0;
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      char* end = nullptr;
      double x = v.empty() ? 0 : std::strtod(v.c_str(), &end);
      if (ec == std::errc() && p == v.data() + v.size())
        w_.integer(n);
      else if (!v.empty() && end == v.c_str() + v.size())
        w_.floating(x);
      else if (v == "True" || v == "False")
        w_.boolean(v == "True");
      else
        w_.str(v);
    }
    w_.setitems();
  }

  void drain(bool always = false) {
    if (!always && w_.size() < kDrainBytes) return;
    w_.drain_to(out_);
    if (!out_) throw std::runtime_error(trace_.path() + ": cannot write the snapshot");
  }

  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  const Trace& trace_;
  std::ostream& out_;
  PickleWriter w_{4};
  int64_t unix_offset_ = 0;
  std::string settings_;
  bool categories_ = false;
  SnapshotExport stats_;
  std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>> strings_;
  std::unordered_map<uint64_t, uint32_t> stacks_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> ips_;  // ip -> its frame dicts' memo
};

}  // namespace

SnapshotExport export_snapshot(const std::string& trace_path, std::ostream& out) {
  Trace trace = Trace::open(trace_path);
  return SnapshotWriter(trace, out).write();
}

}  // namespace tidemark::analysis
