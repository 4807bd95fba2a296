#include "profiler/analysis/json.h"

namespace tidemark::analysis {

using nlohmann::json;

void to_json(json& j, const Group& g) {
  j = json{{"key", g.key},
           {"label", g.label},
           {"bytes", g.bytes},
           {"requested_bytes", g.requested_bytes},
           {"count", g.count}};
  if (!g.frames.empty()) j["frames"] = g.frames;
}

void to_json(json& j, const LiveBreakdown& b) {
  j = json{{"device", b.device},
           {"time_ns", b.time_ns},
           {"bytes", b.bytes},
           {"count", b.count},
           {"by", group_by_name(b.by)},
           {"groups", b.groups},
           {"groups_total", b.groups_total}};
}

void to_json(json& j, const LeakReport& r) {
  j = json{{"bytes", r.bytes},
           {"count", r.count},
           {"by", group_by_name(r.by)},
           {"groups", r.groups},
           {"groups_total", r.groups_total}};
  json steps = json::array();
  for (const StepLeak& l : r.by_step)
    steps.push_back(
        {{"step", l.step ? json(*l.step) : json(nullptr)}, {"bytes", l.bytes}, {"count", l.count}});
  j["by_step"] = steps;
}

void to_json(json& j, const DeviceSummary& s) {
  j = json{{"device", s.device},
           {"description", s.description},
           {"capacity_bytes", s.capacity},
           {"peak_allocated_bytes", s.peak_allocated_bytes},
           {"peak_reserved_bytes", s.peak_reserved_bytes},
           {"peak_active_bytes", s.peak_active_bytes},
           {"peak_requested_bytes", s.peak_requested_bytes},
           {"peak_allocated_time_ns", s.peak_allocated_time_ns},
           {"peak_allocated_exact", s.peak_allocated_estimated_blocks == 0},
           {"final_allocated_bytes", s.final_allocated_bytes},
           {"final_reserved_bytes", s.final_reserved_bytes},
           {"final_active_bytes", s.final_active_bytes},
           {"alloc_count", s.alloc_count},
           {"segment_alloc_count", s.segment_alloc_count},
           {"oom_count", s.oom_count},
           {"sync_count", s.sync_count},
           {"leaked_count", s.leaked_count},
           {"leaked_bytes", s.leaked_bytes}};
  json pools = json::array();
  for (const PrivatePoolSummary& p : s.private_pools)
    pools.push_back({{"pool", {p.pool_a, p.pool_b}},
                     {"segments", p.segments},
                     {"reserved_bytes", p.reserved_bytes}});
  j["private_pools"] = pools;
}

void to_json(json& j, const Summary& s) {
  j = json{
      {"json_version", kJsonSchemaVersion},
      {"path", s.path},
      {"schema_version", s.schema_version},
      {"tool_version", s.tool_version},
      {"command_line", s.command_line},
      {"host", s.host},
      {"pid", s.pid},
      {"clean_end", s.clean_end},
      {"origin_ts_ns", s.origin_ts},
      {"duration_ns", s.duration_ns},
      {"event_count", s.event_count},
      {"dropped_count", s.dropped_count},
      {"loss_counted", s.loss_counted},
      {"step_count", s.step_count},
      {"imported_snapshot", s.imported_snapshot},
      {"synthetic_times", s.synthetic_times},
      {"devices", s.devices},
      {"top_at_peak", s.top_at_peak ? json(*s.top_at_peak) : json(nullptr)},
      {"categories_at_peak", s.categories_at_peak ? json(*s.categories_at_peak) : json(nullptr)},
      {"categories_inferred",
       s.categories_inferred.empty() ? json(nullptr) : json(s.categories_inferred)},
      {"reserved_at_peak", s.reserved_at_peak ? json(*s.reserved_at_peak) : json(nullptr)},
      {"estimated",
       s.estimated.empty() ? json(nullptr) : json::parse(s.estimated, nullptr, false, true)},
      {"leaks", s.leaks}};
}

void to_json(json& j, const StepStats& s) {
  j = json{{"step", s.number},
           {"start_ns", s.start_ns},
           {"duration_ns", s.duration_ns},
           {"allocated_at_start_bytes", s.allocated_at_start_bytes},
           {"peak_allocated_bytes", s.peak_allocated_bytes},
           {"peak_reserved_bytes", s.peak_reserved_bytes},
           {"alloc_count", s.alloc_count},
           {"alloc_bytes", s.alloc_bytes},
           {"sync_count", s.sync_count},
           {"sync_ns", s.sync_ns}};
}

void to_json(json& j, const Growth& g) {
  json b = json::array();
  for (const auto& [step, bytes] : g.boundaries) b.push_back({{"step", step}, {"bytes", bytes}});
  j = json{{"boundaries", b},
           {"slope_bytes_per_step", g.slope_bytes_per_step},
           {"r2", g.r2},
           {"growing", g.growing}};
}

void to_json(json& j, const SyncReport& r) {
  json kinds = json::object();
  for (const auto& [k, n] : r.by_kind) kinds[k] = n;
  json sites = json::array();
  for (const SyncSite& s : r.sites)
    sites.push_back({{"key", s.key},
                     {"label", s.label},
                     {"kind", s.kind},
                     {"count", s.count},
                     {"total_ns", s.total_ns},
                     {"max_ns", s.max_ns}});
  j = json{{"count", r.count},
           {"total_ns", r.total_ns},
           {"by_kind", kinds},
           {"sites", sites},
           {"sites_total", r.sites_total},
           {"max_per_step", r.max_per_step},
           {"max_step", r.max_step ? json(*r.max_step) : json(nullptr)}};
}

void to_json(json& j, const Timeline& t) {
  auto curve = [](const CurveColumns& c) {
    return json{{"min", c.min}, {"max", c.max}, {"last", c.last}};
  };
  json steps = json::array();
  for (const auto& [n, ts] : t.steps) steps.push_back({{"step", n}, {"ts_ns", ts}});
  j = json{{"device", t.device},
           {"from_ts_ns", t.from_ts},
           {"to_ts_ns", t.to_ts},
           {"column_ns", t.column_ns},
           {"width", t.width()},
           {"level", t.level},
           {"level_width_ns", t.level_width_ns},
           {"allocated", curve(t.allocated)},
           {"active", curve(t.active)},
           {"reserved", curve(t.reserved)},
           {"requested", curve(t.requested)},
           {"steps", steps}};
  if (t.peak_allocated)
    j["peak_allocated"] = {{"bytes", t.peak_allocated->bytes}, {"ts_ns", t.peak_allocated->ts_ns}};
}

void to_json(json& j, const TraceDiff& d) {
  json devices = json::array();
  for (const DeviceDiff& x : d.devices)
    devices.push_back({{"device", x.device},
                       {"a", x.a ? json(*x.a) : json(nullptr)},
                       {"b", x.b ? json(*x.b) : json(nullptr)},
                       {"peak_allocated_delta_bytes", x.peak_allocated_delta},
                       {"peak_reserved_delta_bytes", x.peak_reserved_delta},
                       {"final_allocated_delta_bytes", x.final_allocated_delta}});
  auto sites = [](const std::vector<SiteDiff>& v) {
    json a = json::array();
    for (const SiteDiff& s : v)
      a.push_back({{"key", s.key},
                   {"label", s.label},
                   {"a_bytes", s.a_bytes},
                   {"b_bytes", s.b_bytes},
                   {"delta_bytes", s.delta()},
                   {"a_count", s.a_count},
                   {"b_count", s.b_count}});
    return a;
  };
  auto per_device = [&](const std::vector<TraceDiff::Sites>& v) {
    json a = json::array();
    for (const auto& s : v)
      a.push_back({{"device", s.device},
                   {"changed", sites(s.changed)},
                   {"new", sites(s.added)},
                   {"vanished", sites(s.vanished)}});
    return a;
  };
  j = json{{"json_version", kJsonSchemaVersion},
           {"a", d.a_path},
           {"b", d.b_path},
           {"devices", devices},
           {"sites_at_peak", per_device(d.sites)},
           {"reserved_sites_at_peak", per_device(d.reserved_sites)},
           {"categories_at_peak", per_device(d.categories)}};
}

}  // namespace tidemark::analysis
