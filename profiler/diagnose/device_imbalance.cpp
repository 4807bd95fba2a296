// device-imbalance (profiler/diagnose/diagnose.h): one process's devices doing the same work
// with very different memory. docs/diagnoses.md gives its evidence and thresholds.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "profiler/analysis/memory.h"
#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"
#include "profiler/store/event_tables.h"

namespace tidemark::diagnose::detail {

namespace {

constexpr double kImbalanceRatio = 2.0;       // the heaviest peak over the lightest
constexpr int64_t kMinImbalance = 1LL << 30;  // bytes between them
constexpr double kMinSharedSiteShare = 0.25;  // of each light peak, from the heavy one's top site

}  // namespace

// Note [Device imbalance]: DataParallel (and any split of a batch across one process's devices)
// runs the same code on every device; when its shards differ in size (a split by graph count
// of graphs of very different sizes, a last shard of another size), so do the devices' peaks,
// and the heaviest runs out first while the others sit mostly empty. The devices are replicas
// when the site holding the most at the heaviest device's allocated peak holds at least
// kMinSharedSiteShare of each other device's peak (a model split across devices -- pipeline
// or tensor parallelism -- has different code on each, and is no imbalance). The finding: the
// heaviest peak at least kImbalanceRatio times the lightest replica's and kMinImbalance above
// it. Devices of other ranks (a merged trace) are rank-imbalance's. Severity follows the
// heavy device's stakes: major when it ran out of memory (an `oom` on it).
void detect_device_imbalance(const Trace& trace, Diagnosis& out) {
  struct Dev {
    const DeviceRef* ref;
    int64_t peak = 0;
    std::map<std::string, int64_t> sites;  // bytes live at its peak, by site key
  };
  std::vector<Dev> devs;
  for (const DeviceRef& d : trace.devices()) {
    if (d.rank || state_only(trace, d.id)) continue;
    const std::optional<TimePoint> at = peak_point(trace, d.id);
    const std::optional<store::Peak> pk = peak(trace, d.id, store::Curve::allocated);
    if (!at || !pk || pk->bytes <= 0) continue;
    Dev dev{&d, pk->bytes, {}};
    for (const store::AllocationRow& r : live_allocations(trace, d.id, *at))
      if (r.stack_id) dev.sites[trace.site(r.stack_id).key] += static_cast<int64_t>(r.size);
    devs.push_back(std::move(dev));
  }
  if (devs.size() < 2) return;
  const auto heavy = std::max_element(devs.begin(), devs.end(),
                                      [](const Dev& a, const Dev& b) { return a.peak < b.peak; });
  std::string top;
  int64_t top_bytes = 0;
  for (const auto& [key, bytes] : heavy->sites)
    if (bytes > top_bytes) top = key, top_bytes = bytes;
  if (top.empty()) return;
  const Dev* light = nullptr;
  std::vector<std::string> peaks;
  for (const Dev& d : devs) {
    peaks.push_back(d.ref->name + " " + format_bytes(d.peak));
    if (&d == &*heavy) continue;
    const auto it = d.sites.find(top);
    if (it == d.sites.end() ||
        static_cast<double>(it->second) < kMinSharedSiteShare * static_cast<double>(d.peak))
      continue;  // not a replica
    if (!light || d.peak < light->peak) light = &d;
  }
  if (!light ||
      static_cast<double>(heavy->peak) < kImbalanceRatio * static_cast<double>(light->peak) ||
      heavy->peak - light->peak < kMinImbalance)
    return;
  const auto ooms =
      static_cast<int64_t>(store::allocator_events(trace.reader(), "oom", heavy->ref->id).size());
  std::string site_label;
  uint64_t site_stack = 0;
  for (const store::AllocationRow& r :
       live_allocations(trace, heavy->ref->id, *peak_point(trace, heavy->ref->id)))
    if (r.stack_id && trace.site(r.stack_id).key == top) {
      site_stack = r.stack_id;
      break;
    }
  Finding f;
  f.id = "device-imbalance";
  f.device = heavy->ref->name;
  f.bytes = heavy->peak - light->peak;
  if (ooms > 0) f.severity = Severity::major;  // the heavy device is the one that failed
  std::string list;
  for (const std::string& p : peaks) list += (list.empty() ? "" : ", ") + p;
  f.title = heavy->ref->name + " peaks at " + format_bytes(heavy->peak) + ", " +
            ratio_text(static_cast<double>(heavy->peak) / static_cast<double>(light->peak)) +
            " what " + light->ref->name + " needs for the same code" +
            (ooms > 0 ? ", and is the one that ran out of memory" : "");
  set_site(trace, site_stack, f);
  f.evidence = {
      {"allocated peaks", list},
      {"difference", bytes_text(heavy->peak - light->peak)},
      {"top site at " + heavy->ref->name + "'s peak",
       trace.site(site_stack).label + ": " + bytes_text(top_bytes)},
      {"the same site at " + light->ref->name + "'s peak", bytes_text(light->sites.at(top))}};
  if (ooms > 0)
    f.evidence.push_back({"out-of-memory errors on " + heavy->ref->name, std::to_string(ooms)});
  f.fix =
      "Give the devices shards of equal work, not of equal count: split the batch by its size in "
      "memory (edges "
      "or tokens per shard, not graphs or samples), or bucket inputs of similar size together; "
      "DistributedDataParallel with one process per device makes each device's batch explicit.";
  out.findings.push_back(std::move(f));
}

}  // namespace tidemark::diagnose::detail
