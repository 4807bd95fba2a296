#include "gui/models/trace_data.h"

#include <algorithm>
#include <map>

#include "profiler/importers/temporary_import.h"
#include "profiler/store/allocator_tables.h"

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

namespace {
std::string g_category_rules_file;  // set_category_rules_file
}  // namespace

void set_category_rules_file(std::string file) {
  g_category_rules_file = std::move(file);
}

analysis::Trace open_own_trace(const TraceData& data) {
  analysis::Trace trace = Trace::open(data.path);
  if (!data.source.empty()) trace.set_shown_path(data.source);
  trace.set_frames(data.frames);
  trace.set_category_rules(data.category_rules);
  return trace;
}

std::shared_ptr<TraceData> open_trace_data(const std::string& given) {
  auto data = std::make_shared<TraceData>();
  std::string path = given;
  if (importers::starts_as_pickle(given)) {  // Note [Snapshots as traces]
    path = importers::imported_trace(given);
    data->source = given;
  }
  data->path = path;
  data->session = std::make_shared<TraceSession>(Trace::open(path));
  data->category_rules = analysis::CategoryRules::find(given, g_category_rules_file);
  data->session->with_mutable([&](Trace& trace) {
    if (!data->source.empty()) trace.set_shown_path(data->source);
    trace.set_category_rules(data->category_rules);
  });
  data->session->with([&](const Trace& trace) {
    data->origin_ns = trace.origin_ns();
    data->synthetic_times = trace.synthetic_times();
    data->imported = trace.imported_snapshot();
    data->end_ns = trace.end_ns();
    data->devices = trace.devices();
    for (const analysis::DeviceRef& d : data->devices)
      data->peaks.push_back(analysis::peak(trace, d.id));
    data->steps = analysis::step_starts(trace);  // read once: zoom queries ask for curves only
    for (const analysis::DeviceRef& d : data->devices)
      if (d.rank && !data->rank_steps.count(*d.rank)) {
        auto& own = data->rank_steps[*d.rank];
        for (const analysis::StepSpan& s : analysis::steps_of(trace, d.id))
          own.emplace_back(s.number, s.ts);
      }
    data->categories_inferred = trace.categories_inferred();
    data->steps_inferred = analysis::steps_inferred_from(trace).value_or("");
  });
  return data;
}

namespace {
// The snapshot of what the live trace read so far: its devices, times and peaks.
void fill_from_live(TraceData& data, const analysis::LiveTrace& live) {
  data.origin_ns = live.origin_ns();
  data.end_ns = live.end_ns();
  data.devices.clear();
  data.peaks.clear();
  data.live_growth.clear();
  data.live_growth_reserved.clear();
  // Every step but the last has ended (the next one began).
  const size_t ended = live.steps().empty() ? 0 : live.steps().size() - 1;
  for (size_t i = 0; i < live.devices().size(); ++i) {
    data.devices.push_back({int64_t(i), live.devices()[i], live.devices()[i], 0});
    data.peaks.push_back(live.peak(i));
    const bool segments_only = !live.has_blocks(i);
    data.live_growth.push_back(live.step_growth(i, ended, 10, segments_only));
    data.live_growth_reserved.push_back(segments_only);
  }
  data.steps.clear();
  data.steps.reserve(live.steps().size());
  for (const analysis::LiveTrace::Step& s : live.steps()) data.steps.emplace_back(s.number, s.ts);
}
}  // namespace

std::shared_ptr<const TraceData> follow_trace_data(const std::string& path) {
  auto data = std::make_shared<TraceData>();
  data->path = path;
  data->live = std::make_shared<LiveSession>(path);
  const bool finalized = data->live->with_mutable([&](analysis::LiveTrace& live) {
    if (live.finalized()) return true;  // nothing to follow: not worth reading every block
    live.poll();
    fill_from_live(*data, live);
    return false;
  });
  return finalized ? nullptr : data;
}

std::shared_ptr<const TraceData> poll_trace_data(const TraceData& previous) {
  std::shared_ptr<TraceData> next;
  previous.live->with_mutable([&](analysis::LiveTrace& live) {
    if (live.poll() == 0) return;
    next = std::make_shared<TraceData>(previous);
    fill_from_live(*next, live);
  });
  return next;
}

void compute_tables(TraceData& data, const Trace& trace,
                    const std::function<void(int, const std::string&)>& progress) {
  auto report = [&](int percent, const char* what) {
    if (progress) progress(percent, what);
  };
  // What a run under another rule filled is replaced (TraceLoader::reload).
  data.frames = trace.frames_mode();
  data.live_at_peak.clear();
  data.leaks.clear();
  data.sync_sites.clear();
  data.step_rows.clear();
  report(10, "summarizing");
  data.summary = analysis::summarize(trace);
  report(30, "live at the peak");
  auto flame = [&](const std::vector<AllocationRow>& rows) {
    return analysis::flame_tree(
        analysis::group_allocations(trace, rows, analysis::GroupBy::stack, 0), &trace, data.frames);
  };
  data.flame_peak.assign(data.devices.size(), {});
  data.flame_leaks.assign(data.devices.size(), {});
  data.flame_reserved.assign(data.devices.size(), {});
  for (size_t i = 0; i < data.devices.size(); ++i)
    if (auto r = analysis::reserved_at_peak(trace, data.devices[i].id, 0, analysis::GroupBy::stack))
      data.flame_reserved[i] = analysis::flame_tree(r->groups, &trace, data.frames);
  for (size_t i = 0; i < data.devices.size(); ++i) {
    const analysis::DeviceRef& d = data.devices[i];
    if (i >= data.peaks.size() || !data.peaks[i]) continue;
    const analysis::TimePoint at{data.peaks[i]->ts_ns, data.peaks[i]->seq};
    std::vector<AllocationRow> rows = analysis::live_allocations(trace, d.id, at);
    auto groups = analysis::group_allocations(trace, rows, analysis::GroupBy::site, 0);
    auto site = site_rows(trace, d, groups, rows, data.end_ns);
    data.live_at_peak.insert(data.live_at_peak.end(), site.begin(), site.end());
    data.flame_peak[i] = flame(rows);
  }
  report(45, "leaks");
  for (size_t i = 0; i < data.devices.size(); ++i) {
    const analysis::DeviceRef& d = data.devices[i];
    std::vector<AllocationRow> rows = store::allocation_rows(
        trace.reader(), {.device = d.id, .never_freed = true}, store::AllocationOrder::seq);
    auto groups = analysis::group_allocations(trace, rows, analysis::GroupBy::site, 0);
    auto site = site_rows(trace, d, groups, rows, data.end_ns);
    data.leaks.insert(data.leaks.end(), site.begin(), site.end());
    data.flame_leaks[i] = flame(rows);
  }
  report(55, "syncs");
  data.sync_events = analysis::sync_events(trace, 0, UINT64_MAX);
  analysis::SyncReport sr = analysis::syncs(trace, 0);
  std::map<std::string, std::pair<uint64_t, uint64_t>> sync_span;
  for (const SyncEvent& e : data.sync_events) {
    auto [it, fresh] = sync_span.try_emplace(e.site_key, e.ts, e.ts);
    if (!fresh) it->second.second = e.ts;
  }
  for (const analysis::SyncSite& s : sr.sites) {
    SyncSiteRow r{s, 0, 0};
    if (auto it = sync_span.find(s.key); it != sync_span.end())
      std::tie(r.first_ts, r.last_ts) = it->second;
    data.sync_sites.push_back(std::move(r));
  }
  report(65, "steps");
  for (const analysis::DeviceRef& d : data.devices)
    for (const analysis::StepStats& s : analysis::step_stats(trace, d.id))
      data.step_rows.push_back({d.name, s});
  report(70, "scopes");
  data.scopes = analysis::scopes(trace, data.origin_ns, data.end_ns);
  data.scope_depth = 0;
  for (const analysis::ScopeSpan& s : data.scopes)
    data.scope_depth = std::max(data.scope_depth, s.depth + 1);
  data.stage = Stage::tables;
}

void compute_findings(TraceData& data, const Trace& trace) {
  data.diagnosis = diagnose::diagnose(trace);
  data.stage = Stage::complete;
}

std::shared_ptr<const TraceData> load_trace_data(
    const std::string& path, const std::function<void(int, const std::string&)>& progress,
    analysis::Frames frames) {
  if (progress) progress(0, "opening");
  std::shared_ptr<TraceData> data = open_trace_data(path);
  with_frames(*data->session, frames, [&](const Trace& trace) {
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
  std::vector<AllocationRow> rows =
      store::allocation_rows(trace.reader(), {.device = device, .addr = addr, .alloc_ts = alloc_ts},
                             store::AllocationOrder::seq);
  if (rows.empty()) return std::nullopt;
  return analysis::allocation_details(trace, rows.front());
}

std::vector<SiteRow> live_in_selection(const Trace& trace, uint64_t from, uint64_t to) {
  std::vector<SiteRow> out;
  for (const analysis::DeviceRef& d : trace.devices()) {
    std::vector<AllocationRow> rows = analysis::live_in_range(trace, d.id, from, to);
    auto groups = analysis::group_allocations(trace, rows, analysis::GroupBy::site, 0);
    auto site = site_rows(trace, d, groups, rows, trace.end_ns());
    out.insert(out.end(), site.begin(), site.end());
  }
  return out;
}

StateAtTime state_at(const Trace& trace, int64_t device, uint64_t ts) {
  StateAtTime s;
  s.allocator = analysis::allocator_state(trace, device, ts);
  for (analysis::TensorRecord& t : analysis::tensors_live_at(trace, ts)) {
    if (t.device != device) continue;
    TensorRow r{std::move(t), {}, 0, ts};
    r.site = trace.site(r.info.stack_id).label;
    r.created_ns = r.info.create_ts >= trace.origin_ns() ? r.info.create_ts - trace.origin_ns() : 0;
    s.tensors.push_back(std::move(r));
  }
  s.flame = analysis::flame_tree(
      analysis::group_allocations(trace, analysis::live_allocations(trace, device, {ts, {}}),
                                  analysis::GroupBy::stack, 0),
      &trace, trace.frames_mode());
  return s;
}

std::vector<DiffRow> diff_rows(const analysis::TraceDiff& diff) {
  std::vector<DiffRow> rows;
  for (const analysis::DeviceDiff& d : diff.devices) {
    auto value = [](const std::optional<analysis::DeviceSummary>& s, auto member) {
      return s ? (*s).*member : int64_t{0};
    };
    using S = analysis::DeviceSummary;
    const std::pair<const char*, int64_t S::*> values[] = {
        {"peak allocated", &S::peak_allocated_bytes},
        {"peak reserved", &S::peak_reserved_bytes},
        {"final allocated", &S::final_allocated_bytes}};
    for (const auto& [what, member] : values)
      rows.push_back({what, d.device, {}, value(d.a, member), value(d.b, member)});
  }
  // What kind of memory changed at the allocated peak, then where, then reserved memory's sites.
  auto add = [&](const std::vector<analysis::TraceDiff::Sites>& all, const std::string& noun) {
    for (const analysis::TraceDiff::Sites& s : all) {
      const std::pair<const char*, const std::vector<analysis::SiteDiff>*> kinds[] = {
          {" changed", &s.changed}, {" new", &s.added}, {" vanished", &s.vanished}};
      for (const auto& [what, sites] : kinds)
        for (const analysis::SiteDiff& d : *sites)
          rows.push_back({noun + what, s.device, d.label, d.a_bytes, d.b_bytes});
    }
  };
  add(diff.categories, "category");
  add(diff.sites, "site");
  add(diff.reserved_sites, "reserved site");
  return rows;
}

}  // namespace tidemark::gui
