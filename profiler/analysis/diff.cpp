#include "profiler/analysis/diff.h"

#include <algorithm>
#include <cstdlib>
#include <map>

namespace tidemark::analysis {

namespace {

using SiteMap = std::map<std::string, Group>;

SiteMap by_key(std::vector<Group> groups) {
  SiteMap out;
  for (Group& g : groups) out[g.key] = std::move(g);
  return out;
}

// What was live at a device's allocated peak, by site and by category.
struct AtPeak {
  SiteMap sites, categories;
};
AtPeak at_peak(const Trace& t, const DeviceRef* device, GroupBy by) {
  if (!device) return {};
  auto at = peak_point(t, device->id);
  if (!at) return {};
  return {by_key(live_at(t, device->id, *at, by, 0).groups),
          by_key(live_at(t, device->id, *at, GroupBy::category, 0).groups)};
}

SiteMap reserved_sites_at_peak(const Trace& t, const DeviceRef* device) {
  if (!device) return {};
  auto b = reserved_at_peak(t, device->id, 0);
  return b ? by_key(std::move(b->groups)) : SiteMap{};
}

void sort_by_delta(std::vector<SiteDiff>& v) {
  std::sort(v.begin(), v.end(), [](const SiteDiff& x, const SiteDiff& y) {
    int64_t dx = std::llabs(x.delta()), dy = std::llabs(y.delta());
    return dx != dy ? dx > dy : x.key < y.key;
  });
}

// Sites of A and B: changed (both, with another size or count), new (only in B), vanished (only
// in A), each sorted by |delta| descending.
TraceDiff::Sites compare_sites(const std::string& device, const SiteMap& sa, const SiteMap& sb) {
  TraceDiff::Sites s;
  s.device = device;
  for (const auto& [key, g] : sa) {
    SiteDiff x{key, g.label, g.bytes, 0, g.count, 0};
    auto it = sb.find(key);
    if (it == sb.end()) {
      s.vanished.push_back(x);
    } else {
      x.b_bytes = it->second.bytes;
      x.b_count = it->second.count;
      x.label = it->second.label;
      if (x.delta() != 0 || x.a_count != x.b_count) s.changed.push_back(x);
    }
  }
  for (const auto& [key, g] : sb)
    if (!sa.count(key)) s.added.push_back({key, g.label, 0, g.bytes, 0, g.count});
  sort_by_delta(s.changed);
  sort_by_delta(s.added);
  sort_by_delta(s.vanished);
  return s;
}

}  // namespace

TraceDiff diff(const Trace& a, const Trace& b, GroupBy by) {
  TraceDiff d;
  d.a_path = a.path();
  d.b_path = b.path();
  for (const DeviceMatch& m : match_devices(a, b)) {  // Note [Matching devices]
    DeviceDiff dd;
    dd.device = m.name;
    if (m.a) dd.a = summarize_device(a, *m.a);
    if (m.b) dd.b = summarize_device(b, *m.b);
    auto val = [](const std::optional<DeviceSummary>& s, int64_t DeviceSummary::*field) {
      return s ? (*s).*field : 0;
    };
    dd.peak_allocated_delta = val(dd.b, &DeviceSummary::peak_allocated_bytes) -
                              val(dd.a, &DeviceSummary::peak_allocated_bytes);
    dd.peak_reserved_delta = val(dd.b, &DeviceSummary::peak_reserved_bytes) -
                             val(dd.a, &DeviceSummary::peak_reserved_bytes);
    dd.final_allocated_delta = val(dd.b, &DeviceSummary::final_allocated_bytes) -
                               val(dd.a, &DeviceSummary::final_allocated_bytes);
    d.devices.push_back(std::move(dd));

    AtPeak pa = at_peak(a, m.a, by), pb = at_peak(b, m.b, by);
    d.sites.push_back(compare_sites(m.name, pa.sites, pb.sites));
    // Programs that tag no category have `unknown` only: the peaks' difference again.
    SiteMap& ca = pa.categories;
    SiteMap& cb = pb.categories;
    auto untagged = [](const SiteMap& m) {
      return std::all_of(m.begin(), m.end(), [](const auto& kv) { return kv.first == "unknown"; });
    };
    if (untagged(ca) && untagged(cb)) ca.clear(), cb.clear();
    d.categories.push_back(compare_sites(m.name, ca, cb));
    d.reserved_sites.push_back(
        compare_sites(m.name, reserved_sites_at_peak(a, m.a), reserved_sites_at_peak(b, m.b)));
  }
  return d;
}

}  // namespace tidemark::analysis
