#include "profiler/analysis/allocator_state.h"

#include "profiler/store/sqlite_db.h"

namespace tidemark::analysis {

using store::detail::Stmt;

uint64_t SegmentState::allocated_bytes() const {
  uint64_t n = 0;
  for (const BlockState& b : blocks)
    if (!b.pending_free) n += b.size;
  return n;
}

uint64_t SegmentState::pending_bytes() const {
  uint64_t n = 0;
  for (const BlockState& b : blocks)
    if (b.pending_free) n += b.size;
  return n;
}

AllocatorState allocator_state(const Trace& trace, int64_t device, uint64_t ts) {
  AllocatorState st;
  st.ts = ts;
  st.time_ns = ts >= trace.origin_ns() ? ts - trace.origin_ns() : 0;
  if (const DeviceRef* d = trace.device_by_id(device)) st.device = d->name;
  st.device_id = device;
  if (!trace.db().table_exists("segments")) return st;
  Stmt q(trace.db(),
         "SELECT addr, size, pool, kind, stream FROM segments WHERE device = ? AND "
         "alloc_ts <= ? AND (free_ts IS NULL OR free_ts > ?) ORDER BY addr");
  q.bind(1, device).bind(2, ts).bind(3, ts);
  while (q.step()) {
    SegmentState s;
    s.addr = q.u64(0);
    s.size = q.u64(1);
    s.pool = q.text(2);
    s.kind = q.text(3);
    s.stream = q.is_null(4) ? 0 : q.u64(4);
    st.segments.push_back(std::move(s));
  }
  std::vector<store::AllocationRow> rows = trace.reader().allocations_where(
      "WHERE device = ?1 AND alloc_ts <= ?2 AND (free_completed_ts IS NULL OR "
      "free_completed_ts > ?2) ORDER BY addr",
      {device, static_cast<int64_t>(ts)});
  size_t seg = 0;
  for (const store::AllocationRow& a : rows) {
    while (seg < st.segments.size() && st.segments[seg].addr + st.segments[seg].size <= a.addr)
      ++seg;
    if (seg == st.segments.size()) break;
    if (a.addr < st.segments[seg].addr) continue;  // outside any segment (lost events)
    BlockState b;
    b.addr = a.addr;
    b.size = a.size;
    b.requested = a.requested_size;
    b.alloc_ts = a.alloc_ts;
    b.seq = a.seq;
    b.stream = a.stream;
    b.stack_id = a.stack_id;
    b.pending_free = a.free_requested_ts && *a.free_requested_ts <= ts;
    b.site = trace.site(a.stack_id).label;
    b.category = std::string(events::category_name(a.category));
    b.scope = a.scope;
    st.segments[seg].blocks.push_back(std::move(b));
  }
  return st;
}

}  // namespace tidemark::analysis
