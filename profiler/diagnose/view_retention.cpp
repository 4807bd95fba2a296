// view-retention (profiler/diagnose/diagnose.h): a storage kept alive by views much smaller than
// it. It reads the tensors and storages tables; an imported snapshot has neither, so it skips
// it. docs/diagnoses.md gives its evidence and thresholds.
#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"
#include "profiler/store/tensor_tables.h"

namespace tidemark::diagnose::detail {

namespace {

// The bytes of the storage a tensor can reach: [offset, offset + span) elements.
std::pair<int64_t, int64_t> extent(const TensorRow& t) {
  const int64_t isz = item_size(t.dtype);
  if (numel(t) == 0) return {t.storage_offset * isz, t.storage_offset * isz};
  int64_t lo = t.storage_offset, hi = t.storage_offset + 1;
  for (size_t i = 0; i < t.sizes.size() && i < t.strides.size(); ++i) {
    const int64_t reach = (t.sizes[i] - 1) * t.strides[i];
    (reach < 0 ? lo : hi) += reach;
  }
  return {lo * isz, hi * isz};
}

}  // namespace

// Note [View retention]: a storage is retained by views when tensors reaching less than half
// of it (views, by their sizes, strides and offset) lived across a step boundary (in a trace
// without steps: for at least 1% of its duration) and every tensor reaching half of it or more
// (its owner, full-size views, detach()ed aliases) was released before the last such view or
// by it. A view holds its base TensorImpl (Note [Views and version counters]), so a base that
// only the view kept is released right after the view with no other tensor event between;
// a base released later for its own reasons was kept by the program, not by the view. The
// bytes held are the storage's size minus the union of what the views reach: memory nothing
// can read any more. Findings are per creation site of the retaining views (the earliest of
// each storage), summed over storages, and reported when the sum is worth 1% of the device's
// allocated peak (Note [Diagnosis thresholds: relative to the device's peak]).
void detect_view_retention(const Trace& trace, Diagnosis& out) {
  if (skip_without_tensors(trace, "view-retention", out)) return;
  std::map<uint64_t, std::vector<const TensorRow*>> by_storage;
  const std::vector<TensorRow> tensors = load_tensors(trace);
  for (const TensorRow& t : tensors) by_storage[t.storage_id].push_back(&t);
  const std::vector<uint64_t> steps = step_times(trace);
  std::vector<uint64_t> event_times;  // every tensor_create and tensor_release
  for (const TensorRow& t : tensors) {
    event_times.push_back(t.create_ts);
    if (t.release_ts) event_times.push_back(*t.release_ts);
  }
  std::sort(event_times.begin(), event_times.end());

  struct SiteSum {
    int64_t device = 0;
    uint64_t stack = 0;
    int64_t held = 0, storages = 0, storage_bytes = 0, view_bytes = 0;
    const TensorRow* example = nullptr;
    int64_t example_storage = 0;
    uint64_t longest_ns = 0;
  };
  std::map<std::pair<int64_t, std::string>, SiteSum> sites;
  std::vector<store::StorageRow> storages;
  store::for_each_storage(trace.reader(), [&](const store::StorageRow& s) {
    if (s.nbytes > 0 && by_storage.count(s.storage_id)) storages.push_back(s);
  });
  for (const store::StorageRow& storage : storages) {
    auto it = by_storage.find(storage.storage_id);
    const int64_t nbytes = storage.nbytes;
    const uint64_t storage_end = storage.release_ts.value_or(trace.end_ns());
    // The views that kept the storage: tensors reaching less than half of it that lived
    // across a step boundary (without steps: for 1% of the trace or more).
    std::vector<const TensorRow*> keepers;
    std::vector<std::pair<int64_t, int64_t>> reach;
    uint64_t last_view = 0;
    bool view_alive_at_end = false;
    for (const TensorRow* t : it->second) {
      auto [lo, hi] = extent(*t);
      if (2 * (hi - lo) >= nbytes) continue;
      const uint64_t until = t->release_ts.value_or(trace.end_ns());
      const bool spans_step = std::any_of(
          steps.begin(), steps.end(), [&](uint64_t s) { return s > t->create_ts && s <= until; });
      const bool long_enough = steps.empty() && (until - t->create_ts) * 100 >= trace.duration_ns();
      if (!spans_step && !long_enough) continue;
      keepers.push_back(t);
      reach.push_back({lo, hi});
      if (!t->release_ts) view_alive_at_end = true;
      last_view = std::max(last_view, until);
    }
    if (keepers.empty()) continue;
    // The tensors reaching most of the storage went away before the last view, or were
    // released by it: a view holds its base (Note [Views and version counters]), so a base
    // only the view kept is released right after the view, with no other tensor event
    // between. A base released later, for its own reasons, was kept by the program itself.
    bool kept_by_views = true;
    int64_t own_between = 0;
    uint64_t last_large = 0;
    for (const TensorRow* t : it->second) {
      auto [lo, hi] = extent(*t);
      if (2 * (hi - lo) < nbytes) continue;
      if (!t->release_ts) {
        kept_by_views = kept_by_views && view_alive_at_end;
        continue;
      }
      last_large = std::max(last_large, *t->release_ts);
    }
    if (!kept_by_views) continue;
    if (last_large > last_view) {
      for (const TensorRow* t : it->second)
        if (t->release_ts && *t->release_ts > last_view && *t->release_ts < last_large)
          ++own_between;
      const auto lo = std::upper_bound(event_times.begin(), event_times.end(), last_view);
      const auto hi = std::lower_bound(event_times.begin(), event_times.end(), last_large);
      if (hi - lo > own_between) continue;
    }
    std::sort(reach.begin(), reach.end());
    int64_t covered = 0, end = std::numeric_limits<int64_t>::min();
    for (auto [lo, hi] : reach) {
      lo = std::max({lo, end, int64_t{0}});
      hi = std::min(hi, nbytes);
      if (hi > lo) covered += hi - lo;
      end = std::max(end, hi);
    }
    if (2 * covered >= nbytes) continue;
    const TensorRow* keeper = keepers.front();
    SiteSum& s = sites[{keeper->device, trace.site(keeper->stack).key}];
    if (!s.example) {
      s.example = keeper;
      s.example_storage = nbytes;
      s.stack = keeper->stack;
      s.device = keeper->device;
    }
    s.held += nbytes - covered;
    s.storages += 1;
    s.storage_bytes += nbytes;
    s.view_bytes += covered;
    s.longest_ns = std::max(s.longest_ns, storage_end - keeper->create_ts);
  }
  for (const auto& [key, s] : sites) {
    if (s.held < std::max<int64_t>(1, one_percent_of_peak(trace, s.device))) continue;
    Finding f;
    f.id = "view-retention";
    f.device = device_label(trace, s.device);
    f.bytes = s.held;
    f.title = "small views keep " + std::to_string(s.storages) + " storage" +
              (s.storages == 1 ? "" : "s") + " of " + format_bytes(s.storage_bytes) +
              " alive after their tensors were released";
    set_site(trace, s.stack, f);
    const TensorRow& v = *s.example;
    f.evidence = {
        {"storages retained by views", std::to_string(s.storages)},
        {"storage bytes retained", bytes_text(s.storage_bytes)},
        {"bytes the views reach", bytes_text(s.view_bytes)},
        {"bytes held that no view reaches", bytes_text(s.held)},
        {"example view", (v.op.empty() ? std::string("view") : v.op) + " " + ints_text(v.sizes) +
                             " " + v.dtype + " of a " + format_bytes(s.example_storage) +
                             " storage"},
        {"longest a view kept a storage", format_duration(s.longest_ns)},
    };
    f.fix =
        "Keep a copy of just the part you need (`view.clone()`; in PyTorch `t[0].clone()`) so "
        "the large storage can be freed, or drop the views once used.";
    out.findings.push_back(std::move(f));
  }
}

}  // namespace tidemark::diagnose::detail
