#include "profiler/analysis/diagnose.h"

#include <algorithm>
#include <functional>
#include <mutex>
#include <stdexcept>

#include "profiler/analysis/steps.h"
#include "profiler/analysis/trace.h"

namespace tidemark::analysis {

namespace {

struct Entry {
  DetectorInfo info;
  std::function<void(const Trace&, Diagnosis&)> fn;
};

std::mutex g_registry_mu;

// Guarded by g_registry_mu.
std::vector<Entry>& registry() {
  static std::vector<Entry> entries = {
      {{"graph-retention",
        "activation memory that survives backward and grows across steps (an accumulated loss)"},
       detail::detect_graph_retention},
      {{"view-retention", "a storage kept alive by a view much smaller than it"},
       detail::detect_view_retention},
      {{"retained-graph", "backward with retain_graph keeping saved tensors past the step"},
       detail::detect_retained_graph},
      {{"grad-in-eval", "activations saved for backward during evaluation or inference"},
       detail::detect_grad_in_eval},
      {{"activation-peak",
        "a peak made mostly of activations: the layers holding them and what checkpointing saves"},
       detail::detect_activation_peak},
      {{"sync-in-loop", "the same site forcing a host-device sync in every step"},
       detail::detect_sync_in_loop},
      {{"fragmentation", "reserved memory far above allocated at the peak or at an OOM"},
       detail::detect_fragmentation},
      {{"oom", "an out-of-memory error, explained: shortage or fragmentation, and what was live"},
       detail::detect_oom},
      {{"cache-held", "reserved memory held long after allocations fell"},
       detail::detect_cache_held},
      {{"leak", "memory live at the end, or growing linearly across steps"}, detail::detect_leak},
      {{"copy-instead-of-view",
        "large contiguous()/clone() copies made right after transpose/permute"},
       detail::detect_copy_instead_of_view},
      {{"pinned-growth", "pinned host memory or prefetched input growing with DataLoader workers"},
       detail::detect_pinned_growth},
  };
  return entries;
}

}  // namespace

std::vector<DetectorInfo> detectors() {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  std::vector<DetectorInfo> v;
  for (const Entry& e : registry()) v.push_back(e.info);
  return v;
}

void add_detector(DetectorInfo info, std::function<void(const Trace&, Diagnosis&)> fn) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  for (const Entry& e : registry())
    if (e.info.id == info.id) return;
  registry().push_back({info, std::move(fn)});
}

Diagnosis diagnose(const Trace& trace, const std::set<std::string>& only) {
  std::vector<Entry> entries;
  {
    std::lock_guard<std::mutex> lock(g_registry_mu);
    entries = registry();
  }
  for (const std::string& id : only) {
    bool known = std::any_of(entries.begin(), entries.end(),
                             [&](const Entry& e) { return e.info.id == id; });
    if (!known) {
      std::string ids;
      for (const Entry& e : entries) ids += (ids.empty() ? "" : ", ") + std::string(e.info.id);
      throw std::invalid_argument("unknown finding id '" + id + "' (known: " + ids + ")");
    }
  }
  Diagnosis d;
  for (const Entry& e : entries)
    if (only.empty() || only.count(std::string(e.info.id))) e.fn(trace, d);
  std::stable_sort(d.findings.begin(), d.findings.end(), [](const Finding& a, const Finding& b) {
    // Memory findings by bytes; time findings rank by their wait as if 1 ns were 1 byte.
    const int64_t wa = std::max<int64_t>(a.bytes, static_cast<int64_t>(a.time_ns));
    const int64_t wb = std::max<int64_t>(b.bytes, static_cast<int64_t>(b.time_ns));
    return wa > wb;
  });
  return d;
}

void detail::note_inferred(const Trace& t, Finding& f) {
  if (!t.categories_inferred().empty())
    f.evidence.push_back({"categories", "inferred, not recorded (from " + t.categories_inferred() + ")"});
  if (std::optional<std::string> s = steps_inferred_from(t))
    f.evidence.push_back({"steps", "inferred, not recorded (from " + *s + ")"});
}

}  // namespace tidemark::analysis
