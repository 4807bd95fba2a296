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
  static constexpr uint32_t kAbsent = UINT32_MAX;
  // The identity of the first dict added with the content of dict `id`; when there is none,
  // `id` itself, added, or with `may_add` false kAbsent. Every dict added must stay unchanged
  // in `doc`.
  uint32_t find_or_add(const pickle::Document& doc, uint32_t id, bool may_add = true);

 private:
  struct Slot {
    uint32_t hash = 0, id_plus_1 = 0;  // 0: empty
  };
  void grow();
  std::vector<Slot> slots_;
  size_t count_ = 0;
};

// ---- Phase 1: reading -------------------------------------------------------------------------

// Reads a parsed snapshot into segments, device traces and annotations, checking every field it
// uses (Note [Lenient fields]). Given to pickle::parse as its AppendHook, it reads each trace
// entry as the parser makes its dict and lets the dict go, so a snapshot's millions of entry
// dicts are never held at once; read() then reads what is left.
class SnapshotReader : public pickle::AppendHook {
 public:
  // `name` names the file in messages; it must outlive the reader.
  explicit SnapshotReader(const std::string& name) : name_(name) {}
  // The document parsed (with this reader as its AppendHook, or not): read() reads it.
  void set_document(const pickle::Document* doc) { doc_ = doc; }
  // Before parsing. Note [Expansion bound]: more than `max_records` entries, blocks and
  // annotations are refused (0: one per 16 of the input's `input_bytes`, and at least a
  // million); Note [Frame bound]: frames past the distinct ones kept are left out.
  void set_limits(uint64_t input_bytes, uint64_t max_records);
  // Reads the snapshot under `root` (a dict, or PyTorch < 2.1's bare list of segments). A field
  // the curves need that cannot be used throws an ImportError naming it.
  void read(Ref root);

  // pickle::AppendHook: passed on to `on_consumed` (a mapped input lets its pages go).
  std::function<void(uint64_t)> on_consumed;
  void consumed(uint64_t offset) override;
  // pickle::AppendHook: a dict that goes into a list and has an 'action' is read as a trace
  // entry at once, and released with its frames list, when it reads cleanly (a known action,
  // every field usable); anything else stays for read() to report as it always has. A flat
  // dict without an 'action' (a frame, an annotation) is kept once per content (Note [Frame
  // dicts by content]).
  pickle::Val dict_appended(pickle::Document& doc, pickle::Val dict) override;
  // pickle::AppendHook: what the reader keeps by a dropped dict's identity or string's index.
  void dropped(size_t first, size_t end, size_t first_string) override;

  // What read() read.
  const std::vector<Segment>& segments() const { return segments_; }
  // Each device's entries in their order (kPinnedHost's several traces merged by time).
  const std::map<int, std::vector<Entry>>& traces() const { return traces_; }
  // allocator_settings as PyTorch's `key:value,key:value` text; empty when absent or left out.
  const std::string& allocator_settings() const { return allocator_settings_; }
  // `tidemark estimate`'s account of a snapshot no GPU wrote (the string at the top-level key
  // `tidemark_estimate`, JSON; Note [Hook protocol] in python/hook/tidemark_hook/protocol.py);
  // empty in PyTorch's own snapshots, and when over kMaxEstimateBytes (a note says so).
  const std::string& estimated() const { return estimated_; }
  static constexpr size_t kMaxEstimateBytes = 1 << 20;
  const std::vector<Annotation>& annotations() const { return annotations_; }  // by time
  // No entry had a `time_us`: each one's time is its place in its trace (Note [Synthetic times]
  // in pytorch_snapshot.cpp).
  bool synthetic_times() const { return synthetic_times_; }
  // What was tolerated; the later phases add theirs.
  Notes& notes() { return notes_; }
  // Frames past the bound (Note [Frame bound]), and whether a frames list's item is the one
  // that stands for them.
  uint64_t frames_left_out() const { return frames_left_out_; }
  bool is_left_out(const pickle::Val& frame) const {
    return frame.type == Type::dict && frame.index == left_out_;
  }

  // The items of a run (frame dicts, innermost first), valid while the document lives.
  std::pair<const pickle::Val*, size_t> run_items(FrameRun run) const {
    if (run == 0) return {nullptr, 0};
    const size_t b = run_end_[run - 1], e = run_end_[run];
    return {run_items_.data() + b, e - b};
  }
  const pickle::Document& doc() const { return *doc_; }
  // The text of an interned context ("" for none).
  std::string_view context_text(ContextId id) const {
    return id < contexts_.size() ? contexts_[id] : "";
  }

 private:
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

  [[noreturn]] void fail(const Where& w, const std::string& what) const;
  Ref required(Ref dict, std::string_view key, const Where& w) const;
  int64_t integer(Ref v, std::string_view key, const Where& w) const;
  uint64_t bytes(Ref v, std::string_view key, const Where& w) const;
  uint64_t unsigned_field(Ref dict, std::string_view key, const Where& w) const;
  uint64_t stream_field(Ref dict, const Where& w) const;
  int device_index(int64_t d, const Where& w) const;
  FrameRun frames_of(std::optional<Ref> v);
  FrameRun frames_field(Ref dict) { return frames_of(dict.get("frames")); }
  FrameRun run_of(Ref list);
  void count_records(size_t n, const Where& w);
  void read_segments(Ref segments, const char* what = "segments", bool host = false);
  void read_trace(int device, Ref trace, bool host = false, int64_t index = 0);
  void read_host(Ref segments, Ref traces);
  bool convert_entry(const std::optional<Ref> (&f)[kEntryFields], Entry& entry);
  std::optional<ContextId> context_of(const std::optional<Ref>& v, bool compile);
  int entry_field(Ref key);
  static bool read_annotation(Ref a, Annotation& out);
  void read_annotations(Ref list);
  void read_settings(Ref v);
  static bool render_settings(Ref v, int depth, std::string& s);

  static constexpr uint64_t kMinFrames = 100'000;  // Note [Frame bound]
  static constexpr uint64_t kBytesPerFrame = 1024;
  static constexpr size_t kMaxSettingsBytes = 64 * 1024;
  static constexpr int kMaxSettingsDepth = 16;
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
  std::string estimated_;
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
  // Note [Frame bound]: distinct frame dicts kept, at most max_frames_; those left out after,
  // each read as the first of them (`left_out_`, released: an empty dict).
  uint64_t distinct_frames_ = 0, max_frames_ = std::numeric_limits<uint64_t>::max();
  uint64_t frames_left_out_ = 0;
  uint32_t left_out_ = DictsByContent::kAbsent;
  std::vector<std::pair<uint32_t, int>> key_cache_;  // string index -> entry field (-1: other)
};

}  // namespace tidemark::importers::snapshot
