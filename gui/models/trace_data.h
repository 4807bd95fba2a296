// Plain data the GUI shows for one trace, computed off the GUI thread by the loader from
// profiler/analysis (so the GUI and `tidemark summary`/`diagnose` give the same answers).
// Models get copies of these rows through their setData(); nothing here touches Qt widgets.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "profiler/analysis/allocator_state.h"
#include "profiler/analysis/details.h"
#include "profiler/analysis/diff.h"
#include "profiler/analysis/flame.h"
#include "profiler/analysis/follow.h"
#include "profiler/analysis/memory.h"
#include "profiler/analysis/steps.h"
#include "profiler/analysis/trace.h"
#include "profiler/diagnose/diagnose.h"
#include "profiler/naming/units.h"

namespace tidemark::gui {

// An open trace shared by the loader, the timeline's zoom queries and the allocator view.
// analysis::Trace caches sites and holds one SQLite connection (analysis::LiveTrace its
// curves), so every use goes through with(), which serialises callers from any thread.
template <class T>
class Guarded {
 public:
  template <class... Args>
  explicit Guarded(Args&&... args) : value_(std::forward<Args>(args)...) {}
  template <class F>
  auto with(F&& f) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return f(value_);
  }
  template <class F>
  auto with_mutable(F&& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    return f(value_);
  }

 private:
  mutable std::mutex mutex_;
  T value_;
};
using TraceSession = Guarded<analysis::Trace>;
using LiveSession = Guarded<analysis::LiveTrace>;  // Follow: a trace still being recorded

struct TraceData;
// A connection of its own to `data`'s trace, read as the session's is: sites under
// data.frames, categories under data.category_rules.
analysis::Trace open_own_trace(const TraceData& data);

// f(trace) on the session's trace with `frames` its rule for sites, under the session's lock:
// the rule of the query that asks, whichever rule the one before it asked for (Note [Frames
// in the GUI], view_selection.h).
template <class F>
auto with_frames(TraceSession& session, analysis::Frames frames, F&& f) {
  return session.with_mutable([&](analysis::Trace& trace) {
    trace.set_frames(frames);
    return f(std::as_const(trace));
  });
}

// A group of allocations (by site) with the time span its allocations cover, so selecting
// it in a table can highlight that span on the timeline. Times are absolute.
struct SiteRow {
  std::string device;
  std::string site;
  int64_t bytes = 0, requested_bytes = 0;
  uint64_t count = 0;
  uint64_t first_ts = 0, last_ts = 0;
  // The site's largest allocation in the group (its Details): device id, addr, alloc_ts.
  int64_t device_id = 0;
  uint64_t largest_addr = 0, largest_alloc_ts = 0;
};

using analysis::SyncEvent;  // one sync, with its stack (analysis::sync_events)

struct SyncSiteRow {
  analysis::SyncSite site;
  uint64_t first_ts = 0, last_ts = 0;
};

struct StepRow {
  std::string device;
  analysis::StepStats stats;  // start_ns relative to the origin
};

// The loader fills a TraceData in stages and hands out a snapshot after each, so the timeline
// paints before the slower tables and findings exist (docs/gui.md, "Loading").
enum class Stage {
  opened,    // session, origin, end, devices, peaks: enough for the timeline
  tables,    // + summary, live at peak, leaks, syncs, steps, scopes
  complete,  // + the findings of diagnose()
};

// Custom categories in the GUI (Note [Category rules]): the rules file `tidemark-gui
// --categories FILE` names for every trace it opens; empty (the default): each trace's own
// tidemark-categories.json beside it, if any and the user's (CategoryRules::find)
// (CategoryRules::find). Set before the first trace opens.
void set_category_rules_file(std::string file);

struct TraceData {
  Stage stage = Stage::opened;
  // The rule the sites of the tables and findings, and the flame graphs, were computed under
  // (Note [Frames in the GUI]).
  analysis::Frames frames = analysis::Frames::user;
  std::string late_error;  // a failure after the trace opened (tables or findings)
  std::string path;
  // The file the user opened when it is not `path`: a PyTorch snapshot, imported into the
  // temporary trace `path` (Note [Snapshots as traces] in profiler/importers/temporary_import.h).
  std::string source;
  const std::string& shown_path() const { return source.empty() ? path : source; }
  std::shared_ptr<TraceSession> session;  // a finalized trace: every view
  std::shared_ptr<LiveSession> live;      // instead, when following: only the curves
  uint64_t origin_ns = 0, end_ns = 0;
  // Times are a snapshot's entry order (analysis::Trace::synthetic_times): axes and labels
  // show event numbers; imported: an imported snapshot, whose live-at-end is not leaked.
  bool synthetic_times = false, imported = false;
  // A time since the origin as the axes and tables show it: "2.05 s" or "event 5317".
  std::string time_text(uint64_t rel_ns) const {
    return synthetic_times ? analysis::format_time_point(rel_ns, true)
                           : analysis::format_duration(rel_ns);
  }
  std::vector<analysis::DeviceRef> devices;
  analysis::Summary summary;
  diagnose::Diagnosis diagnosis;
  // Per device (same order as `devices`): the allocated peak, if the device has memory events.
  std::vector<std::optional<store::Peak>> peaks;
  std::vector<std::pair<int64_t, uint64_t>> steps;  // (number, absolute ts), by ts; Stage::opened
  // A merged trace's: each rank's own steps, likewise (Note [Steps of a rank]); else empty.
  std::map<int64_t, std::vector<std::pair<int64_t, uint64_t>>> rank_steps;
  // An imported snapshot's (Note [Inferred categories] in the importer): what its categories
  // and its steps were inferred from (Trace::categories_inferred, steps_inferred_from); empty
  // when recorded. Stage::opened, so the timeline says so from its first paint.
  std::string categories_inferred, steps_inferred;
  // The custom categories this trace is shown with (set_category_rules_file); null: the
  // recorded (or inferred) ones. Every view that groups by category uses them.
  std::shared_ptr<const analysis::CategoryRules> category_rules;
  // Following: per device, the growth of live bytes at the start of the last ten ended steps
  // (of reserved bytes on a device without blocks, an injected run: live_growth_reserved).
  std::vector<analysis::Growth> live_growth;
  std::vector<bool> live_growth_reserved;
  std::vector<SiteRow> live_at_peak, leaks;
  // Per device (as `devices`): the stacks live at the allocated peak, those leaked (still
  // allocated at the end), and those of the segments reserved at the reserved peak (the only
  // graph of an injected CUDA program, which has segments but no blocks), as flame graphs.
  std::vector<analysis::FlameNode> flame_peak, flame_leaks, flame_reserved;
  std::vector<SyncEvent> sync_events;  // by ts
  std::vector<SyncSiteRow> sync_sites;
  std::vector<StepRow> step_rows;
  std::vector<analysis::ScopeSpan> scopes;  // by push_ts
  int scope_depth = 0;                      // rows the scope lane needs (max depth + 1)
};

// The same trace (a later stage, or a poll of the one being followed)?
inline bool same_trace(const TraceData* a, const TraceData* b) {
  return a && b && (a->session ? a->session == b->session : a->live && a->live == b->live);
}

// Follow: the curves of a trace still being recorded (stage opened, no tables), read so far.
// follow_trace_data() opens it and reads what was committed (null when the trace is already
// finalized: load it instead); poll_trace_data() reads what was committed since and returns
// the next snapshot, or null when nothing was.
std::shared_ptr<const TraceData> follow_trace_data(const std::string& path);
std::shared_ptr<const TraceData> poll_trace_data(const TraceData& previous);

// The stages, each on its own: open_trace_data() opens the trace (the session the timeline's
// queries use); compute_tables() and compute_findings() read through `trace`, a second
// connection of the loader's own, so the timeline's zoom queries never wait behind them. They
// name sites under `trace`'s rule (Trace::frames_mode, which compute_tables() records in
// TraceData::frames) and replace what an earlier run under another rule computed.
std::shared_ptr<TraceData> open_trace_data(const std::string& path);
void compute_tables(TraceData& data, const analysis::Trace& trace,
                    const std::function<void(int, const std::string&)>& progress = {});
void compute_findings(TraceData& data, const analysis::Trace& trace);

// Reads everything the views need (all stages), sites named under `frames`. `progress(percent,
// what)` is called between stages. Throws (store::StoreError, std::exception) on an unreadable
// trace.
std::shared_ptr<const TraceData> load_trace_data(
    const std::string& path, const std::function<void(int, const std::string&)>& progress = {},
    analysis::Frames frames = analysis::Frames::user);

// The allocator's state at a time on one device (analysis::allocator_state).
using analysis::AllocatorState;
using analysis::BlockState;
using analysis::SegmentState;

// What was allocated at some time in [from, to) (absolute), by site per device, as the Live
// at peak table lists it (analysis::live_in_range, grouped as group_allocations does).
std::vector<SiteRow> live_in_selection(const analysis::Trace& trace, uint64_t from, uint64_t to);

// A tensor or view live at a time (`at_ts`, absolute), as the Tensors table lists it.
struct TensorRow {
  analysis::TensorRecord info;
  std::string site;         // of its creation
  uint64_t created_ns = 0;  // relative to the origin
  uint64_t at_ts = 0;
};
// What the views that follow the selected time show: the allocator state, the tensors and the
// flame graph of what was live then, on one device.
struct StateAtTime {
  AllocatorState allocator;
  std::vector<TensorRow> tensors;  // by creation time
  analysis::FlameNode flame;       // the stacks of the allocations live then
};
// Under `trace`'s rule for sites (with_frames()).
StateAtTime state_at(const analysis::Trace& trace, int64_t device, uint64_t ts);

// One difference between two traces (analysis::diff), as the Compare table lists it: a
// device's peak or final value, or a site's bytes live at the allocated peak.
struct DiffRow {
  std::string what;  // "peak allocated", "peak reserved", "final allocated", then
                     // "category ...", "site ..." (at the allocated peak) and "reserved site ..."
                     // (at the reserved peak), each "changed", "new" or "vanished"
  std::string device, name;  // name: the site's label (empty for a device's values)
  int64_t a = 0, b = 0;
  int64_t delta() const { return b - a; }
};
std::vector<DiffRow> diff_rows(const analysis::TraceDiff& diff);

// Compare's differential flame graphs of one device (by name) of both traces: the compared
// trace's peak stacks with this trace's as the base (what grew), and this trace's with the
// compared one's as the base (what shrank).
struct FlameDiff {
  std::string device;
  analysis::FlameNode grown, shrunk;
};

// The details of the allocation at `addr` on `device` allocated at `alloc_ts` (absolute).
std::optional<analysis::AllocationDetails> find_allocation_details(const analysis::Trace& trace,
                                                                   int64_t device, uint64_t addr,
                                                                   uint64_t alloc_ts);

}  // namespace tidemark::gui
