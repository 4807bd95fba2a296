#include "profiler/analysis/steps.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "profiler/store/event_tables.h"
#include "profiler/store/trace_format.h"

namespace tidemark::analysis {

std::optional<std::string> steps_inferred_from(const Trace& trace) {
  constexpr std::string_view kPrefix = "inferred from ";
  std::optional<std::string> first;  // the first step's name
  store::for_each_step(trace.reader(), [&](const store::StepRow& r) {
    if (!first) first = r.name;
  });
  if (!first || !first->starts_with(kPrefix)) return std::nullopt;
  return first->substr(kPrefix.size());
}

namespace {

// The rank of a device of a merged trace (Note [Steps of a rank]); none otherwise.
std::optional<int64_t> rank_of(const Trace& trace, std::optional<int64_t> device) {
  if (!device) return std::nullopt;
  for (const DeviceRef& d : trace.devices())
    if (d.id == *device) return d.rank;
  return std::nullopt;
}

}  // namespace

std::vector<StepSpan> steps_of(const Trace& trace, std::optional<int64_t> device) {
  std::vector<StepSpan> out;
  const std::optional<int64_t> rank = rank_of(trace, device);
  store::for_each_step(trace.reader(), [&](const store::StepRow& r) {
    if (rank && static_cast<int64_t>(r.thread >> store::kMergedRankShift) != *rank) return;
    out.push_back({r.number, r.ts, r.end_ts, r.seq});
  });
  return out;
}

std::vector<StepStats> step_stats(const Trace& trace, int64_t device) {
  std::vector<StepStats> out;
  store::WindowTotals totals(trace.reader());
  const std::optional<int64_t> rank = rank_of(trace, device);
  for (const StepSpan& step : steps_of(trace, device)) {
    StepStats s;
    s.number = step.number;
    uint64_t t0 = step.ts;
    uint64_t t1 = step.end_ts ? *step.end_ts : trace.end_ns() + 1;
    s.start_ns = t0 >= trace.origin_ns() ? t0 - trace.origin_ns() : 0;
    s.duration_ns = t1 > t0 ? t1 - t0 : 0;
    const store::TraceReader& reader = trace.reader();
    int64_t reserved0 = 0;
    if (std::optional<store::LodRow> r = reader.lod_before(device, 0, t0)) {
      s.allocated_at_start_bytes = r->allocated;
      reserved0 = r->reserved;
    }
    // The changes at the step's own time that came before its event (level 0 is in seq order).
    reader.for_each_lod(device, 0, t0, t0, [&](const store::LodRow& r) {
      if (!r.seq || *r.seq >= step.seq) return false;
      s.allocated_at_start_bytes = r.allocated;
      reserved0 = r.reserved;
      return true;
    });
    s.peak_allocated_bytes = s.allocated_at_start_bytes;
    s.peak_reserved_bytes = reserved0;
    if (t1 > t0)
      reader.for_each_lod(device, 0, t0, t1 - 1, [&](const store::LodRow& r) {
        s.peak_allocated_bytes = std::max(s.peak_allocated_bytes, r.allocated);
        s.peak_reserved_bytes = std::max(s.peak_reserved_bytes, r.reserved);
        return true;
      });
    const store::WindowTotals::Total allocs = totals.allocations(device, t0, t1);
    s.alloc_count = allocs.count;
    s.alloc_bytes = static_cast<int64_t>(allocs.sum);
    // Syncs on any device of the process: of the device's rank in a merged trace.
    const store::WindowTotals::Total syncs = totals.syncs(t0, t1, rank);
    s.sync_count = syncs.count;
    s.sync_ns = syncs.sum;
    out.push_back(s);
  }
  return out;
}

Growth fit_growth(std::vector<std::pair<int64_t, int64_t>> boundaries) {
  Growth g;
  g.boundaries = std::move(boundaries);
  // Note [Growth] in steps.h: skip the warm-up boundary.
  if (g.boundaries.size() < 5) return g;
  const size_t n = g.boundaries.size() - 1;
  double sx = 0, sy = 0;
  for (size_t i = 1; i < g.boundaries.size(); ++i) {
    sx += static_cast<double>(g.boundaries[i].first);
    sy += static_cast<double>(g.boundaries[i].second);
  }
  const double mx = sx / static_cast<double>(n), my = sy / static_cast<double>(n);
  double sxx = 0, sxy = 0, syy = 0;
  for (size_t i = 1; i < g.boundaries.size(); ++i) {
    double dx = static_cast<double>(g.boundaries[i].first) - mx;
    double dy = static_cast<double>(g.boundaries[i].second) - my;
    sxx += dx * dx;
    sxy += dx * dy;
    syy += dy * dy;
  }
  if (sxx == 0) return g;
  g.slope_bytes_per_step = sxy / sxx;
  g.r2 = syy == 0 ? 0 : (sxy * sxy) / (sxx * syy);
  const int64_t rise = g.boundaries.back().second - g.boundaries[1].second;
  g.growing = g.slope_bytes_per_step > 0 && g.r2 >= 0.8 && rise >= 4096;
  return g;
}

Growth growth(const Trace& trace, int64_t device) {
  std::vector<std::pair<int64_t, int64_t>> b;
  for (const StepStats& s : step_stats(trace, device))
    b.emplace_back(s.number, s.allocated_at_start_bytes);
  return fit_growth(std::move(b));
}

SyncReport syncs(const Trace& trace, size_t limit) {
  SyncReport r;
  std::map<std::string, uint64_t> kinds;
  std::map<std::string, SyncSite> sites;
  std::map<std::string, std::map<std::string, uint64_t>> site_kinds;
  std::vector<uint64_t> times;
  store::for_each_sync(trace.reader(), [&](const store::SyncRow& q) {
    const uint64_t d = q.duration_ns;
    const Site& site = trace.site(q.stack_id);
    ++r.count;
    r.total_ns += d;
    ++kinds[q.kind];
    SyncSite& s = sites[site.key];
    s.key = site.key;
    s.label = site.label;
    ++s.count;
    s.total_ns += d;
    s.max_ns = std::max(s.max_ns, d);
    ++site_kinds[site.key][q.kind];
    times.push_back(q.ts);
  });
  for (auto& [k, n] : kinds) r.by_kind.emplace_back(k, n);
  std::stable_sort(r.by_kind.begin(), r.by_kind.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  for (auto& [k, s] : sites) {
    uint64_t best = 0;
    for (auto& [kind, n] : site_kinds[k])
      if (n > best) best = n, s.kind = kind;
    r.sites.push_back(s);
  }
  std::stable_sort(r.sites.begin(), r.sites.end(), [](const SyncSite& a, const SyncSite& b) {
    return a.count != b.count ? a.count > b.count : a.total_ns > b.total_ns;
  });
  r.sites_total = r.sites.size();
  if (limit && r.sites.size() > limit) r.sites.resize(limit);

  // Note [The open last step]: the last step has no closing boundary, so it also holds
  // whatever the program did after its loop (a final loss read, evaluation, teardown). The
  // busiest step is therefore chosen among complete steps; the last one counts only when it
  // is the only step.
  std::optional<std::pair<int64_t, uint64_t>> open;  // the last step: number, syncs
  store::for_each_step(trace.reader(), [&](const store::StepRow& step) {
    const uint64_t t0 = step.ts;
    const uint64_t t1 = step.end_ts.value_or(~uint64_t{0});
    auto lo = std::lower_bound(times.begin(), times.end(), t0);
    auto hi = std::lower_bound(times.begin(), times.end(), t1);
    const auto n = static_cast<uint64_t>(hi - lo);
    if (!step.end_ts) {
      open = {step.number, n};
      return;
    }
    if (!r.max_step || n > r.max_per_step) {
      r.max_step = step.number;
      r.max_per_step = n;
    }
  });
  if (!r.max_step && open) {
    r.max_step = open->first;
    r.max_per_step = open->second;
  }
  return r;
}

std::vector<SyncEvent> sync_events(const Trace& trace, uint64_t from_ts, uint64_t to_ts) {
  std::vector<SyncEvent> out;
  store::for_each_sync(
      trace.reader(),
      [&](const store::SyncRow& q) {
        SyncEvent e;
        e.ts = q.ts;
        e.duration_ns = q.duration_ns;
        e.seq = q.seq;
        e.device_id = q.device;
        e.kind = q.kind;
        e.stream = q.stream;
        e.thread = q.thread;
        e.stack_id = q.stack_id;
        out.push_back(std::move(e));
      },
      from_ts, to_ts);
  for (SyncEvent& e : out) {
    const auto& site = trace.site(e.stack_id);
    e.site = site.label;
    e.site_key = site.key;
  }
  return out;
}

}  // namespace tidemark::analysis
