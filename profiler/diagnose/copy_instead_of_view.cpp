// copy-instead-of-view (profiler/diagnose/diagnose.h): large contiguous()/clone() copies made
// right after a transpose or permute. It reads the tensors table; an imported snapshot has
// none, so it skips it. docs/diagnoses.md gives its evidence and thresholds.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"

namespace tidemark::diagnose::detail {

namespace {

bool is_contiguous(const TensorRow& t) {
  int64_t expected = 1;
  for (size_t i = t.sizes.size(); i-- > 0;) {
    if (t.sizes[i] == 1) continue;
    if (i >= t.strides.size() || t.strides[i] != expected) return false;
    expected *= t.sizes[i];
  }
  return true;
}

}  // namespace

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

}  // namespace tidemark::diagnose::detail
