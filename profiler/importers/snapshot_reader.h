// Phase 1 of the PyTorch snapshot importer (pytorch_snapshot.cpp): the snapshot's pickle read
// into plain structs, every field used checked (internal to profiler/importers).
//
// Note [Lenient fields]
// ~~~~~~~~~~~~~~~~~~~~~
// memory_viz opens snapshots of every PyTorch version, and so must the importer. Two kinds of
// field are told apart:
//  * what the curves are made of — the `segments` list, addresses, sizes, actions' order, times
//    when present — is checked, and a value that cannot be used (a size that is a string, an
//    address beyond 2^56) refuses the file with one line naming the field;
//  * what describes — frames and their fields, block states and segment types PyTorch may add,
//    actions this importer does not know, annotations, keys it does not read — never refuses a
//    file: an odd value becomes "unknown" for that field (a frame whose line is a float has
//    line 0; a name that is not a str is empty) and is counted in `Notes`, which the CLI prints
//    on stderr, one line per kind.
// Keys that are missing take PyTorch's meaning: no `time_us` (PyTorch before 2.1 wrote none)
// makes the entries' order their time (Note [Synthetic times] in pytorch_snapshot.cpp); no
// `address` on blocks means they tile their segment; no `frames`, none.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "profiler/events/events.h"
#include "profiler/importers/pytorch_snapshot.h"
#include "profiler/pickle/pickle.h"
#include "tensorlib/memory/sizes.h"

namespace tidemark::importers::snapshot {

namespace ev = tidemark::events;

using pickle::Ref;
using pickle::Type;

// PyTorch's allocator sizes (tensorlib/memory/sizes.h), as the snapshot's sizes are typed.
constexpr uint64_t kMinBlock = tl::memory::kMinBlockSize;    // smallest block, rounding unit
constexpr uint64_t kSmallSize = tl::memory::kSmallSize;      // largest small-pool request
constexpr uint64_t kSmallBuffer = tl::memory::kSmallBuffer;  // small-pool segment
// The largest size or address the importer takes (the trace's own bound). The emitter also
// refuses a curve that passes kMaxLive, so no sum of sizes can overflow the curves' int64.
constexpr uint64_t kMaxBytes = store::kMaxEventBytes;
constexpr int64_t kMaxLive = int64_t{1} << 62;
constexpr const char* kStartMark = store::kSnapshotStartMark;
constexpr const char* kSnapshotMark = "snapshot";
// The device the reader gives pinned host memory (`host_segments`, `host_traces`): past every
// CUDA index (0 to 127), so it sorts after them. Its events are device cpu:1, "pinned host"
// (docs/importers.md).
constexpr int kPinnedHost = 128;

// The block size PyTorch's allocator gives a request with its default rounding.
inline uint64_t round_block(uint64_t n) {
  return n < kMinBlock ? kMinBlock : (n + kMinBlock - 1) / kMinBlock * kMinBlock;
}

enum class Action : uint8_t {
  alloc,
  free_requested,
  free_completed,
  segment_alloc,
  segment_free,
  segment_map,
  segment_unmap,
  snapshot,
  oom,
  free,  // PyTorch < 2.1: one action for both frees
  other,
};

inline Action parse_action(std::string_view a) {
  if (a == "alloc") return Action::alloc;
  if (a == "free_requested") return Action::free_requested;
  if (a == "free_completed") return Action::free_completed;
  if (a == "segment_alloc") return Action::segment_alloc;
  if (a == "segment_free") return Action::segment_free;
  if (a == "segment_map") return Action::segment_map;
  if (a == "segment_unmap") return Action::segment_unmap;
  if (a == "snapshot") return Action::snapshot;
  if (a == "oom") return Action::oom;
  if (a == "free") return Action::free;
  return Action::other;
}

// Frames lists are read as "frame runs": a run is the sequence of a list's items (frame dicts,
// shared through the pickle's memo, or odd values), numbered 1, 2, ... by content; 0 is none.
// Every alloc has a list of its own, but few distinct runs: the lists themselves are released
// as they are read.
using FrameRun = uint32_t;

// An entry's `compile_context` or `user_metadata` text, interned: 0 is none (Note [Entry
// contexts] in pytorch_snapshot.cpp). A snapshot has few distinct values and millions of
// entries, so an entry holds the number, not the text.
using ContextId = uint32_t;

struct Entry {  // 48 bytes: a 1 GB snapshot has millions
  Action action;
  bool timed = false;  // had a `time_us`
  // The block's role, from an optional `category` field (memory_viz colours the timeline by
  // it; Tidemark's snapshot export writes its categories there); unknown without one.
  ev::Category category = ev::Category::unknown;
  FrameRun frames = 0;
  // `addr`; for an `oom`, which has no address, its `device_free` (device_free() says so).
  uint64_t addr = 0;
  uint64_t size = 0, stream = 0, time_ns = 0;
  ContextId compile_context = 0, user_metadata = 0;
  uint64_t device_free() const { return addr; }
};
static_assert(sizeof(Entry) == 48);

enum class BlockState : uint8_t { inactive, allocated, pending };  // pending: active_pending_free

struct Block {
  uint64_t addr = 0, size = 0, requested = 0;
  BlockState state = BlockState::inactive;
  FrameRun frames = 0;
};

struct Segment {
  int device = 0;
  uint64_t addr = 0, size = 0, stream = 0;
  ev::Pool pool = ev::Pool::large;
  bool expandable = false;
  // `segment_pool_id`: (0, 0) the default pool, any other a private one (Note [Private pools]
  // in pytorch_snapshot.cpp).
  std::pair<int64_t, int64_t> pool_id{0, 0};
  FrameRun frames = 0;
  std::vector<Block> blocks;
};

// An `external_annotations` entry: a record_function range opening or closing on a device.
struct Annotation {
  int device = 0;
  bool start = true;
  std::string_view name;
  uint64_t time_ns = 0;
};

// Oddities the reader tolerated, counted for one line each on stderr (Note [Lenient fields]).
class Notes {
 public:
  void add(const std::string& what, uint64_t n = 1) {
    for (auto& [w, c] : counts_)
      if (w == what) {
        c += n;
        return;
      }
    if (counts_.size() + 1 == kMaxKinds && what != kOther) return add(kOther, n);
    counts_.emplace_back(what, n);
  }
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    for (const auto& [w, c] : counts_) out.push_back(std::to_string(c) + " " + w);
    return out;
  }

 private:
  static constexpr size_t kMaxKinds = 16;  // a hostile file's many action names end in kOther
  static constexpr const char* kOther = "other oddities";
  std::vector<std::pair<std::string, uint64_t>> counts_;
};

// Where a field is, for messages: "device_traces[0][12]".
struct Where {
  const char* what;
  int64_t a = -1, b = -1;
  const char* sub = nullptr;  // "blocks", "frames"
  int64_t c = -1;
  std::string str() const {
    std::string s = what;
    if (a >= 0) s += "[" + std::to_string(a) + "]";
    if (b >= 0) s += "[" + std::to_string(b) + "]";
    if (sub) s += std::string(".") + sub;
    if (c >= 0) s += "[" + std::to_string(c) + "]";
    return s;
  }
};

// Note [Frame dicts by content]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch shares each frame dict through the pickle's memo, so a snapshot holds one per
// distinct frame however many stacks name it. A pickle written without that sharing (another
// writer, `pickle.Pickler.fast`, a snapshot rebuilt from JSON) holds one per use: 20-60 per
// allocation, each a document container of ~150 bytes, which made import memory grow ~14 times
// the input. The reader keeps the first flat dict (no container inside) of each content and puts
// it in the place of every later equal one as it goes into a list, releasing the duplicate; the
// frame runs of two lists then compare equal item by item, as for a memo-shared snapshot. Only
// lists are told (a frame in a tuple stays as it is), and a dict with an 'action' is an entry.
class DictsByContent {
 public:
  // The identity of the first dict added with the content of dict `id` (`id` itself when none:
  // it is added). Every dict added must stay unchanged in `doc`.
  uint32_t find_or_add(const pickle::Document& doc, uint32_t id) {
    if ((count_ + 1) * 2 > slots_.size()) grow();
    const uint32_t h = hash(doc, id);
    for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      Slot& s = slots_[i];
      if (s.id_plus_1 == 0) {
        s = {h, id + 1};
        ++count_;
        return id;
      }
      if (s.hash == h && equal(doc, s.id_plus_1 - 1, id)) return s.id_plus_1 - 1;
    }
  }

 private:
  struct Slot {
    uint32_t hash = 0, id_plus_1 = 0;  // 0: empty
  };
  static pickle::Ref dict_of(const pickle::Document& doc, uint32_t id) {
    pickle::Val v;
    v.type = Type::dict;
    v.index = id;
    return {&doc, v};
  }
  static uint64_t mix(uint64_t h, uint64_t x) {
    h = (h ^ x) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
  }
  static uint64_t hash_of(Ref v) {
    uint64_t h = static_cast<uint8_t>(v.type());
    if (auto s = v.type() == Type::bytes ? v.as_bytes() : v.as_string())
      return mix(h, std::hash<std::string_view>{}(*s));
    if (v.type() == Type::global) {
      auto [m, n] = *v.as_global();
      return mix(mix(h, std::hash<std::string_view>{}(m)), std::hash<std::string_view>{}(n));
    }
    uint64_t bits;
    const pickle::Val x = v.val();
    std::memcpy(&bits, &x.i, sizeof bits);
    return mix(h, v.is_none() ? 0 : bits);
  }
  static bool same(Ref a, Ref b) {
    if (a.type() != b.type()) return false;
    switch (a.type()) {
      case Type::string:
        return a.as_string() == b.as_string();
      case Type::bytes:
        return a.as_bytes() == b.as_bytes();
      case Type::global:
        return a.as_global() == b.as_global();
      case Type::none:
        return true;
      default: {
        const pickle::Val x = a.val(), y = b.val();
        return std::memcmp(&x.i, &y.i, sizeof x.i) ==
               0;  // bits: 0.0 and -0.0 differ, NaN equals itself
      }
    }
  }
  static uint32_t hash(const pickle::Document& doc, uint32_t id) {
    const Ref d = dict_of(doc, id);
    uint64_t h = d.size();
    for (size_t k = 0; k < d.size(); ++k) h = mix(mix(h, hash_of(d.key(k))), hash_of(d.value(k)));
    return static_cast<uint32_t>(h ^ (h >> 32));
  }
  static bool equal(const pickle::Document& doc, uint32_t a, uint32_t b) {
    const Ref x = dict_of(doc, a), y = dict_of(doc, b);
    if (x.size() != y.size()) return false;
    for (size_t k = 0; k < x.size(); ++k)
      if (!same(x.key(k), y.key(k)) || !same(x.value(k), y.value(k))) return false;
    return true;
  }
  void grow() {
    std::vector<Slot> old(std::max<size_t>(64, slots_.size() * 2));
    old.swap(slots_);
    for (const Slot& s : old) {
      if (s.id_plus_1 == 0) continue;
      size_t i = s.hash & (slots_.size() - 1);
      while (slots_[i].id_plus_1) i = (i + 1) & (slots_.size() - 1);
      slots_[i] = s;
    }
  }
  std::vector<Slot> slots_;
  size_t count_ = 0;
};

// ---- Phase 1: reading -------------------------------------------------------------------------

class SnapshotReader : public pickle::AppendHook {
 public:
  explicit SnapshotReader(const std::string& name) : name_(name) {}
  // The document parsed (with this reader as its AppendHook, or not): read() reads it.
  void set_document(const pickle::Document* doc) { doc_ = doc; }

  [[noreturn]] void fail(const Where& w, const std::string& what) const {
    throw ImportError(name_ + ": not a PyTorch memory snapshot: " + w.str() + ": " + what);
  }

  Ref required(Ref dict, std::string_view key, const Where& w) const {
    std::optional<Ref> v = dict.get(key);
    if (!v) fail(w, "no '" + std::string(key) + "' field");
    return *v;
  }
  int64_t integer(Ref v, std::string_view key, const Where& w) const {
    if (auto i = v.as_int()) return *i;
    if (v.type() == Type::boolean) return *v.as_bool();
    fail(w, "'" + std::string(key) + "' is " + std::string(pickle::type_name(v.type())) + " " +
                v.repr(40) + ", expected an int");
  }
  // A size or an address: 0 to kMaxBytes.
  uint64_t bytes(Ref v, std::string_view key, const Where& w) const {
    int64_t i = integer(v, key, w);
    if (i < 0) fail(w, "'" + std::string(key) + "' is negative (" + std::to_string(i) + ")");
    if (static_cast<uint64_t>(i) > kMaxBytes)
      fail(w,
           "'" + std::string(key) + "' " + std::to_string(i) + " is out of range (more than 2^56)");
    return static_cast<uint64_t>(i);
  }
  uint64_t unsigned_field(Ref dict, std::string_view key, const Where& w) const {
    return bytes(required(dict, key, w), key, w);
  }
  uint64_t stream_field(Ref dict, const Where& w) const {
    std::optional<Ref> v = dict.get("stream");
    if (!v || v->is_none()) return 0;
    return static_cast<uint64_t>(integer(*v, "stream", w));  // a cudaStream_t as an integer
  }
  // A frames list's run, or none (PyTorch's empty list) for an absent or odd value.
  FrameRun frames_of(std::optional<Ref> v) {
    if (!v || v->is_none()) return 0;
    if (v->type() != Type::list && v->type() != Type::tuple) {
      notes_.add("'frames' values that are not lists (read as no frames)");
      return 0;
    }
    return run_of(*v);
  }
  FrameRun frames_field(Ref dict) { return frames_of(dict.get("frames")); }

  static uint64_t payload(const pickle::Val& v) {
    uint64_t bits;
    std::memcpy(&bits, &v.i, sizeof bits);
    return bits;
  }
  // The run of a list or tuple (cached by its identity: a released list keeps its run).
  FrameRun run_of(Ref list) {
    const uint32_t id = list.identity();
    if (id < run_of_list_.size() && run_of_list_[id] != kNoRun) return run_of_list_[id];
    FrameRun run = 0;
    if (const size_t n = list.size(); n > 0) {
      // By content: a hash of the items, then the runs with that hash compared item by item.
      run_key_.clear();
      uint64_t h = n;
      for (size_t i = 0; i < n; ++i) {
        const pickle::Val v = list[i].val();
        run_key_.push_back(v);
        h = (h ^ (uint64_t{static_cast<uint8_t>(v.type)} << 32 | v.index) ^ payload(v) * 31) *
            0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
      }
      auto same = [&](FrameRun r) {
        auto [items, count] = run_items(r);
        if (count != n) return false;
        for (size_t i = 0; i < n; ++i)
          if (items[i].type != run_key_[i].type || items[i].index != run_key_[i].index ||
              payload(items[i]) != payload(run_key_[i]))
            return false;
        return true;
      };
      auto [b, e] = runs_.equal_range(h);
      for (auto it = b; it != e && run == 0; ++it)
        if (same(it->second)) run = it->second;
      if (run == 0) {
        run = static_cast<FrameRun>(run_end_.size());
        run_items_.insert(run_items_.end(), run_key_.begin(), run_key_.end());
        run_end_.push_back(run_items_.size());
        runs_.emplace(h, run);
      }
    }
    if (id >= run_of_list_.size())
      run_of_list_.resize(std::max<size_t>(id + 1, run_of_list_.size() * 3 / 2), kNoRun);
    run_of_list_[id] = run;
    return run;
  }
  // The items of a run (frame dicts, innermost first), valid while the document lives.
  std::pair<const pickle::Val*, size_t> run_items(FrameRun run) const {
    if (run == 0) return {nullptr, 0};
    const size_t b = run_end_[run - 1], e = run_end_[run];
    return {run_items_.data() + b, e - b};
  }
  const pickle::Document& doc() const { return *doc_; }

  // pickle::AppendHook: passed on to `on_consumed` (a mapped input lets its pages go).
  std::function<void(uint64_t)> on_consumed;
  void consumed(uint64_t offset) override {
    if (on_consumed) on_consumed(offset);
  }

  // pickle::AppendHook: a dict that goes into a list and has an 'action' is read as a trace
  // entry at once, and released with its frames list, when it reads cleanly (a known action,
  // every field usable); anything else stays for read_trace to report as it always has. A flat
  // dict without an 'action' (a frame, an annotation) is kept once per content (Note [Frame
  // dicts by content]).
  pickle::Val dict_appended(pickle::Document& doc, pickle::Val dict) override {
    const uint32_t id = dict.index;
    // Each dict is looked at once: frame dicts go into every frames list that names them.
    if (id < same_as_.size() && same_as_[id]) {
      dict.index = same_as_[id] - 1;
      return dict;
    }
    if (id < entry_of_dict_.size() && entry_of_dict_[id] != kNoEntry) return dict;
    if (id >= entry_of_dict_.size())
      entry_of_dict_.resize(std::max<size_t>(id + 1, entry_of_dict_.size() * 3 / 2), kNoEntry);
    entry_of_dict_[id] = kNotEarly;
    const pickle::Document* saved = doc_;
    doc_ = &doc;
    Ref e(&doc, dict);
    std::optional<Ref> f[kEntryFields];
    bool flat = true;
    for (size_t k = 0, n = e.size(); k < n; ++k) {
      int field = entry_field(e.key(k));
      if (field >= 0) f[field] = e.value(k);
      const Type t = e.value(k).type();
      flat = flat && t != Type::list && t != Type::tuple && t != Type::dict;
    }
    Entry entry;
    if (f[kAction] && early_.size() < kNotEarly && convert_entry(f, entry)) {
      entry_of_dict_[id] = static_cast<uint32_t>(early_.size());
      early_.push_back(entry);
      if (f[kFrames]) doc.release(f[kFrames]->val());
      doc.release(dict);
    } else if (!f[kAction] && flat) {
      const uint32_t first = by_content_.find_or_add(doc, id);
      if (first != id) {
        if (id >= same_as_.size())
          same_as_.resize(std::max<size_t>(id + 1, same_as_.size() * 3 / 2), 0);
        same_as_[id] = first + 1;
        doc.release(dict);
        dict.index = first;
      }
    }
    doc_ = saved;
    return dict;
  }

  void read(Ref root) {
    Ref segments = root, traces{doc_, {}}, host_segments{doc_, {}}, host_traces{doc_, {}};
    if (root.type() == Type::dict) {
      segments = required(root, "segments", {"snapshot"});
      if (auto t = root.get("device_traces")) traces = *t;
      // The pinned host allocator's, with `_record_memory_history(record_pinned_host_memory=True)`.
      if (auto h = root.get("host_segments")) host_segments = *h;
      if (auto h = root.get("host_traces")) host_traces = *h;
      if (auto s = root.get("allocator_settings")) read_settings(*s);
      if (auto a = root.get("external_annotations")) read_annotations(*a);
    } else if (root.type() != Type::list) {
      // PyTorch < 2.1 pickled a bare list of segments; anything else is not a snapshot.
      throw ImportError(name_ + ": not a PyTorch memory snapshot: the pickle holds " +
                        std::string(pickle::type_name(root.type())) + " " + root.repr(60) +
                        ", expected a dict with 'segments' and 'device_traces'");
    }
    if (segments.type() != Type::list)
      fail({"segments"},
           "is " + std::string(pickle::type_name(segments.type())) + ", expected a list");
    read_segments(segments);
    if (traces.type() == Type::list) {
      for (size_t d = 0; d < traces.size(); ++d)
        read_trace(static_cast<int>(std::min<size_t>(d, std::numeric_limits<int>::max())),
                   traces[d]);
    } else if (traces.type() == Type::dict) {  // {device: [entries]}
      for (size_t i = 0; i < traces.size(); ++i) {
        auto d = traces.key(i).as_int();
        if (!d) fail({"device_traces"}, "a key is not a device index");
        read_trace(device_index(*d, {"device_traces"}), traces.value(i));
      }
    } else if (!traces.is_none()) {
      fail({"device_traces"},
           "is " + std::string(pickle::type_name(traces.type())) + ", expected a list");
    }
    read_host(host_segments, host_traces);
    if (untimed_ > 0) {
      // Note [Synthetic times]: without times, every entry's time is its place in its trace.
      for (auto& [d, entries] : traces_)
        for (size_t i = 0; i < entries.size(); ++i) entries[i].time_ns = i * 1000;
      synthetic_times_ = true;
      if (!annotations_.empty())
        notes_.add("annotations left out (the trace has no times to place them at)",
                   annotations_.size());
      annotations_.clear();
    }
    std::vector<Entry>().swap(early_);
    std::vector<uint32_t>().swap(entry_of_dict_);
    std::vector<uint32_t>().swap(same_as_);
    by_content_ = {};
  }

  // One annotation; false when a field is missing or odd.
  static bool read_annotation(Ref a, Annotation& out) {
    std::optional<Ref> stage = a.get("stage"), name = a.get("name"), device = a.get("device"),
                       time = a.get("time_us");
    if (!stage || !name || !time) return false;
    const std::optional<std::string_view> st = stage->as_string(), nm = name->as_string();
    const std::optional<int64_t> tm = time->as_int();
    if (!st || !nm || !tm || (*st != "START" && *st != "END")) return false;
    if (*tm < 0 || *tm > std::numeric_limits<int64_t>::max() / 1000) return false;
    int64_t dv = 0;
    if (device) {
      const std::optional<int64_t> d = device->as_int();
      if (!d || *d < 0 || *d > 127) return false;
      dv = *d;
    }
    out = {static_cast<int>(dv), *st == "START", *nm, static_cast<uint64_t>(*tm) * 1000};
    return true;
  }

  // external_annotations: [{'stage': 'START'|'END', 'name': str, 'device': int, 'time_us': int}]
  // (record_function ranges). Odd entries are skipped and counted.
  void read_annotations(Ref list) {
    if (list.type() != Type::list && list.type() != Type::tuple) {
      if (!list.is_none()) notes_.add("'external_annotations' that is not a list (left out)");
      return;
    }
    count_records(list.size(), {"external_annotations"});
    for (size_t i = 0; i < list.size(); ++i) {
      Ref a = list[i];
      Annotation out;
      if (!read_annotation(a, out)) {
        notes_.add("annotations with odd fields (left out)");
        continue;
      }
      annotations_.push_back(out);
    }
    std::stable_sort(
        annotations_.begin(), annotations_.end(),
        [](const Annotation& x, const Annotation& y) { return x.time_ns < y.time_ns; });
  }

  // Note [Expansion bound]: a pickle's memo lets a small file name one list many times (one
  // 1M-entry trace shared by 100 devices is 2 MB of pickle and 100M entries to import). Real
  // snapshots spend 50 bytes or more per entry, block and annotation, so more than one record
  // per 16 input bytes (and more than a million) is refused unless the caller raised the limit.
  void count_records(size_t n, const Where& w) {
    records_ += n;
    if (records_ > max_records_)
      throw ImportError(
          name_ + ": " + w.str() + ": the snapshot expands to more than " +
          std::to_string(max_records_) + " trace entries, blocks and annotations from " +
          std::to_string(input_bytes_) +
          " bytes (lists shared through the pickle's memo?); --max-events raises the limit");
  }
  void set_limits(uint64_t input_bytes, uint64_t max_records) {
    input_bytes_ = input_bytes;
    max_records_ = max_records ? max_records : std::max<uint64_t>(1'000'000, input_bytes / 16);
  }

  int device_index(int64_t d, const Where& w) const {
    if (d < 0 || d > std::numeric_limits<int8_t>::max())
      fail(w, "device index " + std::to_string(d) + " is out of range (0 to 127)");
    return static_cast<int>(d);
  }

  // Pinned host memory: `host_segments` as `segments` and `host_traces` as `device_traces`, all
  // on the one kPinnedHost device (their `device` fields are not read). host_traces may be a
  // list of traces, one trace (a list of entries) or a dict of traces; several are merged by
  // time.
  void read_host(Ref segments, Ref traces) {
    if (!segments.is_none()) {
      if (segments.type() != Type::list)
        fail({"host_segments"},
             "is " + std::string(pickle::type_name(segments.type())) + ", expected a list");
      read_segments(segments, "host_segments", true);
    }
    if (traces.is_none()) return;
    std::vector<std::pair<int64_t, Ref>> lists;
    if (traces.type() == Type::list && traces.size() > 0 && traces[0].type() == Type::dict) {
      lists.emplace_back(-1, traces);  // one trace
    } else if (traces.type() == Type::list) {
      for (size_t i = 0; i < traces.size(); ++i)
        lists.emplace_back(static_cast<int64_t>(i), traces[i]);
    } else if (traces.type() == Type::dict) {
      for (size_t i = 0; i < traces.size(); ++i)
        lists.emplace_back(static_cast<int64_t>(i), traces.value(i));
    } else {
      fail({"host_traces"},
           "is " + std::string(pickle::type_name(traces.type())) + ", expected a list");
    }
    size_t read = 0;
    for (const auto& [i, list] : lists) {
      read += list.size() > 0;
      read_trace(kPinnedHost, list, true, i);
    }
    if (read > 1) {
      std::vector<Entry>& t = traces_[kPinnedHost];
      std::stable_sort(t.begin(), t.end(),
                       [](const Entry& a, const Entry& b) { return a.time_ns < b.time_ns; });
    }
  }

  // `segments`, or (host) `host_segments`, whose segments are all on kPinnedHost.
  void read_segments(Ref segments, const char* what = "segments", bool host = false) {
    segments_.reserve(segments_.size() + segments.size());
    for (size_t i = 0; i < segments.size(); ++i) {
      Where w{what, static_cast<int64_t>(i)};
      Ref s = segments[i];
      if (s.type() != Type::dict)
        fail(w, "is " + std::string(pickle::type_name(s.type())) + ", expected a dict");
      Segment seg;
      seg.device =
          host ? kPinnedHost : device_index(integer(required(s, "device", w), "device", w), w);
      seg.addr = unsigned_field(s, "address", w);
      seg.size = unsigned_field(s, "total_size", w);
      seg.stream = stream_field(s, w);
      seg.frames = frames_field(s);
      seg.pool = seg.size == kSmallBuffer ? ev::Pool::small : ev::Pool::large;
      if (auto t = s.get("segment_type")) {
        auto type = t->as_string();
        if (type == "small" || type == "large")
          seg.pool = *type == "small" ? ev::Pool::small : ev::Pool::large;
        else
          notes_.add("segments of an unknown 'segment_type' (pool taken from the size)");
      }
      if (auto e = s.get("is_expandable")) seg.expandable = e->as_bool().value_or(false);
      if (auto p = s.get("segment_pool_id"); p && !p->is_none()) {  // Note [Private pools]
        const bool pair = (p->type() == Type::tuple || p->type() == Type::list) && p->size() == 2;
        const std::optional<int64_t> a = pair ? (*p)[0].as_int() : std::nullopt,
                                     b = pair ? (*p)[1].as_int() : std::nullopt;
        if (a && b)
          seg.pool_id = {*a, *b};
        else
          notes_.add(
              "segments whose 'segment_pool_id' is not a pair of ints (read as the default pool)");
      }
      Ref blocks = required(s, "blocks", w);
      if (blocks.type() != Type::list) fail(w, "'blocks' is not a list");
      count_records(blocks.size(), w);
      uint64_t next = seg.addr;  // PyTorch < 2.1 blocks have no address: they tile the segment
      for (size_t j = 0; j < blocks.size(); ++j) {
        Where bw{what, static_cast<int64_t>(i), -1, "blocks", static_cast<int64_t>(j)};
        Ref b = blocks[j];
        if (b.type() != Type::dict) fail(bw, "is not a dict");
        Block blk;
        blk.addr = b.get("address") ? unsigned_field(b, "address", bw) : next;
        blk.size = unsigned_field(b, "size", bw);
        // PyTorch 2.0 gave a block's request and frames in `history` (newest first).
        std::optional<Ref> first;
        if (auto h = b.get("history"); h && h->size() > 0 && (*h)[0].type() == Type::dict)
          first = (*h)[0];
        if (b.get("requested_size"))
          blk.requested = unsigned_field(b, "requested_size", bw);
        else if (first && first->get("real_size"))
          blk.requested = unsigned_field(*first, "real_size", bw);
        else
          blk.requested = blk.size;
        next = blk.addr + blk.size;
        if (next > kMaxBytes)
          fail(
              bw,
              "the block ends beyond 2^56 (its address is its segment's plus the sizes before it)");
        Ref state = required(b, "state", bw);
        auto st = state.as_string();
        if (st == "active_allocated") {
          blk.state = BlockState::allocated;
        } else if (st == "active_pending_free" || st == "active_awaiting_free") {
          blk.state = BlockState::pending;
        } else {
          if (st != "inactive") notes_.add("blocks of an unknown 'state' (read as inactive)");
          blk.state = BlockState::inactive;
        }
        blk.frames = b.get("frames") || !first ? frames_field(b) : frames_field(*first);
        if (blk.state != BlockState::inactive) seg.blocks.push_back(blk);
      }
      segments_.push_back(std::move(seg));
    }
  }

  // A trace entry's fields read without a note or an error; false when one would be needed
  // (read_trace then reads the entry and says what is wrong).
  bool convert_entry(const std::optional<Ref> (&f)[10], Entry& entry) {
    static_assert(kEntryFields == 10);
    auto a = f[kAction]->as_string();
    if (!a) return false;
    entry.action = parse_action(*a);
    if (entry.action == Action::other) return false;
    auto clean_int = [](const std::optional<Ref>& v) -> std::optional<int64_t> {
      if (!v) return std::nullopt;
      if (auto i = v->as_int()) return *i;
      if (v->type() == Type::boolean) return *v->as_bool();
      return std::nullopt;
    };
    auto clean_bytes = [&](const std::optional<Ref>& v) -> std::optional<uint64_t> {
      auto i = clean_int(v);
      if (!i || *i < 0 || static_cast<uint64_t>(*i) > kMaxBytes) return std::nullopt;
      return static_cast<uint64_t>(*i);
    };
    if (f[kTimeUs]) {
      auto t = clean_int(f[kTimeUs]);
      if (!t || *t < 0 || *t > std::numeric_limits<int64_t>::max() / 1000) return false;
      entry.time_ns = static_cast<uint64_t>(*t) * 1000;
      entry.timed = true;
    }
    auto size = clean_bytes(f[kSize]);
    if (!size) return false;
    entry.size = *size;
    if (f[kStream] && !f[kStream]->is_none()) {
      auto st = clean_int(f[kStream]);
      if (!st) return false;
      entry.stream = static_cast<uint64_t>(*st);
    }
    if (entry.action == Action::oom) {
      if (f[kDeviceFree]) {
        auto df = clean_bytes(f[kDeviceFree]);
        if (!df) return false;
        entry.addr = *df;
      }
    } else if (entry.action != Action::snapshot) {
      auto addr = clean_bytes(f[kAddr]);
      if (!addr) return false;
      entry.addr = *addr;
    }
    if (f[kCategory])
      if (auto c = f[kCategory]->as_string())
        for (int k = 0; k <= static_cast<int>(ev::Category::temporary); ++k)
          if (*c == ev::category_name(static_cast<ev::Category>(k)))
            entry.category = static_cast<ev::Category>(k);
    if (f[kFrames] && !f[kFrames]->is_none()) {
      if (f[kFrames]->type() != Type::list && f[kFrames]->type() != Type::tuple) return false;
      entry.frames = run_of(*f[kFrames]);
    }
    auto compile = context_of(f[kCompileContext], true),
         metadata = context_of(f[kUserMetadata], false);
    if (!compile || !metadata) return false;
    entry.compile_context = *compile;
    entry.user_metadata = *metadata;
    return true;
  }

  // Note [Entry contexts] (snapshot_emitter.h): an entry's `compile_context` or
  // `user_metadata`, interned. None for an absent key, None, "" and PyTorch's "N/A" (the
  // compile_context of an entry outside any compiled region); nullopt for a value that is not
  // a str. The same value is usually one memoized string, so the last one is remembered.
  std::optional<ContextId> context_of(const std::optional<Ref>& v, bool compile) {
    if (!v || v->is_none()) return ContextId{0};
    if (v->type() != Type::string) return std::nullopt;
    ContextCache& cache = context_cache_[compile ? 0 : 1];
    const uint32_t index = v->val().index;
    if (cache.valid && cache.index == index) return cache.id;
    const std::string_view text = *v->as_string();
    ContextId id = 0;
    if (!text.empty() && !(compile && text == "N/A")) {
      auto [it, fresh] = context_ids_.try_emplace(text, static_cast<ContextId>(contexts_.size()));
      if (fresh) contexts_.push_back(text);
      id = it->second;
    }
    cache = {true, index, id};
    return id;
  }
  // The text of an interned context ("" for none).
  std::string_view context_text(ContextId id) const {
    return id < contexts_.size() ? contexts_[id] : "";
  }

  // Device `device`'s trace (device_traces[device]), or a trace of pinned host memory
  // (host_traces[index], on kPinnedHost).
  void read_trace(int device, Ref trace, bool host = false, int64_t index = 0) {
    const char* what = host ? "host_traces" : "device_traces";
    if (!host) index = device;
    Where tw{what, index};
    if (trace.type() != Type::list) fail(tw, "is not a list");
    if (trace.size() == 0) return;
    if (host)
      device = kPinnedHost;
    else
      device_index(device, tw);
    count_records(trace.size(), tw);
    std::vector<Entry>& out = traces_[device];
    // The usual case: the trace is exactly the entries read while parsing, in order (each dict
    // once): they become the device's trace without a copy.
    if (out.empty() && trace.size() == early_.size()) {
      bool all = true;
      uint64_t untimed = 0;
      for (size_t i = 0; i < trace.size() && all; ++i) {
        const pickle::Val v = trace[i].val();
        all =
            v.type == Type::dict && v.index < entry_of_dict_.size() && entry_of_dict_[v.index] == i;
        if (all) untimed += !early_[i].timed;
      }
      if (all) {
        untimed_ += untimed;
        out = std::move(early_);
        early_.clear();
        early_home_ = &out;  // another trace naming the same dicts (memo-shared) reads them there
        return;
      }
    }
    out.reserve(out.size() + trace.size());
    for (size_t i = 0; i < trace.size(); ++i) {
      Where w{what, index, static_cast<int64_t>(i)};
      Ref e = trace[i];
      if (e.type() == Type::dict && e.val().index < entry_of_dict_.size() &&
          entry_of_dict_[e.val().index] < early_home_->size()) {
        const Entry early =
            (*early_home_)[entry_of_dict_[e.val().index]];  // a copy: `out` may be its home
        untimed_ += !early.timed;
        out.push_back(early);
        continue;
      }
      if (e.type() != Type::dict) fail(w, "is not a dict");
      // One pass over the entry's items (a later duplicate key wins, as in Python).
      std::optional<Ref> f[kEntryFields];
      for (size_t k = 0; k < e.size(); ++k) {
        int field = entry_field(e.key(k));
        if (field >= 0) f[field] = e.value(k);
      }
      auto need = [&](int field) -> Ref {
        if (!f[field]) fail(w, "no '" + std::string(kEntryFieldNames[field]) + "' field");
        return *f[field];
      };
      Entry entry;
      auto a = need(kAction).as_string();
      if (!a) fail(w, "'action' is not a str");
      entry.action = parse_action(*a);
      if (entry.action == Action::other) {
        notes_.add("entries of an action the importer does not know, such as '" +
                   std::string(a->substr(0, 40)) + "' (skipped)");
        continue;
      }
      if (f[kTimeUs]) {
        int64_t t = integer(*f[kTimeUs], "time_us", w);
        if (t < 0 || t > std::numeric_limits<int64_t>::max() / 1000)
          fail(w, "'time_us' " + std::to_string(t) + " is out of range");
        entry.time_ns = static_cast<uint64_t>(t) * 1000;
        entry.timed = true;
      } else {
        ++untimed_;  // PyTorch before 2.1 wrote no times
      }
      entry.size = bytes(need(kSize), "size", w);
      if (f[kStream] && !f[kStream]->is_none())
        entry.stream = static_cast<uint64_t>(integer(*f[kStream], "stream", w));
      if (entry.action == Action::oom) {
        if (f[kDeviceFree]) entry.addr = bytes(*f[kDeviceFree], "device_free", w);
      } else if (entry.action != Action::snapshot) {
        entry.addr = bytes(need(kAddr), "addr", w);
      }
      if (f[kCategory])
        if (auto c = f[kCategory]->as_string())
          for (int k = 0; k <= static_cast<int>(ev::Category::temporary); ++k)
            if (*c == ev::category_name(static_cast<ev::Category>(k)))
              entry.category = static_cast<ev::Category>(k);
      entry.frames = frames_of(f[kFrames]);
      for (bool compile : {true, false}) {
        const std::optional<ContextId> c =
            context_of(f[compile ? kCompileContext : kUserMetadata], compile);
        if (!c)
          notes_.add(std::string("trace entries whose '") +
                     (compile ? "compile_context" : "user_metadata") +
                     "' is not a str (read as none)");
        (compile ? entry.compile_context : entry.user_metadata) = c.value_or(0);
      }
      out.push_back(entry);
    }
  }

  // Fields of a trace entry. Keys are memoized strings, so the same few string values recur:
  // they are recognised by their index after the first comparison.
  enum EntryField {
    kAction,
    kAddr,
    kSize,
    kStream,
    kTimeUs,
    kFrames,
    kDeviceFree,
    kCategory,
    kCompileContext,
    kUserMetadata,
    kEntryFields
  };
  static constexpr const char* kEntryFieldNames[kEntryFields] = {
      "action", "addr",        "size",     "stream",          "time_us",
      "frames", "device_free", "category", "compile_context", "user_metadata"};
  int entry_field(Ref key) {
    if (key.type() != Type::string) return -1;
    const uint32_t idx = key.val().index;
    for (const auto& [i, field] : key_cache_)
      if (i == idx) return field;
    int field = -1;
    std::string_view k = *key.as_string();
    for (int j = 0; j < kEntryFields; ++j)
      if (k == kEntryFieldNames[j]) field = j;
    if (key_cache_.size() < 64) key_cache_.emplace_back(idx, field);
    return field;
  }

  // allocator_settings as PyTorch's `key:value,key:value` configuration text. Real settings
  // are a few hundred bytes, but the memo lets a pickle name one list at every level of a
  // nest (2^40 leaves from 436 bytes), so the text is bounded: settings that render to more
  // than kMaxSettingsBytes, or nest deeper than kMaxSettingsDepth, are left out (counted in
  // the notes), and replay then assumes PyTorch's defaults, as for a snapshot without them.
  static constexpr size_t kMaxSettingsBytes = 64 * 1024;
  static constexpr int kMaxSettingsDepth = 16;
  void read_settings(Ref v) {
    std::string text;
    if (render_settings(v, 0, text)) {
      allocator_settings_ = std::move(text);
    } else {
      notes_.add(
          "'allocator_settings' longer than 64 KiB or nested deeper than 16 levels (left out; "
          "replay assumes PyTorch's defaults)");
    }
  }
  // Appends `v`'s text to `s`; false once the text passes a bound.
  static bool render_settings(Ref v, int depth, std::string& s) {
    if (depth > kMaxSettingsDepth) return false;
    switch (v.type()) {
      case Type::dict:
        if (depth) s += "{";
        for (size_t i = 0; i < v.size(); ++i) {
          if (i) s += ",";
          if (!render_settings(v.key(i), depth + 1, s)) return false;
          s += ":";
          if (!render_settings(v.value(i), depth + 1, s)) return false;
        }
        if (depth) s += "}";
        break;
      case Type::list:
      case Type::tuple:
        s += "[";
        for (size_t i = 0; i < v.size(); ++i) {
          if (i) s += ",";
          if (!render_settings(v[i], depth + 1, s)) return false;
        }
        s += "]";
        break;
      case Type::string:
        s += *v.as_string();
        break;
      case Type::boolean:
        s += *v.as_bool() ? "True" : "False";
        break;
      default:
        s += v.repr(60);
    }
    return s.size() <= kMaxSettingsBytes;
  }

  static constexpr uint32_t kNoRun = std::numeric_limits<uint32_t>::max();
  static constexpr uint32_t kNoEntry = std::numeric_limits<uint32_t>::max();  // not looked at
  static constexpr uint32_t kNotEarly = kNoEntry - 1;  // looked at: read_trace reads it
  const pickle::Document* doc_ = nullptr;
  const std::string& name_;
  // Frame runs: run r's items are run_items_[run_end_[r - 1], run_end_[r]).
  std::vector<pickle::Val> run_items_;
  std::vector<size_t> run_end_{0};
  std::unordered_multimap<uint64_t, FrameRun> runs_;  // hash of the items -> run
  std::vector<pickle::Val> run_key_;                  // the items of the list being read
  std::vector<uint32_t> run_of_list_;                 // list identity -> run (kNoRun: not read yet)
  // Entries read while parsing (dict_appended), by dict identity.
  std::vector<Entry> early_;
  std::vector<Entry>* early_home_ = &early_;  // where they are: a trace took them without a copy
  std::vector<uint32_t> entry_of_dict_;
  DictsByContent by_content_;  // flat dicts without an 'action', one per content
  std::vector<uint32_t>
      same_as_;  // dict identity -> 1 + the identity of the equal one kept (0: none)
  std::vector<Segment> segments_;
  std::map<int, std::vector<Entry>> traces_;
  std::string allocator_settings_;
  std::vector<Annotation> annotations_;  // by time
  // Interned compile_context and user_metadata texts: contexts_[id], id 0 none.
  std::vector<std::string_view> contexts_{std::string_view()};
  std::unordered_map<std::string_view, ContextId> context_ids_;
  struct ContextCache {
    bool valid = false;
    uint32_t index = 0;  // the str value last seen (its document index)
    ContextId id = 0;
  };
  ContextCache context_cache_[2];  // compile_context, user_metadata
  Notes notes_;
  uint64_t untimed_ = 0;  // entries without `time_us`
  bool synthetic_times_ = false;
  uint64_t records_ = 0, input_bytes_ = 0, max_records_ = std::numeric_limits<uint64_t>::max();
  std::vector<std::pair<uint32_t, int>> key_cache_;  // string index -> entry field (-1: other)
};

}  // namespace tidemark::importers::snapshot
