#include "gui/core/trace_data.h"

#include <algorithm>
#include <map>

#include "profiler/analysis/sql.h"

namespace tidemark::gui {

namespace {

using analysis::Trace;
using store::AllocationRow;

// Groups by the site key as analysis::group_allocations does, keeping the span of times the
// group's allocations cover: [first alloc, last free_requested] (the end when not freed).
std::map<std::string, std::pair<uint64_t, uint64_t>> spans_by_site(
    const Trace& trace, const std::vector<AllocationRow>& rows, uint64_t end_ts) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> spans;
  for (const AllocationRow& a : rows) {
    const uint64_t until = a.free_requested_ts.value_or(end_ts);
    auto [it, fresh] = spans.try_emplace(trace.site(a.stack_id).key, a.alloc_ts, until);
    if (!fresh) {
      it->second.first = std::min(it->second.first, a.alloc_ts);
      it->second.second = std::max(it->second.second, until);
    }
  }
  return spans;
}

std::vector<SiteRow> site_rows(const Trace& trace, const analysis::DeviceRef& device,
                               const std::vector<analysis::Group>& groups,
                               const std::vector<AllocationRow>& rows, uint64_t end_ts) {
  const auto spans = spans_by_site(trace, rows, end_ts);
  std::map<std::string, const AllocationRow*> largest;
  for (const AllocationRow& a : rows) {
    const AllocationRow*& l = largest[trace.site(a.stack_id).key];
    if (!l || a.size > l->size) l = &a;
  }
  std::vector<SiteRow> out;
  for (const analysis::Group& g : groups) {
    SiteRow r{device.name, g.label, g.bytes, g.requested_bytes, g.count, 0, end_ts};
    r.device_id = device.id;
    if (auto it = spans.find(g.key); it != spans.end())
      std::tie(r.first_ts, r.last_ts) = it->second;
    if (auto it = largest.find(g.key); it != largest.end()) {
      r.largest_addr = it->second->addr;
      r.largest_alloc_ts = it->second->alloc_ts;
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

std::vector<SyncEvent> sync_events(const Trace& trace) {
  std::vector<SyncEvent> out;
  if (!trace.db().table_exists("syncs")) return out;
  analysis::detail::Query q(trace.db(),
                            "SELECT ts, duration_ns, kind, stack FROM syncs ORDER BY ts, seq");
  while (q.step()) {
    SyncEvent e;
    e.ts = q.u64(0);
    e.duration_ns = q.is_null(1) ? 0 : q.u64(1);
    e.kind = q.text(2);
    e.stack_id = q.is_null(3) ? 0 : q.u64(3);
    out.push_back(std::move(e));
  }
  for (SyncEvent& e : out) e.site = trace.site(e.stack_id).label;
  return out;
}

std::shared_ptr<TraceData> open_trace_data(const std::string& path) {
  auto data = std::make_shared<TraceData>();
  data->path = path;
  data->session = std::make_shared<TraceSession>(Trace::open(path));
  data->session->with([&](const Trace& trace) {
    data->origin_ns = trace.origin_ns();
    data->end_ns = trace.end_ns();
    data->devices = trace.devices();
    for (const analysis::DeviceRef& d : data->devices)
      data->peaks.push_back(analysis::peak(trace, d.id));
  });
  return data;
}

void compute_tables(TraceData& data, const Trace& trace,
                    const std::function<void(int, const std::string&)>& progress) {
  auto report = [&](int percent, const char* what) {
    if (progress) progress(percent, what);
  };
  report(10, "summarizing");
  data.summary = analysis::summarize(trace);
  for (const analysis::DeviceRef& d : data.devices)
    data.device_summaries.push_back(analysis::summarize_device(trace, d));
  report(30, "live at the peak");
  for (const analysis::DeviceRef& d : data.devices) {
    std::optional<analysis::TimePoint> at = analysis::peak_point(trace, d.id);
    if (!at) continue;
    std::vector<AllocationRow> rows = analysis::live_allocations(trace, d.id, *at);
    auto groups = analysis::group_allocations(trace, rows, analysis::GroupBy::site, 0);
    auto site = site_rows(trace, d, groups, rows, data.end_ns);
    data.live_at_peak.insert(data.live_at_peak.end(), site.begin(), site.end());
  }
  report(45, "leaks");
  for (const analysis::DeviceRef& d : data.devices) {
    analysis::LeakReport lr = analysis::leaks(trace, d.id, analysis::GroupBy::site, 0);
    std::vector<AllocationRow> rows = trace.reader().allocations_where(
        "WHERE free_requested_ts IS NULL AND device = ?1 ORDER BY seq", {d.id});
    auto site = site_rows(trace, d, lr.groups, rows, data.end_ns);
    data.leaks.insert(data.leaks.end(), site.begin(), site.end());
  }
  report(55, "syncs");
  data.sync_events = sync_events(trace);
  analysis::SyncReport sr = analysis::syncs(trace, 0);
  std::map<std::string, std::pair<uint64_t, uint64_t>> sync_span;
  for (const SyncEvent& e : data.sync_events) {
    auto [it, fresh] = sync_span.try_emplace(e.site, e.ts, e.ts);
    if (!fresh) it->second.second = e.ts;
  }
  for (const analysis::SyncSite& s : sr.sites) {
    SyncSiteRow r{s, 0, 0};
    if (auto it = sync_span.find(s.label); it != sync_span.end())
      std::tie(r.first_ts, r.last_ts) = it->second;
    data.sync_sites.push_back(std::move(r));
  }
  report(65, "steps");
  for (const analysis::DeviceRef& d : data.devices)
    for (const analysis::StepStats& s : analysis::step_stats(trace, d.id))
      data.step_rows.push_back({d.name, s});
  for (const StepRow& s : data.step_rows)
    if (s.device == data.devices.front().name)
      data.steps.emplace_back(s.stats.number, data.origin_ns + s.stats.start_ns);
  report(70, "scopes");
  data.scopes = analysis::scopes(trace, data.origin_ns, data.end_ns);
  data.scope_depth = 0;
  for (const analysis::ScopeSpan& s : data.scopes)
    data.scope_depth = std::max(data.scope_depth, s.depth + 1);
  data.stage = Stage::tables;
}

void compute_findings(TraceData& data, const Trace& trace) {
  data.diagnosis = analysis::diagnose(trace);
  data.stage = Stage::complete;
}

std::shared_ptr<const TraceData> load_trace_data(
    const std::string& path, const std::function<void(int, const std::string&)>& progress) {
  if (progress) progress(0, "opening");
  std::shared_ptr<TraceData> data = open_trace_data(path);
  data->session->with([&](const Trace& trace) {
    compute_tables(*data, trace, progress);
    if (progress) progress(75, "diagnosing");
    compute_findings(*data, trace);
  });
  if (progress) progress(100, "done");
  return data;
}

std::optional<analysis::AllocationDetails> find_allocation_details(const Trace& trace,
                                                                   int64_t device, uint64_t addr,
                                                                   uint64_t alloc_ts) {
  std::vector<AllocationRow> rows = trace.reader().allocations_where(
      "WHERE device = ?1 AND addr = ?2 AND alloc_ts = ?3 ORDER BY seq",
      {device, static_cast<int64_t>(addr), static_cast<int64_t>(alloc_ts)});
  if (rows.empty()) return std::nullopt;
  return analysis::allocation_details(trace, rows.front());
}

AllocatorState allocator_state(const Trace& trace, int64_t device, uint64_t ts) {
  AllocatorState st;
  st.ts = ts;
  st.time_ns = ts >= trace.origin_ns() ? ts - trace.origin_ns() : 0;
  if (const analysis::DeviceRef* d = trace.device_by_id(device)) st.device = d->name;
  st.device_id = device;
  // Segments (or mapped ranges) reserved at ts. Not exposed by profiler/analysis yet: read
  // through its SQL helper (docs/gui.md lists the query the library should own).
  if (!trace.db().table_exists("segments")) return st;
  analysis::detail::Query q(trace.db(),
                            "SELECT addr, size, pool FROM segments WHERE device = ? AND "
                            "alloc_ts <= ? AND (free_ts IS NULL OR free_ts > ?) ORDER BY addr");
  q.bind(1, device).bind(2, ts).bind(3, ts);
  while (q.step()) st.segments.push_back({q.u64(0), q.u64(1), q.text(2), {}});
  // Blocks carved from them: alloc'ed at or before ts, not yet reusable (free_completed).
  std::vector<AllocationRow> rows = trace.reader().allocations_where(
      "WHERE device = ?1 AND alloc_ts <= ?2 AND (free_completed_ts IS NULL OR "
      "free_completed_ts > ?2) ORDER BY addr",
      {device, static_cast<int64_t>(ts)});
  size_t seg = 0;
  for (const AllocationRow& a : rows) {
    while (seg < st.segments.size() && st.segments[seg].addr + st.segments[seg].size <= a.addr)
      ++seg;
    if (seg == st.segments.size()) break;
    if (a.addr < st.segments[seg].addr) continue;  // outside any segment (lost events)
    BlockState b;
    b.addr = a.addr;
    b.size = a.size;
    b.requested = a.requested_size;
    b.alloc_ts = a.alloc_ts;
    b.pending_free = a.free_requested_ts && *a.free_requested_ts <= ts;
    b.site = trace.site(a.stack_id).label;
    b.category = std::string(events::category_name(a.category));
    b.scope = a.scope;
    st.segments[seg].blocks.push_back(std::move(b));
  }
  return st;
}

}  // namespace tidemark::gui
