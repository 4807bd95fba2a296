#include "profiler/store/event_tables.h"

#include <algorithm>
#include <string>

#include "profiler/store/sqlite_db.h"

namespace tidemark::store {

using detail::Db;
using detail::Stmt;

namespace {

std::optional<uint64_t> optional_u64(const Stmt& q, int col) {
  return q.is_null(col) ? std::nullopt : std::optional<uint64_t>(q.u64(col));
}
std::string text_or_empty(const Stmt& q, int col) {
  return q.is_null(col) ? std::string() : q.text(col);
}

}  // namespace

void for_each_step(const TraceReader& reader, const std::function<void(const StepRow&)>& fn) {
  if (!reader.db().table_exists("steps")) return;
  Stmt q(reader.db(),
         "SELECT st.number, st.ts, st.end_ts, st.seq, st.thread, n.text FROM steps st "
         "LEFT JOIN strings n ON n.id = st.name ORDER BY st.ts, st.seq");
  StepRow r;
  while (q.step()) {
    r.number = q.i64(0);
    r.ts = q.u64(1);
    r.end_ts = optional_u64(q, 2);
    r.seq = q.u64(3);
    r.thread = q.u64(4);
    r.name = text_or_empty(q, 5);
    fn(r);
  }
}

namespace {

constexpr const char* kScopeColumns =
    "SELECT s.thread, n.text, p.text, s.depth, s.value, s.push_ts, s.pop_ts FROM scopes s "
    "LEFT JOIN strings n ON n.id = s.name LEFT JOIN strings p ON p.id = s.path ";

ScopeRow scope_row(const Stmt& q) {
  ScopeRow r;
  r.thread = q.u64(0);
  r.name = text_or_empty(q, 1);
  r.path = text_or_empty(q, 2);
  r.depth = q.i64(3);
  r.value = q.i64(4);
  r.push_ts = q.u64(5);
  r.pop_ts = optional_u64(q, 6);
  return r;
}

}  // namespace

void for_each_scope(const TraceReader& reader, const std::function<void(const ScopeRow&)>& fn) {
  if (!reader.db().table_exists("scopes")) return;
  Stmt q(reader.db(),
         (std::string(kScopeColumns) + "ORDER BY s.thread, s.push_ts, s.push_seq").c_str());
  while (q.step()) fn(scope_row(q));
}

std::vector<ScopeRow> scopes_overlapping(const TraceReader& reader, uint64_t from_ts,
                                         uint64_t to_ts) {
  std::vector<ScopeRow> out;
  if (!reader.db().table_exists("scopes")) return out;
  Stmt q(reader.db(), (std::string(kScopeColumns) +
                       "WHERE s.push_ts <= ? AND (s.pop_ts IS NULL OR s.pop_ts >= ?) "
                       "ORDER BY s.push_ts, s.push_seq")
                          .c_str());
  q.bind(1, to_ts).bind(2, from_ts);
  while (q.step()) out.push_back(scope_row(q));
  return out;
}

std::vector<ScopeRow> scopes_named(const TraceReader& reader,
                                   const std::vector<std::string>& names) {
  std::vector<ScopeRow> out;
  if (names.empty() || !reader.db().table_exists("scopes")) return out;
  std::string in = "?1";
  for (size_t i = 1; i < names.size(); ++i) in += ", ?" + std::to_string(i + 1);
  Stmt q(reader.db(), (std::string(kScopeColumns) + "WHERE n.text IN (" + in +
                       ") ORDER BY s.push_ts, s.push_seq")
                          .c_str());
  for (size_t i = 0; i < names.size(); ++i) q.bind(static_cast<int>(i + 1), names[i]);
  while (q.step()) out.push_back(scope_row(q));
  return out;
}

uint64_t sync_count(const TraceReader& reader, int64_t device) {
  if (!reader.db().table_exists("syncs")) return 0;
  Stmt q(reader.db(), "SELECT COUNT(*) FROM syncs WHERE device = ?1");
  q.bind(1, device);
  return q.step() ? q.u64(0) : 0;
}

void for_each_sync(const TraceReader& reader, const std::function<void(const SyncRow&)>& fn,
                   uint64_t from_ts, uint64_t to_ts) {
  if (!reader.db().table_exists("syncs")) return;
  Stmt q(reader.db(),
         "SELECT ts, seq, device, kind, duration_ns, stream, thread, stack FROM syncs "
         "WHERE ts >= ? AND ts <= ? ORDER BY ts, seq");
  q.bind(1, detail::time_bound(from_ts)).bind(2, detail::time_bound(to_ts));
  SyncRow r;
  while (q.step()) {
    r.ts = q.u64(0);
    r.seq = q.u64(1);
    r.device = q.i64(2);
    r.kind = q.text(3);
    r.duration_ns = q.u64(4);
    r.stream = q.u64(5);
    r.thread = q.u64(6);
    r.stack_id = q.u64(7);
    fn(r);
  }
}

void for_each_mark(const TraceReader& reader, const std::function<void(const MarkRow&)>& fn) {
  if (!reader.db().table_exists("marks")) return;
  Stmt q(reader.db(),
         "SELECT m.ts, m.device, n.text, m.value, m.thread FROM marks m "
         "LEFT JOIN strings n ON n.id = m.name ORDER BY m.ts, m.seq");
  MarkRow r;
  while (q.step()) {
    r.ts = q.u64(0);
    r.device = q.i64(1);
    r.name = text_or_empty(q, 2);
    r.value = q.u64(3);
    r.thread = q.u64(4);
    fn(r);
  }
}

void for_each_memcpy(const TraceReader& reader, const std::function<void(const MemcpyRow&)>& fn) {
  if (!reader.db().table_exists("memcpys")) return;
  Stmt q(reader.db(),
         "SELECT ts, device, direction, bytes, stream, pinned, async, thread FROM memcpys "
         "ORDER BY ts, seq");
  MemcpyRow r;
  while (q.step()) {
    r.ts = q.u64(0);
    r.device = q.i64(1);
    r.direction = q.text(2);
    r.bytes = q.u64(3);
    r.stream = q.u64(4);
    r.pinned = q.i64(5) != 0;
    r.async = q.i64(6) != 0;
    r.thread = q.u64(7);
    fn(r);
  }
}

namespace {

constexpr const char* kAllocatorEventColumns =
    "SELECT ts, seq, device, kind, requested_size, stream, device_free, device_total, "
    "allocated, reserved, released, thread, stack FROM allocator_events ";

AllocatorEventRow allocator_event_row(const Stmt& q) {
  AllocatorEventRow r;
  r.ts = q.u64(0);
  r.seq = q.u64(1);
  r.device = q.i64(2);
  r.kind = q.text(3);
  r.requested_size = q.u64(4);
  r.stream = q.u64(5);
  r.device_free = q.u64(6);
  r.device_total = q.u64(7);
  r.allocated = q.u64(8);
  r.reserved = q.u64(9);
  r.released = q.u64(10);
  r.thread = q.u64(11);
  r.stack_id = q.u64(12);
  return r;
}

}  // namespace

void for_each_allocator_event(const TraceReader& reader,
                              const std::function<void(const AllocatorEventRow&)>& fn) {
  if (!reader.db().table_exists("allocator_events")) return;
  Stmt q(reader.db(), (std::string(kAllocatorEventColumns) + "ORDER BY ts, seq").c_str());
  while (q.step()) fn(allocator_event_row(q));
}

std::vector<AllocatorEventRow> allocator_events(const TraceReader& reader, std::string_view kind,
                                                std::optional<int64_t> device) {
  std::vector<AllocatorEventRow> out;
  if (!reader.db().table_exists("allocator_events")) return out;
  Stmt q(reader.db(), (std::string(kAllocatorEventColumns) +
                       "WHERE kind = ?1 AND (?2 IS NULL OR device = ?2) ORDER BY ts, seq")
                          .c_str());
  q.bind(1, kind).bind(2, device);
  while (q.step()) out.push_back(allocator_event_row(q));
  return out;
}

struct WindowTotals::Queries {
  explicit Queries(Db& db)
      : allocations(db,
                    "SELECT COUNT(*), TOTAL(size) FROM allocations WHERE device = ? AND "
                    "alloc_ts >= ? AND alloc_ts < ?"),
        // thread | rank << kMergedRankShift (Note [Merged devices])
        syncs(db, ("SELECT COUNT(*), TOTAL(duration_ns) FROM syncs WHERE ts >= ?1 AND ts < ?2 "
                   "AND (?3 IS NULL OR (thread >> " +
                   std::to_string(kMergedRankShift) + ") = ?3)")
                      .c_str()) {}
  Stmt allocations, syncs;
};

WindowTotals::WindowTotals(const TraceReader& reader)
    : q_(std::make_unique<Queries>(reader.db())) {}
WindowTotals::~WindowTotals() = default;

namespace {
WindowTotals::Total total_of(Stmt& q) {
  WindowTotals::Total t;
  if (q.step()) {
    t.count = q.u64(0);
    t.sum = static_cast<uint64_t>(q.f64(1));  // TOTAL: a float, 0.0 for no rows
  }
  return t;
}
}  // namespace

WindowTotals::Total WindowTotals::allocations(int64_t device, uint64_t t0, uint64_t t1) {
  Stmt& q = q_->allocations;
  q.reset();
  q.bind(1, device).bind(2, t0).bind(3, t1);
  return total_of(q);
}

WindowTotals::Total WindowTotals::syncs(uint64_t t0, uint64_t t1, std::optional<int64_t> rank) {
  Stmt& q = q_->syncs;
  q.reset();
  q.bind(1, t0).bind(2, t1).bind(3, rank);
  return total_of(q);
}

std::vector<uint64_t> threads(const TraceReader& reader) {
  std::vector<uint64_t> out;
  Stmt q(reader.db(), "SELECT thread FROM event_blocks UNION SELECT thread FROM scopes ORDER BY 1");
  while (q.step()) out.push_back(q.u64(0));
  return out;
}

}  // namespace tidemark::store
