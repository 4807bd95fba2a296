#include "profiler/analysis/memory.h"

#include <algorithm>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <unordered_map>

#include "profiler/analysis/steps.h"
#include "profiler/naming/units.h"
#include "profiler/store/allocator_tables.h"
#include "profiler/store/event_tables.h"
#include "profiler/store/meta_keys.h"

namespace tidemark::analysis {

namespace ev = events;

std::string_view group_by_name(GroupBy g) {
  switch (g) {
    case GroupBy::site:
      return "site";
    case GroupBy::stack:
      return "stack";
    case GroupBy::scope:
      return "scope";
    case GroupBy::category:
      return "category";
    case GroupBy::line:
      return "line";
  }
  return "site";
}

std::optional<GroupBy> parse_group_by(std::string_view s) {
  for (GroupBy g :
       {GroupBy::site, GroupBy::stack, GroupBy::scope, GroupBy::category, GroupBy::line})
    if (group_by_name(g) == s) return g;
  return std::nullopt;
}

namespace {

// The value of every curve after the last change before `ts` (0 before any).
struct Values {
  int64_t allocated = 0, active = 0, reserved = 0, requested = 0;
};

Values values_before(const Trace& trace, int64_t device, int level, uint64_t ts) {
  std::optional<store::LodRow> r = trace.reader().lod_before(device, level, ts);
  if (!r) return {};
  return {r->allocated, r->active, r->reserved, r->requested};
}

}  // namespace

namespace {

// What grouping reads of a row: an allocation, or a segment (no scope, no category).
struct Member {
  uint64_t stack_id = 0;
  int64_t bytes = 0, requested_bytes = 0;
  const std::string* scope = nullptr;  // "" or null: none
  ev::Category category = ev::Category::unknown;
};

// Note [Source lines]
// ~~~~~~~~~~~~~~~~~~~
// GroupBy::line puts an allocation on one line of source: with a source file set (`top --by
// line --file model.py`), the innermost frame of its stack in that file, matched by its path
// or trailing components, so a model's lines show the bytes allocated under them whichever
// library call made the block; an allocation with no frame there is "(not in FILE)". Without
// one, the site's own frame (Note [Allocation site]). The key is the file's base name and the
// line, so two runs from different checkouts compare line by line (`diff --by line`); the
// label adds the function.
bool in_source_file(const std::string& frame_file, const std::string& wanted) {
  if (frame_file == wanted) return true;
  return frame_file.size() > wanted.size() && frame_file.ends_with(wanted) &&
         frame_file[frame_file.size() - wanted.size() - 1] == '/';
}

std::pair<std::string, std::string> line_of(const Trace& trace, uint64_t stack_id) {
  std::optional<store::ResolvedFrame> f;
  const std::string& wanted = trace.source_file();
  if (!wanted.empty()) {
    for (const store::ResolvedFrame& r : trace.resolved_frames(stack_id))
      if (in_source_file(r.file, wanted)) {
        f = r;
        break;
      }
    if (!f) return {"(not in " + wanted + ")", "(not in " + wanted + ")"};
  } else {
    f = trace.site_frame(stack_id);
    if (!f) return {"(no stack)", "(no stack)"};
  }
  if (f->file.empty()) {  // a frame without a file (the autograd engine's): its site
    const Site& s = trace.site(stack_id);
    return {s.label, s.label};
  }
  const size_t slash = f->file.find_last_of('/');
  const std::string base = slash == std::string::npos ? f->file : f->file.substr(slash + 1);
  const std::string at = base + ":" + std::to_string(f->line);
  return {at, (f->function.empty() ? std::string("??") : f->function) + " (" + at + ")"};
}

std::vector<Group> group_members(const Trace& trace, const std::vector<Member>& members, GroupBy by,
                                 size_t limit, uint64_t* groups_total) {
  std::unordered_map<std::string, Group> groups;
  // A site groups a function's allocations in one file (the key has no line, so diffs survive
  // edits); its label names the line that holds the most bytes of the group.
  std::unordered_map<std::string, std::map<std::string, int64_t>> site_labels;
  for (const Member& m : members) {
    std::string key, label;
    switch (by) {
      case GroupBy::site: {
        const Site& s = trace.site(m.stack_id);
        key = s.key;
        label = s.label;
        break;
      }
      case GroupBy::stack:
        key = std::to_string(m.stack_id);
        break;
      case GroupBy::scope:
        key = label = !m.scope || m.scope->empty() ? "(no scope)" : *m.scope;
        break;
      case GroupBy::category:
        key = label = trace.category_label(m.stack_id, m.category);
        break;
      case GroupBy::line: {
        auto [k, l] = line_of(trace, m.stack_id);
        key = std::move(k);
        label = std::move(l);
        break;
      }
    }
    auto [it, inserted] = groups.try_emplace(key);
    Group& g = it->second;
    if (inserted) {
      g.key = key;
      g.label = label;
      if (by == GroupBy::stack) {
        g.frames = trace.stack_frames(m.stack_id);
        g.library = trace.library_frames(m.stack_id);
        g.label = m.stack_id == 0    ? "(no stack)"
                  : g.frames.empty() ? "stack " + key
                                     : g.frames.front();
        if (m.stack_id != 0) g.label = trace.site(m.stack_id).label;
      }
    }
    g.bytes += m.bytes;
    g.requested_bytes += m.requested_bytes;
    ++g.count;
    if (by == GroupBy::site) site_labels[key][label] += m.bytes;
  }
  for (auto& [key, labels] : site_labels) {
    if (labels.size() < 2) continue;
    auto best = labels.begin();
    for (auto it = labels.begin(); it != labels.end(); ++it)
      if (it->second > best->second) best = it;
    groups[key].label = best->first;
  }
  std::vector<Group> out;
  out.reserve(groups.size());
  for (auto& [k, g] : groups) out.push_back(std::move(g));
  std::sort(out.begin(), out.end(), [](const Group& a, const Group& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.key < b.key;
  });
  if (groups_total) *groups_total = out.size();
  if (limit && out.size() > limit) out.resize(limit);
  return out;
}

LiveBreakdown breakdown(const Trace& trace, int64_t device, uint64_t ts, GroupBy by) {
  LiveBreakdown b;
  b.device_id = device;
  if (const DeviceRef* d = trace.device_by_id(device)) b.device = d->name;
  b.time_ns = ts >= trace.origin_ns() ? ts - trace.origin_ns() : 0;
  b.by = by;
  return b;
}

}  // namespace

std::vector<store::AllocationRow> live_allocations(const Trace& trace, int64_t device,
                                                   TimePoint at) {
  return store::allocated_at(trace.reader(), device, at.ts, at.seq);
}

std::vector<store::SegmentRow> live_segments(const Trace& trace, int64_t device, TimePoint at) {
  return store::reserved_at(trace.reader(), device, at.ts, at.seq);
}

std::vector<store::AllocationRow> live_in_range(const Trace& trace, int64_t device,
                                                uint64_t from_ts, uint64_t to_ts) {
  return store::allocation_rows(trace.reader(),
                                {.device = device, .live_in = std::pair{from_ts, to_ts}},
                                store::AllocationOrder::seq);
}

std::vector<Group> group_allocations(const Trace& trace,
                                     const std::vector<store::AllocationRow>& rows, GroupBy by,
                                     size_t limit, uint64_t* groups_total) {
  std::vector<Member> members;
  members.reserve(rows.size());
  for (const store::AllocationRow& a : rows)
    members.push_back({a.stack_id, static_cast<int64_t>(a.size),
                       static_cast<int64_t>(a.requested_size), &a.scope, a.category});
  return group_members(trace, members, by, limit, groups_total);
}

LiveBreakdown live_at(const Trace& trace, int64_t device, TimePoint at, GroupBy by, size_t limit) {
  LiveBreakdown b = breakdown(trace, device, at.ts, by);
  std::vector<store::AllocationRow> rows = live_allocations(trace, device, at);
  for (const auto& a : rows) b.bytes += static_cast<int64_t>(a.size);
  b.count = rows.size();
  b.groups = group_allocations(trace, rows, by, limit, &b.groups_total);
  return b;
}

std::optional<LiveBreakdown> reserved_at_peak(const Trace& trace, int64_t device, size_t limit,
                                              GroupBy by) {
  std::optional<store::Peak> p = peak(trace, device, store::Curve::reserved);
  if (!p || p->bytes <= 0) return std::nullopt;
  LiveBreakdown b = breakdown(trace, device, p->ts_ns, by);
  // The pieces of a partly unmapped range (rows of one seq) are one member.
  std::vector<Member> members;
  uint64_t last_seq = 0;
  for (const store::SegmentRow& r : live_segments(trace, device, {p->ts_ns, p->seq})) {
    if (members.empty() || r.seq != last_seq) members.push_back({r.stack_id, 0, 0});
    members.back().bytes += static_cast<int64_t>(r.size);
    b.bytes += static_cast<int64_t>(r.size);
    last_seq = r.seq;
  }
  b.count = members.size();
  b.groups = group_members(trace, members, by, limit, &b.groups_total);
  return b;
}

std::optional<store::Peak> peak(const Trace& trace, int64_t device, store::Curve curve) {
  return trace.reader().peak(device, curve);
}

std::optional<TimePoint> peak_point(const Trace& trace, int64_t device) {
  auto p = peak(trace, device, store::Curve::allocated);
  if (!p) return std::nullopt;
  return TimePoint{p->ts_ns, p->seq};
}

const DeviceRef* busiest_device(const Trace& trace) {
  const DeviceRef* best = nullptr;
  int64_t best_bytes = -1;
  for (const DeviceRef& d : trace.devices()) {
    auto p = peak(trace, d.id);
    const int64_t bytes = p ? p->bytes : 0;
    if (bytes > best_bytes) best = &d, best_bytes = bytes;
  }
  return best;
}

TimePoint step_point(const Trace& trace, int64_t number) {
  std::optional<uint64_t> ts;  // the first step of that number
  store::for_each_step(trace.reader(), [&](const store::StepRow& r) {
    if (!ts && r.number == number) ts = r.ts;
  });
  if (!ts) throw std::invalid_argument("no step " + std::to_string(number) + " in the trace");
  return TimePoint{*ts, std::nullopt};
}

std::vector<std::pair<int64_t, uint64_t>> step_starts(const Trace& trace) {
  std::vector<std::pair<int64_t, uint64_t>> steps;
  store::for_each_step(trace.reader(),
                       [&](const store::StepRow& r) { steps.emplace_back(r.number, r.ts); });
  return steps;
}

LeakReport leaks(const Trace& trace, std::optional<int64_t> device, GroupBy by, size_t limit) {
  LeakReport r;
  r.by = by;
  std::vector<store::AllocationRow> rows = store::allocation_rows(
      trace.reader(), {.device = device, .never_freed = true}, store::AllocationOrder::seq);
  for (const auto& a : rows) r.bytes += static_cast<int64_t>(a.size);
  r.count = rows.size();
  r.groups = group_allocations(trace, rows, by, limit, &r.groups_total);

  std::vector<std::pair<int64_t, uint64_t>> steps;  // of the device's rank (Note [Steps of a rank])
  for (const StepSpan& s : steps_of(trace, device)) steps.emplace_back(s.number, s.ts);
  std::map<int64_t, StepLeak> per_step;  // keyed by index into steps, -1: before the first
  for (const auto& a : rows) {
    auto it = std::upper_bound(steps.begin(), steps.end(), a.alloc_ts,
                               [](uint64_t ts, const auto& s) { return ts < s.second; });
    int64_t index = (it - steps.begin()) - 1;
    StepLeak& l = per_step[index];
    if (index >= 0) l.step = steps[static_cast<size_t>(index)].first;
    l.bytes += static_cast<int64_t>(a.size);
    ++l.count;
  }
  for (auto& [i, l] : per_step) r.by_step.push_back(l);
  return r;
}

DeviceSummary summarize_device(const Trace& trace, const DeviceRef& device) {
  DeviceSummary s;
  s.device_id = device.id;
  s.device = device.name;
  s.description = device.description;
  s.capacity = device.capacity;
  const int64_t id = device.id;
  if (auto p = peak(trace, id, store::Curve::allocated)) {
    s.peak_allocated_bytes = p->bytes;
    s.peak_allocated_time_ns = p->ts_ns >= trace.origin_ns() ? p->ts_ns - trace.origin_ns() : 0;
    if (trace.imported_snapshot()) {
      // Note [Estimated block sizes]: a snapshot knows the size of the blocks still active at
      // its end (`segments`); every other block's size is estimated from its request.
      s.peak_allocated_estimated_blocks = store::allocation_count(
          trace.reader(), {.device = id, .live_at = p->ts_ns, .free_completed = true});
    }
  }
  if (auto p = peak(trace, id, store::Curve::reserved)) s.peak_reserved_bytes = p->bytes;
  if (auto p = peak(trace, id, store::Curve::active)) s.peak_active_bytes = p->bytes;
  if (auto p = peak(trace, id, store::Curve::requested)) s.peak_requested_bytes = p->bytes;
  // The final values: the last row of level 0 holds the value after the last change.
  if (std::optional<store::LodRow> last = trace.reader().lod_last(id, 0)) {
    s.final_allocated_bytes = last->allocated;
    s.final_reserved_bytes = last->reserved;
    s.final_active_bytes = last->active;
  }
  // Note [Private pools] (importers): meta private_pools, a JSON list over the devices; a
  // value this reader cannot read is left out (the key is optional).
  if (const std::string pools = trace.meta_text(store::meta_keys::kPrivatePools); !pools.empty()) {
    const nlohmann::json j = nlohmann::json::parse(pools, nullptr, false);
    if (j.is_array())
      for (const nlohmann::json& p : j) {
        if (!p.is_object() || p.value("device", std::string()) != device.name) continue;
        const nlohmann::json pool = p.value("pool", nlohmann::json());
        if (!pool.is_array() || pool.size() != 2 || !pool[0].is_number_integer() ||
            !pool[1].is_number_integer())
          continue;
        s.private_pools.push_back({pool[0].get<int64_t>(), pool[1].get<int64_t>(),
                                   p.value("segments", uint64_t{0}),
                                   p.value("reserved_bytes", int64_t{0})});
      }
  }
  s.alloc_count = store::allocation_count(trace.reader(), {.device = id});
  s.segment_alloc_count = store::segment_reservations(trace.reader(), {.device = id});
  s.oom_count = store::allocator_events(trace.reader(), "oom", id).size();
  s.sync_count = store::sync_count(trace.reader(), id);
  const store::RowTotals leaked =
      store::allocation_totals(trace.reader(), {.device = id, .never_freed = true});
  s.leaked_count = leaked.rows;
  s.leaked_bytes = leaked.bytes;
  return s;
}

Summary summarize(const Trace& trace, const SummaryOptions& options) {
  const store::TraceReader& r = trace.reader();
  Summary s;
  s.path = trace.shown_path();
  s.schema_version = static_cast<int>(
      trace.meta_int(store::meta_keys::kSchemaVersion).value_or(store::kSchemaVersion));
  store::TraceMeta meta = r.meta();
  s.tool_version = meta.tool_version;
  s.command_line = meta.command_line;
  s.imported_snapshot = trace.imported_snapshot();
  s.synthetic_times = trace.synthetic_times();
  s.categories_inferred = trace.categories_inferred();
  s.estimated = trace.estimated();
  s.host = meta.host;
  s.pid = meta.pid;
  s.clean_end = r.clean_end();
  s.origin_ts = trace.origin_ns();
  s.duration_ns = trace.duration_ns();
  s.event_count = r.event_count();
  s.dropped_count = r.dropped_count();
  s.loss_counted = r.loss_counted();
  store::for_each_step(trace.reader(), [&](const store::StepRow&) { ++s.step_count; });
  for (const DeviceRef& d : trace.devices())
    if (!options.device || *options.device == d.id) s.devices.push_back(summarize_device(trace, d));
  const DeviceSummary* primary = nullptr;
  for (const DeviceSummary& d : s.devices)
    if (!primary || d.peak_allocated_bytes > primary->peak_allocated_bytes) primary = &d;
  if (primary) {
    if (auto at = peak_point(trace, primary->device_id)) {
      s.top_at_peak = live_at(trace, primary->device_id, *at, GroupBy::site, options.top_limit);
      LiveBreakdown cats = live_at(trace, primary->device_id, *at, GroupBy::category, 0);
      const bool categorised = std::any_of(cats.groups.begin(), cats.groups.end(),
                                           [](const Group& g) { return g.key != "unknown"; });
      if (categorised) s.categories_at_peak = std::move(cats);
    }
  }
  const DeviceSummary* most_reserved = nullptr;
  for (const DeviceSummary& d : s.devices)
    if (!most_reserved || d.peak_reserved_bytes > most_reserved->peak_reserved_bytes)
      most_reserved = &d;
  if (most_reserved)
    s.reserved_at_peak = reserved_at_peak(trace, most_reserved->device_id, options.top_limit);
  s.leaks = leaks(trace, options.device, GroupBy::site, options.top_limit);
  return s;
}

namespace {

// One row of memory_lod: per curve (allocated, active, reserved, requested) its value after
// the row's last change, its min and its max.
struct LodSample {
  uint64_t t = 0;
  int64_t v[12] = {};
};

// Appends the rows of a level with t in [t0, t1], in the reader's order (t, then stored).
size_t read_lod(const Trace& trace, int64_t device, int level, uint64_t t0, uint64_t t1,
                std::vector<LodSample>& out) {
  const size_t before = out.size();
  for (const store::LodRow& r : trace.reader().lod(device, level, t0, t1)) {
    LodSample x;
    x.t = r.t;
    const int64_t v[12] = {r.allocated,    r.allocated_min, r.allocated_max, r.active,
                           r.active_min,   r.active_max,    r.reserved,      r.reserved_min,
                           r.reserved_max, r.requested,     r.requested_min, r.requested_max};
    std::copy(std::begin(v), std::end(v), x.v);
    out.push_back(x);
  }
  return out.size() - before;
}

}  // namespace

struct TimelineCache::Entry {
  std::vector<store::LodLevel> levels;  // read once
  bool levels_read = false;
  int level = -1;
  uint64_t t0 = 0, t1 = 0;  // every row of `level` with t in [t0, t1] is in `rows`
  Values before;            // the curves before t0
  std::vector<LodSample> rows;
};

TimelineCache::TimelineCache() = default;
TimelineCache::~TimelineCache() = default;
TimelineCache::TimelineCache(TimelineCache&&) noexcept = default;
TimelineCache& TimelineCache::operator=(TimelineCache&&) noexcept = default;

Timeline TimelineCache::timeline(const Trace& trace, int64_t device,
                                 const TimelineRequest& request) {
  Timeline tl;
  tl.device_id = device;
  if (const DeviceRef* d = trace.device_by_id(device)) tl.device = d->name;
  tl.from_ts = request.from_ts.value_or(trace.origin_ns());
  tl.to_ts = request.to_ts.value_or(trace.end_ns() + 1);
  if (tl.to_ts <= tl.from_ts) tl.to_ts = tl.from_ts + 1;
  const size_t width = std::max<size_t>(1, request.width);
  const uint64_t span = tl.to_ts - tl.from_ts;
  tl.column_ns = std::max<uint64_t>(1, span / width);

  Entry& e = entries_[device];
  if (!e.levels_read) {
    e.levels = trace.reader().lod_levels(device);
    e.levels_read = true;
  }
  // The coarsest stored level whose buckets fit in a column (level 0 always does).
  store::LodLevel chosen{};
  for (const store::LodLevel& l : e.levels)
    if (l.width_ns <= tl.column_ns && l.level >= chosen.level) chosen = l;
  tl.level = chosen.level;
  tl.level_width_ns = chosen.width_ns;

  // A bucket starting before `from` but reaching into it belongs to the first column.
  const uint64_t first_t = chosen.width_ns ? tl.from_ts - tl.from_ts % chosen.width_ns : tl.from_ts;
  const uint64_t last_t = tl.to_ts - 1;
  // Keep the rows read before when they are of this level and near: read only the margins
  // that came into view (nothing when zooming in). Far away, or a range much wider than the
  // view, starts afresh so the cache stays about the size of a view.
  const uint64_t lo = std::min(first_t, e.t0), hi = std::max(last_t, e.t1);
  if (e.level != chosen.level || hi - lo > 16 * std::max<uint64_t>(span, 1)) {
    e.level = chosen.level;
    e.rows.clear();
    e.t0 = first_t;
    e.t1 = last_t;
    e.before = values_before(trace, device, chosen.level, first_t);
    rows_read_ += read_lod(trace, device, chosen.level, first_t, last_t, e.rows);
  } else {
    if (first_t < e.t0) {
      std::vector<LodSample> left;
      rows_read_ += read_lod(trace, device, chosen.level, first_t, e.t0 - 1, left);
      e.rows.insert(e.rows.begin(), left.begin(), left.end());
      e.t0 = first_t;
      e.before = values_before(trace, device, chosen.level, first_t);
    }
    if (last_t > e.t1) {
      rows_read_ += read_lod(trace, device, chosen.level, e.t1 + 1, last_t, e.rows);
      e.t1 = last_t;
    }
  }

  CurveColumns* curves[] = {&tl.allocated, &tl.active, &tl.reserved, &tl.requested};
  for (CurveColumns* c : curves) {
    c->min.assign(width, 0);
    c->max.assign(width, 0);
    c->last.assign(width, 0);
  }
  auto next = std::lower_bound(e.rows.begin(), e.rows.end(), first_t,
                               [](const LodSample& r, uint64_t t) { return r.t < t; });
  int64_t cur[4] = {e.before.allocated, e.before.active, e.before.reserved, e.before.requested};
  if (next != e.rows.begin())
    for (int i = 0; i < 4; ++i) cur[i] = (next - 1)->v[3 * i];
  const bool any_rows = next != e.rows.end() && next->t <= last_t;
  for (size_t col = 0; col < width; ++col) {
    const uint64_t col_end = col + 1 == width ? tl.to_ts : tl.from_ts + (col + 1) * tl.column_ns;
    int64_t mn[4], mx[4];
    for (int i = 0; i < 4; ++i) mn[i] = mx[i] = cur[i];
    for (; next != e.rows.end() && next->t < col_end; ++next) {
      for (int i = 0; i < 4; ++i) {  // per curve: last, min, max
        cur[i] = next->v[3 * i];
        mn[i] = std::min(mn[i], next->v[3 * i + 1]);
        mx[i] = std::max(mx[i], next->v[3 * i + 2]);
      }
    }
    for (int i = 0; i < 4; ++i) {
      curves[i]->min[col] = mn[i];
      curves[i]->max[col] = mx[i];
      curves[i]->last[col] = cur[i];
    }
  }
  if (request.curves_only) return tl;
  // The highest allocated value in the range, and when it was first reached.
  int64_t best = std::numeric_limits<int64_t>::min();
  for (int64_t v : tl.allocated.max) best = std::max(best, v);
  if (any_rows || best > 0) {
    if (auto p = trace.reader().first_at_least(device, store::Curve::allocated, best, tl.from_ts,
                                               tl.to_ts))
      tl.peak_allocated = p;
    else
      tl.peak_allocated = store::Peak{best, tl.from_ts, 0};
  }
  for (const StepSpan& s : steps_of(trace, device))  // its rank's (Note [Steps of a rank])
    if (s.ts >= tl.from_ts && s.ts < tl.to_ts) tl.steps.emplace_back(s.number, s.ts);
  return tl;
}

Timeline timeline(const Trace& trace, int64_t device, const TimelineRequest& request) {
  TimelineCache once;
  return once.timeline(trace, device, request);
}

std::vector<TensorRecord> tensors_live_at(const Trace& trace, uint64_t ts) {
  return tensor_records(trace, {.live_at = ts});
}

std::string estimate_label(const std::string& estimated) {
  if (estimated.empty()) return {};
  const nlohmann::json j = nlohmann::json::parse(estimated, nullptr, false);
  std::string card;
  if (j.is_object() && j.contains("gpu") && j["gpu"].is_string())
    card = j["gpu"].get<std::string>();
  if (j.is_object() && j.contains("capacity") && j["capacity"].is_number_integer())
    card += " (" + format_bytes(j["capacity"].get<int64_t>()) + ")";
  if (j.is_object() && j.contains("torch") && j["torch"].is_string())
    card += ", torch " + j["torch"].get<std::string>();
  return "estimated, no GPU ran: tidemark estimate" + (card.empty() ? "" : " as " + card);
}

}  // namespace tidemark::analysis
