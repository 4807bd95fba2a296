// The diagnoses' one list (diagnose.h): every detector with its id and pitfall, in the order
// `tidemark diagnose` runs them and `--only` names them; each one's rule is a Note in the file
// named by its id.
#include "profiler/diagnose/diagnose.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <stdexcept>

#include "profiler/analysis/memory.h"
#include "profiler/analysis/trace.h"
#include "profiler/diagnose/detectors.h"
#include "profiler/store/allocator_tables.h"
#include "profiler/store/event_tables.h"

namespace tidemark::diagnose {

using analysis::DeviceRef;
using analysis::Trace;

namespace {

struct Detector {
  DetectorInfo info;
  detail::DetectorFn fn;
};

constexpr Detector kDetectors[] = {
    {{"graph-retention",
      "activation memory that survives backward and grows across steps (an accumulated loss)"},
     detail::detect_graph_retention},
    {{"view-retention", "a storage kept alive by a view much smaller than it"},
     detail::detect_view_retention},
    {{"retained-graph", "backward with retain_graph keeping saved tensors past the step"},
     detail::detect_retained_graph},
    {{"grad-in-eval", "activations saved for backward during evaluation or inference"},
     detail::detect_grad_in_eval},
    // Each detector's rule is a Note beside it, e.g. Note [Activation-dominated peak],
    // Note [Copy instead of view], Note [Pinned growth], Note [Device imbalance].
    {{"activation-peak",
      "a peak made mostly of activations: the layers holding them and what checkpointing saves"},
     detail::detect_activation_peak},
    {{"sync-in-loop", "the same site forcing a host-device sync in every step"},
     detail::detect_sync_in_loop},
    {{"fragmentation", "reserved memory far above allocated at the peak or at an OOM"},
     detail::detect_fragmentation},
    {{"oom", "an out-of-memory error, explained: shortage or fragmentation, and what was live"},
     detail::detect_oom},
    {{"cache-held", "reserved memory held long after allocations fell"}, detail::detect_cache_held},
    {{"leak", "memory live at the end, or growing linearly across steps"}, detail::detect_leak},
    {{"copy-instead-of-view",
      "large contiguous()/clone() copies made right after transpose/permute"},
     detail::detect_copy_instead_of_view},
    {{"pinned-growth", "pinned host memory or prefetched input growing with DataLoader workers"},
     detail::detect_pinned_growth},
    {{"optimizer-peak",
      "the optimizer step's temporaries setting the peak (foreach AdamW, out-of-place updates)"},
     detail::detect_optimizer_peak},
    {{"attention-peak",
      "attention's B x H x S x S score and softmax tensors setting the peak (no fused kernel)"},
     detail::detect_attention_peak},
    {{"autocast-cache",
      "autocast's 16-bit copies of float32 weights, cached for the region and saved for "
      "backward"},
     detail::detect_autocast_cache},
    {{"stale-grads",
      "the last step's gradients alive through the next forward (zero_grad after it, or "
      "set_to_none=False)"},
     detail::detect_stale_grads},
    {{"kept-graph",
      "a forward's graph kept alive, unused, under later steps (a warm-up or evaluation output "
      "still referenced)"},
     detail::detect_kept_graph},
    {{"hook-leak",
      "module outputs kept alive by forward hooks that are never removed or never cleared"},
     detail::detect_hook_leak},
    {{"cache-thrash",
      "segments freed and reserved again and again (cache flushes, one cache per stream)"},
     detail::detect_cache_thrash},
    {{"device-imbalance", "one process's devices running the same code with very different peaks"},
     detail::detect_device_imbalance},
    {{"rank-imbalance",
      "one rank of a distributed run peaking well above the others (Note [Rank imbalance])"},
     detail::detect_rank_imbalance},
    {{"allocator-settings",
      "allocator settings (PYTORCH_CUDA_ALLOC_CONF) that would lower the reserved peak or "
      "avoid an OOM, measured by replay"},
     detail::detect_allocator_settings},
};

}  // namespace

std::vector<DetectorInfo> detectors() {
  std::vector<DetectorInfo> v;
  for (const Detector& d : kDetectors) v.push_back(d.info);
  return v;
}

std::string_view severity_name(Severity s) {
  switch (s) {
    case Severity::major:
      return "major";
    case Severity::moderate:
      return "moderate";
    case Severity::minor:
      break;
  }
  return "minor";
}

namespace {

// Note [Severity]: whether memory decides if the run fits on a device (the finding's, or any
// when it names none): it ran out, or came within kNearCapacityShare of its capacity.
bool at_the_limit(const Trace& trace, const std::string& device) {
  for (const DeviceRef& d : trace.devices()) {
    if (!device.empty() && d.name != device) continue;
    if (!store::allocator_events(trace.reader(), "oom", d.id).empty() ||
        !store::allocator_events(trace.reader(), "alloc_retry", d.id).empty())
      return true;
    const std::optional<store::Peak> p = peak(trace, d.id, store::Curve::reserved);
    if (d.capacity > 0 && p &&
        static_cast<double>(p->bytes) >= kNearCapacityShare * static_cast<double>(d.capacity))
      return true;
  }
  return false;
}

// Note [Severity]: the share of the run a finding puts at stake, and its severity.
void rate(const Trace& trace, Finding& f) {
  double memory = 0, time = 0;  // the shares of the peak and of the run
  if (f.bytes > 0) {
    // The device's peak reserved memory (the highest device's when the finding names none).
    int64_t base = 0;
    for (const DeviceRef& d : trace.devices()) {
      if (!f.device.empty() && d.name != f.device) continue;
      for (store::Curve c : {store::Curve::reserved, store::Curve::allocated})
        if (std::optional<store::Peak> p = peak(trace, d.id, c)) base = std::max(base, p->bytes);
    }
    memory = base > 0 ? static_cast<double>(f.bytes) / static_cast<double>(base) : 1.0;
  }
  if (f.time_ns > 0)
    time = static_cast<double>(f.time_ns) /
           static_cast<double>(std::max<uint64_t>(1, trace.duration_ns()));
  f.share = std::max(memory, time);
  auto by = [](double share, double major, double moderate) {
    return share >= major      ? Severity::major
           : share >= moderate ? Severity::moderate
                               : Severity::minor;
  };
  Severity by_memory =
      f.bytes > 0 ? by(memory, kMajorMemoryShare, kModerateMemoryShare) : Severity::minor;
  if (by_memory == Severity::major && !at_the_limit(trace, f.device))
    by_memory = Severity::moderate;  // memory is major only where the run is at the limit
  const Severity by_time =
      f.time_ns > 0 ? by(time, kMajorTimeShare, kModerateTimeShare) : Severity::minor;
  f.severity = std::max({f.severity, by_memory, by_time});
}

}  // namespace

Diagnosis diagnose(const Trace& trace, const std::set<std::string>& only, bool include_minor) {
  for (const std::string& id : only) {
    bool known = std::any_of(std::begin(kDetectors), std::end(kDetectors),
                             [&](const Detector& e) { return e.info.id == id; });
    if (!known) {
      std::string ids;
      for (const Detector& e : kDetectors)
        ids += (ids.empty() ? "" : ", ") + std::string(e.info.id);
      throw std::invalid_argument("unknown finding id '" + id + "' (known: " + ids + ")");
    }
  }
  Diagnosis d;
  for (const Detector& e : kDetectors)
    if (only.empty() || only.count(std::string(e.info.id))) e.fn(trace, d);
  for (Finding& f : d.findings) rate(trace, f);
  if (!include_minor) {
    const auto minor = std::remove_if(d.findings.begin(), d.findings.end(), [](const Finding& f) {
      return f.severity == Severity::minor;
    });
    d.minor_hidden = static_cast<size_t>(d.findings.end() - minor);
    d.findings.erase(minor, d.findings.end());
  }
  std::stable_sort(d.findings.begin(), d.findings.end(), [](const Finding& a, const Finding& b) {
    if (a.severity != b.severity) return a.severity > b.severity;
    return a.share > b.share;
  });
  return d;
}

}  // namespace tidemark::diagnose
