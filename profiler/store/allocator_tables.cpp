#include "profiler/store/allocator_tables.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "profiler/store/sqlite_db.h"

namespace tidemark::store {

std::vector<SegmentRow> segments_at(const TraceReader& reader, int64_t device, uint64_t ts,
                                    std::optional<events::Pool> pool) {
  if (!reader.db().table_exists("segments")) return {};
  std::string where = "WHERE device = ?1 AND alloc_ts <= ?2 AND (free_ts IS NULL OR free_ts > ?2)";
  if (pool) where += std::string(" AND pool = '") + pool_name(*pool) + "'";
  return reader.segments_where(where + " ORDER BY addr", {device, detail::time_bound(ts)});
}

std::vector<AllocationRow> blocks_active_at(const TraceReader& reader, int64_t device,
                                            uint64_t ts) {
  return reader.allocations_where(
      "WHERE device = ?1 AND alloc_ts <= ?2 AND (free_completed_ts IS NULL OR "
      "free_completed_ts > ?2) ORDER BY addr",
      {device, detail::time_bound(ts)});
}

namespace {

using detail::Stmt;
using detail::Where;

std::string quoted(events::Category c) {
  return "'" + std::string(events::category_name(c)) + "'";
}

Where where_of(const AllocationFilter& f) {
  Where w;
  if (f.device) w.add("device = #", *f.device);
  if (f.addr) w.add("addr = #", static_cast<int64_t>(*f.addr));
  if (f.alloc_ts) w.add("alloc_ts = #", static_cast<int64_t>(*f.alloc_ts));
  if (f.category) w.add("category = " + quoted(*f.category));
  if (f.categorized) w.add("category <> 'unknown'");
  if (!f.not_categories.empty()) {
    std::string list;
    for (events::Category c : f.not_categories) list += (list.empty() ? "" : ", ") + quoted(c);
    w.add("category NOT IN (" + list + ")");
  }
  if (f.with_stack) w.add("stack <> 0");
  if (f.never_freed) w.add("free_requested_ts IS NULL");
  if (f.live_at)
    w.add("alloc_ts <= # AND (free_requested_ts IS NULL OR free_requested_ts > #)",
          detail::time_bound(*f.live_at));
  if (f.live_in) {
    w.add("alloc_ts < #", detail::time_bound(f.live_in->second));
    w.add("(free_requested_ts IS NULL OR free_requested_ts > #)",
          detail::time_bound(f.live_in->first));
  }
  if (f.free_completed) w.add("free_completed_ts IS NOT NULL");
  if (f.seq) w.add("seq = #", static_cast<int64_t>(*f.seq));
  if (f.after_seq) w.add("seq > #", static_cast<int64_t>(*f.after_seq));
  return w;
}

Where where_of(const SegmentFilter& f) {
  Where w;
  if (f.device) w.add("device = #", *f.device);
  if (f.freed) w.add("free_ts IS NOT NULL");
  if (f.mapped_only) w.add("kind = 'mapped'");
  return w;
}

const char* order_by(AllocationOrder order) {
  switch (order) {
    case AllocationOrder::seq:
      return " ORDER BY seq";
    case AllocationOrder::alloc_ts_then_seq:
      return " ORDER BY alloc_ts, seq";
    case AllocationOrder::none:
      break;
  }
  return "";
}

constexpr const char* kSpanColumns =
    "SELECT seq, alloc_ts, free_requested_ts, free_completed_ts, size, stack, category, thread, "
    "requested_size FROM allocations";

AllocationSpan span_of(const Stmt& q, const TraceReader& reader) {
  AllocationSpan s;
  s.seq = q.u64(0);
  s.alloc_ts = q.u64(1);
  if (!q.is_null(2)) s.free_requested_ts = q.u64(2);
  if (!q.is_null(3)) s.free_completed_ts = q.u64(3);
  s.size = checked_size(q.u64(4), "an allocation's size", reader.path());
  s.stack_id = q.is_null(5) ? 0 : q.u64(5);
  s.category = category_named(q.text(6));
  s.thread = q.u64(7);
  s.requested_size = q.u64(8);
  return s;
}

}  // namespace

bool any_allocation(const TraceReader& reader, const AllocationFilter& filter) {
  Stmt q = where_of(filter).prepare(reader.db(), "SELECT 1 FROM allocations", " LIMIT 1");
  return q.step();
}

uint64_t allocation_count(const TraceReader& reader, const AllocationFilter& filter) {
  Stmt q = where_of(filter).prepare(reader.db(), "SELECT COUNT(*) FROM allocations");
  return q.step() ? q.u64(0) : 0;
}

RowTotals allocation_totals(const TraceReader& reader, const AllocationFilter& filter) {
  Stmt q = where_of(filter).prepare(reader.db(), "SELECT COUNT(*), TOTAL(size) FROM allocations");
  if (!q.step()) return {};
  return {q.u64(0), static_cast<int64_t>(q.f64(1))};
}

uint64_t allocation_streams(const TraceReader& reader, int64_t device) {
  Stmt q(reader.db(), "SELECT COUNT(DISTINCT stream) FROM allocations WHERE device = ?1");
  q.bind(1, device);
  return q.step() ? q.u64(0) : 0;
}

std::optional<std::pair<uint64_t, uint64_t>> allocation_time_range(const TraceReader& reader,
                                                                   int64_t device) {
  // Two subqueries: each is one lookup in allocations_by_alloc_ts.
  Stmt q(reader.db(),
         "SELECT (SELECT min(alloc_ts) FROM allocations WHERE device = ?1), "
         "(SELECT max(alloc_ts) FROM allocations WHERE device = ?1)");
  q.bind(1, device);
  if (!q.step() || q.is_null(0)) return std::nullopt;
  return std::pair{q.u64(0), q.u64(1)};
}

AllocationCursor::AllocationCursor(const TraceReader& reader, const AllocationFilter& filter,
                                   AllocationOrder order)
    : reader_(reader),
      q_(std::make_unique<Stmt>(
          where_of(filter).prepare(reader.db(), kSpanColumns, order_by(order)))) {}

AllocationCursor::~AllocationCursor() = default;

std::optional<AllocationSpan> AllocationCursor::next() {
  if (done_ || !q_->step()) {
    done_ = true;  // a finished statement stepped again would start over
    return std::nullopt;
  }
  return span_of(*q_, reader_);
}

void for_each_allocation(const TraceReader& reader, const AllocationFilter& filter,
                         AllocationOrder order,
                         const std::function<void(const AllocationSpan&)>& fn) {
  Stmt q = where_of(filter).prepare(reader.db(), kSpanColumns, order_by(order));
  while (q.step()) fn(span_of(q, reader));
}

std::optional<AllocationSpan> first_allocation(const TraceReader& reader,
                                               const AllocationFilter& filter,
                                               AllocationOrder order) {
  Stmt q = where_of(filter).prepare(reader.db(), kSpanColumns,
                                    std::string(order_by(order)) + " LIMIT 1");
  if (!q.step()) return std::nullopt;
  return span_of(q, reader);
}

std::vector<AllocationRow> allocation_rows(const TraceReader& reader,
                                           const AllocationFilter& filter, AllocationOrder order) {
  const Where w = where_of(filter);
  return reader.allocations_where(w.sql + order_by(order), w.params);
}

void for_each_allocation_row(const TraceReader& reader, const AllocationFilter& filter,
                             AllocationOrder order,
                             const std::function<void(const AllocationRow&)>& fn) {
  const Where w = where_of(filter);
  reader.for_each_allocation_where(w.sql + order_by(order), w.params, fn);
}

std::optional<AllocationRow> allocation_holding(const TraceReader& reader, int64_t device,
                                                uint64_t addr, uint64_t ts) {
  std::vector<AllocationRow> rows = reader.allocations_where(
      "WHERE device = ?1 AND addr <= ?2 AND addr + size > ?2 AND alloc_ts <= ?3 AND "
      "(free_requested_ts IS NULL OR free_requested_ts >= ?3) ORDER BY alloc_ts DESC LIMIT 1",
      {device, static_cast<int64_t>(addr), static_cast<int64_t>(ts)});
  if (rows.empty()) return std::nullopt;
  return std::move(rows.front());
}

namespace {

// The rows of `device` whose end (`end_column`, NULL: none yet) is after `ts` and that began
// at or before it: by `seq` when given, the time bounding the scan.
Where live_where(const char* end_column, int64_t device, uint64_t ts, std::optional<uint64_t> seq) {
  Where w;
  w.add("device = #", device);
  w.add(std::string("(") + end_column + " IS NULL OR " + end_column + " > #)",
        static_cast<int64_t>(ts));
  if (seq) {
    w.add("alloc_ts <= ?2 + 1000000");
    w.add("seq <= #", static_cast<int64_t>(*seq));
  } else {
    w.add("alloc_ts <= ?2");
  }
  return w;
}

}  // namespace

std::vector<AllocationRow> allocated_at(const TraceReader& reader, int64_t device, uint64_t ts,
                                        std::optional<uint64_t> seq) {
  const Where w = live_where("free_requested_ts", device, ts, seq);
  return reader.allocations_where(w.sql + " ORDER BY seq", w.params);
}

std::vector<SegmentRow> reserved_at(const TraceReader& reader, int64_t device, uint64_t ts,
                                    std::optional<uint64_t> seq) {
  const Where w = live_where("free_ts", device, ts, seq);
  return reader.segments_where(w.sql + " ORDER BY seq", w.params);
}

bool any_segment(const TraceReader& reader, const SegmentFilter& filter) {
  if (!reader.db().table_exists("segments")) return false;
  Stmt q = where_of(filter).prepare(reader.db(), "SELECT 1 FROM segments", " LIMIT 1");
  return q.step();
}

uint64_t segment_count(const TraceReader& reader, const SegmentFilter& filter) {
  if (!reader.db().table_exists("segments")) return 0;
  Stmt q = where_of(filter).prepare(reader.db(), "SELECT COUNT(*) FROM segments");
  return q.step() ? q.u64(0) : 0;
}

RowTotals segment_totals(const TraceReader& reader, const SegmentFilter& filter) {
  if (!reader.db().table_exists("segments")) return {};
  Stmt q = where_of(filter).prepare(reader.db(), "SELECT COUNT(*), TOTAL(size) FROM segments");
  if (!q.step()) return {};
  return {q.u64(0), static_cast<int64_t>(q.f64(1))};
}

uint64_t segment_reservations(const TraceReader& reader, const SegmentFilter& filter) {
  if (!reader.db().table_exists("segments")) return 0;
  Stmt q = where_of(filter).prepare(reader.db(), "SELECT COUNT(DISTINCT seq) FROM segments");
  return q.step() ? q.u64(0) : 0;
}

std::vector<SegmentRow> segments_matching(const TraceReader& reader, const SegmentFilter& filter) {
  if (!reader.db().table_exists("segments")) return {};
  const Where w = where_of(filter);
  return reader.segments_where(w.sql + " ORDER BY seq, addr", w.params);
}

}  // namespace tidemark::store
