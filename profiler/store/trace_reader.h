// TraceReader: reads a Tidemark trace file (docs/trace-format.md): its meta data,
// the raw events decoded back in seq order, and simple queries over the tables finalize()
// builds. The analysis library builds on it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/store/trace_format.h"

namespace tidemark::store {

namespace detail {
class Db;
class EventStream;
}  // namespace detail

// An event read back from a trace, owning its strings and dimensions: `event`'s spans and
// string views point into this object (copies re-point them).
struct RecordedEvent {
  events::Event event;
  uint64_t stack_id = 0;
  std::vector<int64_t> sizes, strides;
  std::string dtype, op, name;

  RecordedEvent() = default;
  RecordedEvent(const RecordedEvent& o) { *this = o; }
  RecordedEvent& operator=(const RecordedEvent& o);
  RecordedEvent(RecordedEvent&& o) noexcept { *this = std::move(o); }
  RecordedEvent& operator=(RecordedEvent&& o) noexcept;

 private:
  void repoint() noexcept;
  friend class TraceReader;
};

// A row of `devices`: `id` is what the derived tables' `device` columns hold.
struct DeviceRow {
  int64_t id = 0;
  DeviceInfo info;
};

struct StackNode {
  uint64_t id = 0, parent = 0, ip = 0;
};

struct DroppedRow {
  uint64_t ts_ns = 0, count = 0;
};

// One row of `allocations`.
// The category a table's `category` column names (events::category_name); unknown for a name
// this build does not know.
events::Category category_named(std::string_view name);

struct AllocationRow {
  int64_t device = 0;
  uint64_t addr = 0, size = 0, requested_size = 0, stream = 0, segment = 0;
  events::Pool pool = events::Pool::small;
  uint64_t alloc_ts = 0;
  std::optional<uint64_t> free_requested_ts, free_completed_ts;  // empty: not freed
  uint64_t seq = 0, thread = 0, stack_id = 0;
  std::string scope;  // the scope path open at the allocation, "" when none
  events::Category category = events::Category::unknown;
};

// One row of `segments`: a segment (segment_alloc ... segment_free) or a piece of a mapped
// range of an expandable segment (segment_map ... segment_unmap).
struct SegmentRow {
  int64_t device = 0;
  bool mapped = false;  // kind 'mapped'
  uint64_t addr = 0, size = 0, segment = 0, stream = 0;
  events::Pool pool = events::Pool::small;
  uint64_t alloc_ts = 0;
  std::optional<uint64_t> free_ts;             // empty: reserved at the end
  uint64_t seq = 0, thread = 0, stack_id = 0;  // of the segment_alloc / segment_map
};

// One row of `memory_lod`: at level 0 one change (min = max = value), above a bucket.
struct LodRow {
  uint64_t t = 0;               // level 0: the change's time; above: the bucket's start
  std::optional<uint64_t> seq;  // level 0 only
  int64_t n = 0;                // changes summarised
  int64_t allocated = 0, allocated_min = 0, allocated_max = 0;
  int64_t active = 0, active_min = 0, active_max = 0;
  int64_t reserved = 0, reserved_min = 0, reserved_max = 0;
  int64_t requested = 0, requested_min = 0, requested_max = 0;
};

struct LodLevel {
  int level = 0;
  uint64_t width_ns = 0;  // 0 at level 0
  int64_t rows = 0;
};

struct Peak {
  int64_t bytes = 0;
  uint64_t ts_ns = 0;
  uint64_t seq = 0;  // the event that reached it (the first, when reached several times)
};

enum class Curve { allocated, active, reserved, requested };
// A curve's value after a row's last change (level 0: the value the change left).
int64_t curve_value(const LodRow& r, Curve c);

// `bytes` read from a derived table, checked: a size beyond what a trace can hold
// (kMaxEventBytes; a negative one reads as huge) means a damaged or hand-edited file, refused
// with a StoreError naming `path`, `what` and the fix, so no sum of sizes overflows.
uint64_t checked_size(uint64_t bytes, const char* what, const std::string& path);

// Whether `path` is a Tidemark trace: a SQLite database with Tidemark's application_id, of
// any schema version. False for a missing file or anything else.
bool is_trace_file(const std::string& path);

class TraceReader {
 public:
  // raw: the raw tables; finalized: the derived tables too; upgradable: the raw tables of this
  // schema or of an older one finalize() upgrades (derived-table queries then throw unless the
  // trace is current).
  enum class Require { raw, finalized, upgradable };

  // Opens `path` and checks it: a Tidemark trace (application_id), of schema version
  // kSchemaVersion (user_version; see Require::upgradable), finalized when `require` says so.
  // Throws StoreError naming the file and what was expected and seen.
  static TraceReader open(const std::string& path, Require require = Require::raw);
  ~TraceReader();
  TraceReader(TraceReader&&) noexcept;
  TraceReader& operator=(TraceReader&&) noexcept;

  const std::string& path() const;
  int schema_version() const { return schema_version_; }  // the file's user_version

  // ---- Meta and raw tables --------------------------------------------------------------
  TraceMeta meta() const;  // devices included
  std::optional<std::string> meta_value(const std::string& key) const;
  bool finalized() const;
  bool clean_end() const;
  uint64_t event_count() const;    // as of the last commit
  uint64_t dropped_count() const;  // as of the last commit
  // Whether dropped_count() is every event the recording lost (Note [Counted losses] in
  // trace_writer.h): false for a killed recording, or a failed one that had no room to store
  // its final count.
  bool loss_counted() const;
  std::optional<uint64_t> end_ts() const;  // clean end only
  std::vector<DeviceRow> devices() const;
  // The `devices.id` of `device`; empty when the trace has none.
  std::optional<int64_t> device_row_id(events::DeviceId device) const;
  std::string string(uint64_t id) const;  // "" for 0 or an unknown id
  std::vector<ModuleInfo> modules() const;
  std::vector<StackNode> stack_nodes() const;
  // Return addresses of a stack, innermost first.
  std::vector<uint64_t> stack(uint64_t stack_id) const;
  std::vector<DroppedRow> dropped() const;

  // The raw events in seq order, pulled one at a time: a cursor holds only the blocks it is
  // reading, so several (one per trace) can be interleaved by time in bounded memory (merge).
  // event() (spans and strings included) stays valid until the next call to next(); the
  // cursor must not outlive its reader.
  class EventCursor {
   public:
    EventCursor(EventCursor&&) noexcept;
    EventCursor& operator=(EventCursor&&) noexcept;
    ~EventCursor();
    bool next();  // false at the end
    const events::Event& event() const { return event_; }
    uint64_t stack_id() const { return stack_id_; }

   private:
    friend class TraceReader;
    explicit EventCursor(const TraceReader& reader);
    const std::vector<std::string>* strings_;
    std::unique_ptr<detail::EventStream> stream_;
    events::Event event_{};
    uint64_t stack_id_ = 0;
  };
  EventCursor event_cursor() const;
  // Calls `fn` for every raw event in seq order. The event (spans and strings included) is
  // valid during the call only, as in events::Sink::on_event.
  void for_each_event(const std::function<void(const events::Event&, uint64_t stack_id)>& fn) const;
  std::vector<RecordedEvent> events() const;

  // ---- Derived tables (throw StoreError on an unfinalized trace) --------------------------
  // Highest value of a curve on a device, with when it was first reached (the earliest
  // change by time, then seq, reaching it); empty when the device has no memory events.
  // Found by walking down the level-of-detail pyramid, so it decodes a few chunks.
  std::optional<Peak> peak(int64_t device, Curve curve = Curve::allocated) const;
  // The earliest change (by time, then seq) in [t0, t1) whose curve value is at least
  // `value`, found the same way; empty when there is none.
  std::optional<Peak> first_at_least(int64_t device, Curve curve, int64_t value, uint64_t t0,
                                     uint64_t t1) const;
  // Allocations allocated at or before `ts` and not yet free_requested at `ts`.
  std::vector<AllocationRow> allocations_live_at(int64_t device, uint64_t ts) const;
  std::vector<AllocationRow> allocations(int64_t device) const;  // by alloc seq
  // Rows of `allocations` selected by an SQL tail ("WHERE ... ORDER BY ..."), its ?1, ?2, ...
  // bound to `params` in order, so that rows are decoded in one place. The store's own
  // queries (allocator_tables.h) build the tails; code outside the store asks those.
  std::vector<AllocationRow> allocations_where(const std::string& where,
                                               const std::vector<int64_t>& params) const;
  // The same rows one at a time, for a pass over a long run's millions.
  void for_each_allocation_where(const std::string& where, const std::vector<int64_t>& params,
                                 const std::function<void(const AllocationRow&)>& fn) const;
  // Rows of `segments` selected as allocations_where selects allocations.
  std::vector<SegmentRow> segments_where(const std::string& where,
                                         const std::vector<int64_t>& params) const;
  // The level-of-detail pyramid of the memory curves (memory_lod, stored in chunks that a
  // reader decodes as it needs them; level 0 is every change, in seq order).
  std::vector<LodLevel> lod_levels(int64_t device) const;
  // Rows of one level with t in [t0, t1], by t (rows of one t in stored order).
  std::vector<LodRow> lod(int64_t device, int level, uint64_t t0, uint64_t t1) const;
  // Calls `fn` for the rows of one level with t in [t0, t1] in stored order (level 0: seq
  // order) until it returns false.
  void for_each_lod(int64_t device, int level, uint64_t t0, uint64_t t1,
                    const std::function<bool(const LodRow&)>& fn) const;
  // The row of a level with the greatest t below `ts` (the last stored of those): the curves'
  // values just before `ts`. Empty when there is none.
  std::optional<LodRow> lod_before(int64_t device, int level, uint64_t ts) const;
  // The last row of a level: the curves' values at the end.
  std::optional<LodRow> lod_last(int64_t device, int level) const;
  // The level-0 row of the change made by event `seq`; empty when that event changed no
  // curve of the device.
  std::optional<LodRow> lod_at_seq(int64_t device, uint64_t seq) const;
  // Symbolized frames of a return address, innermost inlined first (empty when unresolved).
  std::vector<ResolvedFrame> frames(uint64_t ip) const;

  // The reader's connection: the analysis library queries the derived tables through it, so an
  // open trace has one connection (profiler/store/sqlite_db.h; not installed API).
  detail::Db& db() const { return *db_; }

 private:
  TraceReader(std::unique_ptr<detail::Db> db, int schema_version);
  void require_finalized() const;
  const std::vector<std::string>& strings() const;

  struct LodChunks;
  struct LodCache;
  const LodChunks& lod_chunks(int64_t device, int level) const;
  void decode_lod(const LodChunks& chunks, size_t i, std::vector<LodRow>& out) const;

  std::unique_ptr<detail::Db> db_;
  int schema_version_ = kSchemaVersion;
  std::unique_ptr<LodCache> lod_cache_;  // chunk directories, read once per level
  mutable std::vector<std::string> strings_;
  mutable bool strings_loaded_ = false;
};

}  // namespace tidemark::store
