#include "profiler/analysis/allocator_state.h"

#include "profiler/store/allocator_tables.h"

namespace tidemark::analysis {

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
  const store::TraceReader& reader = trace.reader();
  for (const store::SegmentRow& r : store::segments_at(reader, device, ts)) {
    SegmentState s;
    s.addr = r.addr;
    s.size = r.size;
    s.pool = store::pool_name(r.pool);
    s.kind = r.mapped ? "mapped" : "segment";
    s.stream = r.stream;
    st.segments.push_back(std::move(s));
  }
  const std::vector<store::AllocationRow> rows = store::blocks_active_at(reader, device, ts);
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
