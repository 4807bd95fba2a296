// The ranks of a run side by side (ranks.h).
#include "profiler/analysis/ranks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "profiler/analysis/merge.h"
#include "profiler/store/meta_keys.h"

namespace tidemark::analysis {

namespace {

std::map<std::string, const Group*> by_key(const std::vector<Group>& groups) {
  std::map<std::string, const Group*> m;
  for (const Group& g : groups) m[g.key] = &g;
  return m;
}

// The group that grew most from `low` to `high` (empty when none grew).
std::optional<GroupDelta> largest_growth(const std::vector<Group>& high,
                                         const std::vector<Group>& low) {
  const auto lows = by_key(low);
  std::optional<GroupDelta> best;
  for (const Group& g : high) {
    auto it = lows.find(g.key);
    GroupDelta d{g.key, g.label, g.bytes, it == lows.end() ? 0 : it->second->bytes};
    if (d.delta() > 0 && (!best || d.delta() > best->delta())) best = d;
  }
  return best;
}

std::vector<Group> groups_at_peak(const RankDevice& d, store::Curve curve, GroupBy by) {
  if (curve == store::Curve::reserved) {
    std::optional<LiveBreakdown> r = reserved_at_peak(*d.trace, d.ref->id, 0);
    return r ? r->groups : std::vector<Group>{};
  }
  std::optional<TimePoint> at = peak_point(*d.trace, d.ref->id);
  if (!at) return {};
  return live_at(*d.trace, d.ref->id, *at, by, 0).groups;
}

int64_t peak_bytes(const RankDevice& d, store::Curve curve) {
  std::optional<store::Peak> p = peak(*d.trace, d.ref->id, curve);
  return p ? p->bytes : 0;
}

}  // namespace

std::optional<int64_t> trace_rank(const Trace& trace) {
  if (std::optional<int64_t> r = trace.meta_int(store::meta_keys::kRank)) return r;
  if (!trace.meta_text(store::meta_keys::kMergedRanks).empty()) return std::nullopt;
  return rank_from_file_name(trace.path());
}

std::vector<RankDevice> rank_devices(const std::vector<RankedTrace>& traces) {
  std::vector<RankDevice> out;
  for (const RankedTrace& t : traces)
    for (const DeviceRef& d : t.trace->devices()) out.push_back({t.rank, d.name, t.trace, &d});
  return out;
}

std::vector<RankDevice> rank_devices(const Trace& merged) {
  std::vector<RankDevice> out;
  for (const DeviceRef& d : merged.devices())
    if (d.rank) out.push_back({*d.rank, d.local_name, &merged, &d});
  return out;
}

double RankSpread::ratio() const {
  if (low_bytes > 0) return static_cast<double>(high_bytes) / static_cast<double>(low_bytes);
  return high_bytes > 0 ? std::numeric_limits<double>::infinity() : 1.0;
}

std::vector<RankSpread> rank_spreads(const std::vector<RankDevice>& devices) {
  std::vector<std::string> names;  // in the order first seen
  for (const RankDevice& d : devices)
    if (std::find(names.begin(), names.end(), d.device) == names.end()) names.push_back(d.device);
  std::vector<RankSpread> out;
  for (const std::string& name : names) {
    std::vector<const RankDevice*> of;
    for (const RankDevice& d : devices)
      if (d.device == name) of.push_back(&d);
    if (of.size() < 2) continue;
    std::sort(of.begin(), of.end(), [](auto* a, auto* b) { return a->rank < b->rank; });
    for (store::Curve curve : {store::Curve::allocated, store::Curve::reserved}) {
      RankSpread s;
      s.device = name;
      s.curve = curve;
      const RankDevice *high = nullptr, *low = nullptr;
      for (const RankDevice* d : of) {
        const int64_t b = peak_bytes(*d, curve);
        s.peaks.emplace_back(d->rank, b);
        if (!high || b > s.high_bytes) high = d, s.high_bytes = b;  // the first rank on ties
        if (!low || b < s.low_bytes) low = d, s.low_bytes = b;
      }
      s.high_rank = high->rank;
      s.low_rank = low->rank;
      if (s.high_bytes > s.low_bytes) {
        s.site = largest_growth(groups_at_peak(*high, curve, GroupBy::site),
                                groups_at_peak(*low, curve, GroupBy::site));
        if (curve == store::Curve::allocated)
          s.category = largest_growth(groups_at_peak(*high, curve, GroupBy::category),
                                      groups_at_peak(*low, curve, GroupBy::category));
      }
      out.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace tidemark::analysis
