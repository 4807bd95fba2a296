// PyTorch memory snapshot export (docs/export.md, "PyTorch memory snapshot"): a trace written
// as the pickle torch.cuda.memory._dump_snapshot writes, for PyTorch's memory_viz.
//
// Note [Snapshot export]
// A snapshot is `device_traces` (the history) and `segments` (the allocator's state at the
// end). PyTorch's viewer draws every earlier state by walking the history backwards from
// `segments`, so the two must agree exactly and every block must lie in a segment at every
// step; where they do not, it draws wrongly or throws. The exporter therefore replays the
// history as it writes it, writes `segments` from that replay (after the history: key order
// does not matter to readers), and writes only entries that fit the state before them:
//  * a block in memory the trace never saw reserved (a recording started after the model was
//    built) is left out with all its entries, and counted;
//  * where the recording dropped events, a free it lost is restored where its block can no
//    longer be live (its address allocated again, its segment released, its free_completed
//    seen without a free_requested), a release of a segment reserved again is restored, and
//    an entry for a block the replay does not know is dropped; all are counted.
// The viewer undoes a segment_map only when one of its segments holds the whole range, and
// joins neighbouring ranges only on equal streams (which its own renaming of streams breaks
// in a trace that only uses the default stream), so mapped ranges are written in pieces cut
// at every address where a mapping of the device begins or ends: every piece then lies inside
// one segment at every step. Trace entries carry requested sizes, as PyTorch's do. The
// viewer's unpickler reads protocols 2-4 and a fixed set of opcodes, and appends a list's
// items in one JavaScript call, so lists go out in batches of 1000, as Python writes them.
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
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "profiler/analysis/export.h"
#include "profiler/analysis/trace.h"
#include "profiler/naming/site_rule.h"
#include "profiler/pickle/pickle_writer.h"
#include "profiler/store/allocator_tables.h"

namespace tidemark::analysis {

namespace {

namespace ev = events;
using importers::pickle::PickleWriter;

constexpr size_t kDrainBytes = 1 << 16;
constexpr int kBatch = 1000;  // items per APPENDS, as Python's pickler batches them

struct DeviceSlot {
  int64_t row_id = 0;  // devices.id
  ev::DeviceId id;
  std::string name;
  int index = 0;
};

// A segment, or a piece of a mapped range of an expandable segment, reserved at this point.
struct Range {
  uint64_t end = 0, stream = 0, stack = 0;
  uint64_t parent = 0;  // the expandable segment a mapped piece belongs to
  bool small = false, expandable = false;
};

// A block allocated (or freed by the caller, pending) at this point.
struct Block {
  uint64_t size = 0, requested = 0, stream = 0, stack = 0;
  bool pending = false;
  std::string category;
};

// A segment of the final state, as the snapshot lists it.
struct FinalSegment {
  uint64_t addr = 0, size = 0, stream = 0, stack = 0;
  bool small = false, expandable = false;
  std::vector<std::pair<uint64_t, Block>> blocks;  // by address
};

// The list being written: its items go out in batches (MARK ... APPENDS).
class Batched {
 public:
  explicit Batched(PickleWriter& w) : w_(w) { w_.empty_list(); }
  void item() {  // before each item
    if (n_ == kBatch) {
      w_.appends();
      n_ = 0;
    }
    if (n_++ == 0) w_.mark();
  }
  void finish() {
    if (n_ > 0) w_.appends();
    n_ = 0;
  }

 private:
  PickleWriter& w_;
  int n_ = 0;
};

class SnapshotWriter {
 public:
  SnapshotWriter(const Trace& trace, std::ostream& out, const SnapshotExportOptions& options)
      : trace_(trace), out_(out) {
    store::TraceMeta meta = trace.reader().meta();
    unix_offset_ = meta.start_unix_ns - static_cast<int64_t>(meta.start_ts_ns);
    settings_ = meta.allocator_settings;
    categories_ =
        options.categories && store::any_allocation(trace.reader(), {.categorized = true});
  }

  SnapshotExport write() {
    std::vector<DeviceSlot> devices = device_slots();
    w_.empty_dict().mark();
    key("device_traces");
    w_.empty_list().mark();
    int next_index = 0;
    for (const DeviceSlot& d : devices) {
      for (; next_index < d.index; ++next_index) w_.empty_list();  // indices no device has
      stats_.devices.push_back({d.name, d.index, device_trace(d)});
      ++next_index;
    }
    w_.appends();

    key("segments");
    Batched segs(w_);
    for (const auto& [index, s] : finals_) {
      segs.item();
      segment(index, s);
    }
    segs.finish();

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

  // ---- device_traces: the history, replayed as it is written -----------------------------

  uint64_t device_trace(const DeviceSlot& d) {
    ranges_.clear();
    blocks_.clear();
    // Where mapped ranges are cut (Note [Snapshot export]): every end of every mapping.
    cuts_.clear();
    {
      for (const store::SegmentRow& m :
           store::segments_matching(trace_.reader(), {.device = d.row_id, .mapped_only = true})) {
        cuts_.insert(m.addr);
        cuts_.insert(m.addr + m.size);
      }
    }
    // Each block's category: the one the allocations table settled on (the latest `category`
    // event while it was allocated, else the alloc's), read beside the events in seq order.
    std::optional<store::AllocationCursor> cats;
    if (categories_)
      cats.emplace(trace_.reader(), store::AllocationFilter{.device = d.row_id},
                   store::AllocationOrder::seq);
    std::optional<store::AllocationSpan> cat_row;
    if (cats) cat_row = cats->next();

    Batched list(w_);
    list_ = &list;
    entries_ = 0;
    trace_.reader().for_each_event([&](const ev::Event& e, uint64_t stack) {
      if (!(e.device == d.id)) return;
      ts_ = e.ts_ns;
      const ev::BlockInfo& b = e.block;
      switch (e.kind) {
        case ev::Kind::segment_alloc:
        case ev::Kind::segment_map:
          for (auto [a, n] : pieces(e.kind, b.addr, b.size)) {
            release(a, n);  // reserved already: its release was dropped
            entry(ev::kind_name(e.kind), a, n, b.stream, stack, "unknown");
            ranges_[a] = {a + n,
                          b.stream,
                          stack,
                          b.segment,
                          b.pool == ev::Pool::small,
                          e.kind == ev::Kind::segment_map};
          }
          break;
        case ev::Kind::segment_free:
        case ev::Kind::segment_unmap:
          for (auto [a, n] : pieces(e.kind, b.addr, b.size)) {
            free_blocks_in(a, a + n);
            entry(ev::kind_name(e.kind), a, n, b.stream, stack, "unknown");
            unreserve(a, a + n);
          }
          break;
        case ev::Kind::alloc: {
          std::string category = "unknown";
          if (cats) {
            while (cat_row && cat_row->seq < e.seq) cat_row = cats->next();
            category = std::string(ev::category_name(
                cat_row && cat_row->seq == e.seq ? cat_row->category : b.category));
          }
          if (!reserved(b.addr)) {
            ++stats_.entries_left_out;
            break;
          }
          free_blocks_in(b.addr, b.addr + std::max<uint64_t>(b.size, 1));  // frees it lost
          entry("alloc", b.addr, b.requested_size, b.stream, stack, category);
          blocks_[b.addr] = {b.size, b.requested_size, b.stream, stack, false, std::move(category)};
          break;
        }
        case ev::Kind::free_requested:
        case ev::Kind::free_completed: {
          auto it = blocks_.find(b.addr);
          if (it == blocks_.end() || (e.kind == ev::Kind::free_requested && it->second.pending)) {
            ++(reserved(b.addr) ? stats_.entries_dropped : stats_.entries_left_out);
            break;
          }
          Block& blk = it->second;
          if (e.kind == ev::Kind::free_requested) {
            entry("free_requested", b.addr, blk.requested, blk.stream, stack, blk.category);
            blk.pending = true;
          } else {
            if (!blk.pending) restore_free(it, "free_requested");
            entry("free_completed", b.addr, blk.requested, blk.stream, stack, blk.category);
            blocks_.erase(it);
          }
          break;
        }
        case ev::Kind::oom:
          list_->item();
          w_.empty_dict().mark();
          key("action"), key("oom");
          key("size"), integer(e.allocator.requested_size);
          key("device_free"), integer(e.allocator.device_free);
          key("stream"), integer(e.allocator.stream);
          key("time_us"), time_us();
          key("frames"), frames(stack);
          w_.setitems();
          ++entries_;
          drain();
          break;
        default:
          break;
      }
    });
    list.finish();
    list_ = nullptr;
    final_state(d.index);
    stats_.entries += entries_;
    return entries_;
  }

  // The pieces a segment event is written as: segment_alloc/free whole, mapped ranges cut.
  std::vector<std::pair<uint64_t, uint64_t>> pieces(ev::Kind k, uint64_t addr, uint64_t size) {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    uint64_t at = addr;
    const uint64_t end = addr + size;
    if (k == ev::Kind::segment_map || k == ev::Kind::segment_unmap)
      for (auto c = cuts_.upper_bound(addr); c != cuts_.end() && *c < end; ++c) {
        out.emplace_back(at, *c - at);
        at = *c;
      }
    if (end > at || out.empty()) out.emplace_back(at, end - at);
    return out;
  }

  bool reserved(uint64_t addr) const {
    auto it = ranges_.upper_bound(addr);
    return it != ranges_.begin() && addr < std::prev(it)->second.end;
  }

  // Removes [a, b) from the reserved ranges, cutting the ranges it overlaps.
  void unreserve(uint64_t a, uint64_t b) {
    auto it = ranges_.upper_bound(a);
    if (it != ranges_.begin() && std::prev(it)->second.end > a) --it;
    while (it != ranges_.end() && it->first < b) {
      const uint64_t start = it->first;
      const Range r = it->second;
      it = ranges_.erase(it);
      if (start < a) {
        Range head = r;
        head.end = a;
        ranges_[start] = head;
      }
      if (r.end > b) ranges_[b] = r;
    }
  }

  // Memory about to be reserved again whose release the recording dropped: the release
  // restored (with the frees of its blocks) before the new reservation.
  void release(uint64_t a, uint64_t b) {
    auto it = ranges_.upper_bound(a);
    if (it != ranges_.begin() && std::prev(it)->second.end > a) --it;
    std::vector<std::pair<uint64_t, Range>> overlap;
    for (; it != ranges_.end() && it->first < b; ++it) overlap.emplace_back(*it);
    for (const auto& [start, r] : overlap) {
      const uint64_t lo = std::max(start, a), hi = std::min(r.end, b);
      free_blocks_in(lo, hi);
      entry(r.expandable ? "segment_unmap" : "segment_free", lo, hi - lo, r.stream, 0, "unknown");
      ++stats_.entries_restored;
      unreserve(lo, hi);
    }
  }

  // Blocks live in [a, b) when they cannot be (their memory is allocated again, or released):
  // the frees the recording dropped, restored.
  void free_blocks_in(uint64_t a, uint64_t b) {
    auto it = blocks_.lower_bound(a);
    if (it != blocks_.begin() && std::prev(it)->first + std::prev(it)->second.size > a) --it;
    while (it != blocks_.end() && it->first < b) {
      if (!it->second.pending) restore_free(it, "free_requested");
      restore_free(it, "free_completed");
      it = blocks_.erase(it);
    }
  }

  void restore_free(std::map<uint64_t, Block>::iterator it, std::string_view action) {
    const Block& blk = it->second;
    entry(action, it->first, blk.requested, blk.stream, 0, blk.category);
    ++stats_.entries_restored;
  }

  void entry(std::string_view action, uint64_t addr, uint64_t size, uint64_t stream, uint64_t stack,
             const std::string& category) {
    list_->item();
    w_.empty_dict().mark();
    key("action"), key(action);
    key("addr"), integer(addr);
    key("size"), integer(size);
    key("stream"), integer(stream);
    key("time_us"), time_us();
    key("frames"), frames(stack);
    // Segments have no role: "unknown" (which also puts "unknown" among the categories, as
    // some memory_viz versions need once there are any).
    if (categories_) key("category"), key(category);
    w_.setitems();
    ++entries_;
    drain();
  }

  void time_us() { w_.integer((static_cast<int64_t>(ts_) + unix_offset_) / 1000); }

  // ---- segments: the state the replay ended in -------------------------------------------

  void final_state(int index) {
    std::vector<FinalSegment> segs;
    std::vector<uint64_t> parents;  // of each segment in `segs`
    for (const auto& [start, r] : ranges_) {
      // Contiguous mapped pieces of one expandable segment are one segment to PyTorch.
      if (r.expandable && !segs.empty()) {
        FinalSegment& last = segs.back();
        if (last.expandable && last.addr + last.size == start && last.stream == r.stream &&
            parents.back() == r.parent) {
          last.size = r.end - last.addr;
          continue;
        }
      }
      segs.push_back({start, r.end - start, r.stream, r.stack, r.small, r.expandable, {}});
      parents.push_back(r.parent);
    }
    size_t i = 0;
    for (auto& [addr, blk] : blocks_) {  // every block lies in a range (the replay's rule)
      while (i < segs.size() && segs[i].addr + segs[i].size <= addr) ++i;
      if (i < segs.size() && segs[i].addr <= addr)
        segs[i].blocks.emplace_back(addr, std::move(blk));
    }
    for (FinalSegment& s : segs) finals_.emplace_back(index, std::move(s));
    blocks_.clear();
    ranges_.clear();
  }

  void segment(int index, const FinalSegment& s) {
    uint64_t allocated = 0, active = 0, requested = 0;
    for (const auto& [addr, b] : s.blocks) {
      if (!b.pending) allocated += b.size;
      active += b.size;
      requested += b.requested;
    }
    w_.empty_dict().mark();
    key("device"), w_.integer(index);
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
    // The blocks tile the segment: the gaps are free (inactive) blocks, as PyTorch lists them.
    Batched list(w_);
    uint64_t at = s.addr;
    auto block = [&](uint64_t addr, uint64_t size, uint64_t req, std::string_view state,
                     uint64_t stack) {
      list.item();
      w_.empty_dict().mark();
      key("address"), integer(addr);
      key("size"), integer(size);
      key("requested_size"), integer(req);
      key("state"), key(state);
      key("frames"), frames(stack);
      w_.setitems();
      drain();
    };
    for (const auto& [addr, b] : s.blocks) {
      if (addr > at) block(at, addr - at, 0, "inactive", 0);
      const uint64_t size = std::min(b.size, s.addr + s.size - addr);
      block(addr, size, b.requested, b.pending ? "active_pending_free" : "active_allocated",
            b.stack);
      at = addr + size;
      ++stats_.blocks;
    }
    if (s.addr + s.size > at) block(at, s.addr + s.size - at, 0, "inactive", 0);
    list.finish();
    w_.setitems();
    ++stats_.segments;
    drain();
  }

  // ---- values ----------------------------------------------------------------------------

  void integer(uint64_t v) { w_.integer(static_cast<int64_t>(v)); }

  // Strings that repeat (keys, actions, states, categories, files) are written once and
  // memoized.
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
    Batched list(w_);
    if (stack_id != 0) {
      // Note [The recorder's own frames]: addresses wholly the recorder's (an unoptimised
      // build's), then the inlined ones of the first address left.
      const std::vector<uint64_t> ips = trace_.reader().stack(stack_id);
      size_t first = 0;
      auto own = [&](uint64_t ip) {  // read once per address: most stacks start at a few
        auto [it, fresh] = recorder_ips_.try_emplace(ip, false);
        if (fresh) {
          const std::vector<store::ResolvedFrame> fs = trace_.reader().frames(ip);
          it->second = !fs.empty() && std::all_of(fs.begin(), fs.end(), is_recorder_frame);
        }
        return it->second;
      };
      while (first < ips.size() && own(ips[first])) ++first;
      for (size_t i = first; i < ips.size(); ++i) frames_of(ips[i], list, i == first);
    }
    list.finish();
    stacks_.emplace(stack_id, w_.memoize());
  }

  // The frames of one return address (inlined ones first), each frame dict memoized; a
  // stack's innermost without the recorder's own (Note [The recorder's own frames]).
  void frames_of(uint64_t ip, Batched& list, bool innermost) {
    auto& ips = innermost ? innermost_ips_ : ips_;
    auto it = ips.find(ip);
    if (it != ips.end()) {
      for (uint32_t idx : it->second) list.item(), w_.get(idx);
      return;
    }
    std::vector<store::ResolvedFrame> fs = trace_.reader().frames(ip);
    if (innermost) {
      size_t own = 0;
      while (own < fs.size() && is_recorder_frame(fs[own])) ++own;
      if (own < fs.size()) fs.erase(fs.begin(), fs.begin() + static_cast<long>(own));
    }
    if (fs.empty()) fs.push_back({});
    std::vector<uint32_t> memo;  // not consecutive: strings met on the way are memoized too
    for (const store::ResolvedFrame& f : fs) {
      char hex[2 + 16 + 1];
      std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(ip));
      list.item();
      w_.empty_dict().mark();
      key("name"), w_.str(f.function.empty() ? std::string_view(hex) : f.function);
      key("filename"), key(!f.file.empty() ? f.file : !f.module.empty() ? f.module : "??");
      key("line"), w_.integer(f.line);
      w_.setitems();
      memo.push_back(w_.memoize());
    }
    ips.emplace(ip, std::move(memo));
  }

  // TL_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF text, `key:value,key:value`, as a dict; a value in
  // brackets keeps its commas (`roundup_power2_divisions:[256:1,512:2]`).
  void allocator_settings() {
    std::vector<std::string> items(1);
    int depth = 0;
    for (char c : settings_) {
      depth += c == '[' ? 1 : c == ']' && depth > 0 ? -1 : 0;
      if (c == ',' && depth == 0)
        items.emplace_back();
      else
        items.back() += c;
    }
    w_.empty_dict();
    bool open = false;
    for (const std::string& item : items) {
      const size_t colon = item.find(':');
      if (colon == std::string::npos || colon == 0) continue;
      if (!open) w_.mark(), open = true;
      w_.str(item.substr(0, colon));
      const std::string v = item.substr(colon + 1);
      int64_t n = 0;
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      char* end = nullptr;
      const double x = v.empty() ? 0 : std::strtod(v.c_str(), &end);
      if (ec == std::errc() && p == v.data() + v.size())
        w_.integer(n);
      else if (!v.empty() && end == v.c_str() + v.size())
        w_.floating(x);
      else if (v == "True" || v == "False")
        w_.boolean(v == "True");
      else
        w_.str(v);
    }
    if (open) w_.setitems();
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
  // The replay of the device being written.
  std::map<uint64_t, Range> ranges_;  // start -> reserved range
  std::map<uint64_t, Block> blocks_;  // addr -> live block
  std::set<uint64_t> cuts_;
  Batched* list_ = nullptr;
  uint64_t ts_ = 0, entries_ = 0;
  std::vector<std::pair<int, FinalSegment>> finals_;  // (device index, segment)
  std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>> strings_;
  std::unordered_map<uint64_t, uint32_t> stacks_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> ips_;  // ip -> its frame dicts' memo
  std::unordered_map<uint64_t, std::vector<uint32_t>> innermost_ips_;  // ... as a stack's innermost
  std::unordered_map<uint64_t, bool> recorder_ips_;  // ip -> wholly the recorder's frames
};

}  // namespace

SnapshotExport export_snapshot(const Trace& trace, std::ostream& out,
                               const SnapshotExportOptions& options) {
  return SnapshotWriter(trace, out, options).write();
}

}  // namespace tidemark::analysis
