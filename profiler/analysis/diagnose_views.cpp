// Detectors of views and copies (profiler/analysis/diagnose.h): view-retention and
// copy-instead-of-view. Both read the tensors and storages tables; an imported snapshot has
// neither, so they skip it.
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "profiler/analysis/diagnose_allocator_support.h"
#include "profiler/analysis/memory.h"
#include "profiler/store/tensor_tables.h"

namespace tidemark::analysis::detail {

namespace {

struct TensorRow {
  uint64_t tensor_id = 0, storage_id = 0, base_id = 0;
  int64_t device = 0;
  std::vector<int64_t> sizes, strides;
  int64_t storage_offset = 0;
  std::string dtype, op;
  uint64_t create_ts = 0;
  std::optional<uint64_t> release_ts;
  uint64_t thread = 0, stack = 0;
};

std::vector<int64_t> parse_ints(const std::string& json) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (i < json.size()) {
    if (json[i] == '-' || (json[i] >= '0' && json[i] <= '9')) {
      size_t end = 0;
      out.push_back(std::stoll(json.substr(i), &end));
      i += end;
    } else {
      ++i;
    }
  }
  return out;
}

int64_t item_size(const std::string& dtype) {
  if (dtype == "float64" || dtype == "int64" || dtype == "complex64") return 8;
  if (dtype == "float16" || dtype == "bfloat16" || dtype == "int16") return 2;
  if (dtype == "uint8" || dtype == "int8" || dtype == "bool") return 1;
  if (dtype == "complex128") return 16;
  return 4;  // float32, int32
}

int64_t numel(const TensorRow& t) {
  int64_t n = 1;
  for (int64_t s : t.sizes) n *= s;
  return n;
}

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

bool is_contiguous(const TensorRow& t) {
  int64_t expected = 1;
  for (size_t i = t.sizes.size(); i-- > 0;) {
    if (t.sizes[i] == 1) continue;
    if (i >= t.strides.size() || t.strides[i] != expected) return false;
    expected *= t.sizes[i];
  }
  return true;
}

std::string ints_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::vector<TensorRow> load_tensors(const Trace& trace) {
  std::vector<TensorRow> out;
  store::for_each_tensor(trace.reader(), {}, [&](store::TensorRow& r) {
    TensorRow t;
    t.tensor_id = r.tensor_id;
    t.storage_id = r.storage_id;
    t.base_id = r.base_id;
    t.device = r.device;
    t.sizes = parse_ints(r.sizes);
    t.strides = parse_ints(r.strides);
    t.storage_offset = r.storage_offset;
    t.dtype = std::move(r.dtype);
    t.op = std::move(r.op);
    t.create_ts = r.create_ts;
    t.release_ts = r.release_ts;
    t.thread = r.thread;
    t.stack = r.stack_id;
    out.push_back(std::move(t));
  });
  return out;
}

bool skip_without_tensors(const Trace& trace, const char* id, Diagnosis& out) {
  if (store::any_tensor(trace.reader())) return false;
  out.skipped.push_back({id,
                         "the trace has no tensor records (an imported allocator snapshot, or a "
                         "recording without tensor events)"});
  return true;
}

// Note [Diagnosis thresholds: relative to the device's peak]: a finding must be worth at
// least 1% of the device's allocated peak, so a program's incidental views and copies, a few
// KiB beside hundreds of MiB, are not reported; the pitfalls the detectors name cost tens of
// percent.
int64_t one_percent_of_peak(const Trace& trace, int64_t device) {
  std::optional<store::Peak> p = peak(trace, device, store::Curve::allocated);
  return p ? p->bytes / 100 : 0;
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

// Note [Copy instead of view]: contiguous() of a non-contiguous tensor, like clone(), records
// a tensor with op "clone" and no base (tensorlib/core/views.cpp: contiguous() calls clone()),
// so the copy's source is found by position: a transpose/permute/t view created on the same
// thread within the 4 tensor creations before the copy, with the copy's sizes and
// non-contiguous strides (the pattern `x.t().contiguous()`, `x.permute(...).clone()`). Only
// copies above kSmallSize (1 MiB, the allocator's large-pool boundary) count, and a site is
// reported when its largest copy is worth 1% of the device's allocated peak (Note [Diagnosis
// thresholds: relative to the device's peak]). The bytes at stake are the largest copy: the
// extra memory one step holds at once.
void detect_copy_instead_of_view(const Trace& trace, Diagnosis& out) {
  if (skip_without_tensors(trace, "copy-instead-of-view", out)) return;
  const std::vector<TensorRow> tensors = load_tensors(trace);  // by create_ts
  std::map<uint64_t, std::vector<const TensorRow*>> by_thread;
  for (const TensorRow& t : tensors) by_thread[t.thread].push_back(&t);
  const std::vector<uint64_t> steps = step_times(trace);
  constexpr size_t kLookBack = 4;  // tensor creations between the view and its copy

  struct SiteSum {
    int64_t device = 0;
    uint64_t stack = 0;
    int64_t count = 0, total = 0, largest = 0;
    std::map<int64_t, int64_t> per_step;  // step index (-1: before the first) -> copies
    const TensorRow* source = nullptr;
  };
  std::map<std::pair<int64_t, std::string>, SiteSum> sites;
  for (const auto& [thread, list] : by_thread) {
    for (size_t i = 0; i < list.size(); ++i) {
      const TensorRow& c = *list[i];
      if (c.op != "clone" && c.op != "contiguous") continue;
      const int64_t bytes = numel(c) * item_size(c.dtype);
      if (bytes <= kSmallSize) continue;
      const TensorRow* source = nullptr;
      for (size_t k = 1; k <= kLookBack && k <= i; ++k) {
        const TensorRow& v = *list[i - k];
        if ((v.op == "transpose" || v.op == "permute" || v.op == "t") && v.sizes == c.sizes &&
            !is_contiguous(v)) {
          source = &v;
          break;
        }
      }
      if (!source) continue;
      SiteSum& s = sites[{c.device, trace.site(c.stack).key}];
      if (!s.source) {
        s.source = source;
        s.stack = c.stack;
        s.device = c.device;
      }
      s.count += 1;
      s.total += bytes;
      s.largest = std::max(s.largest, bytes);
      const auto step = std::upper_bound(steps.begin(), steps.end(), c.create_ts) - steps.begin();
      s.per_step[static_cast<int64_t>(step) - 1] += 1;
    }
  }
  for (const auto& [key, s] : sites) {
    if (s.largest < one_percent_of_peak(trace, s.device)) continue;
    Finding f;
    f.id = "copy-instead-of-view";
    f.device = device_label(trace, s.device);
    f.bytes = s.largest;
    f.title = std::to_string(s.count) + " contiguous()/clone() cop" + (s.count == 1 ? "y" : "ies") +
              " of a " + s.source->op + " view (" + format_bytes(s.largest) +
              " each at most) where the view could be used directly";
    set_site(trace, s.stack, f);
    int64_t most = 0;
    for (const auto& [step, n] : s.per_step) most = std::max(most, n);
    f.evidence = {
        {"copies", std::to_string(s.count)},
        {"steps with copies", std::to_string(s.per_step.size())},
        {"copies per step (most)", std::to_string(most)},
        {"bytes copied", bytes_text(s.total)},
        {"largest copy", bytes_text(s.largest)},
        {"source view", s.source->op + " " + ints_text(s.source->sizes) + " strides " +
                            ints_text(s.source->strides)},
    };
    f.fix =
        "Pass the transposed/permuted view itself: matmul and most ops accept strided inputs "
        "(`matmul(a.t(), b)` instead of `matmul(a.t().contiguous(), b)`); copy only where an "
        "op truly needs a dense layout.";
    out.findings.push_back(std::move(f));
  }
}

}  // namespace tidemark::analysis::detail
