#include "profiler/analysis/bands.h"

#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <utility>

#include "profiler/analysis/memory.h"
#include "profiler/store/allocator_tables.h"

namespace tidemark::analysis {

namespace {

constexpr size_t kCheckpoint = 128;  // changes between stored snapshots of every band
constexpr size_t kMaxBands = 255;    // a band index fits the low byte of a change

constexpr events::Category kCategoryOrder[] = {
    events::Category::parameter,   events::Category::gradient, events::Category::optimizer_state,
    events::Category::activation,  events::Category::input,    events::Category::temporary,
    events::Category::comm_buffer, events::Category::unknown};

int band_of(int64_t change) {
  return static_cast<int>(change & 0xff);
}
int64_t delta_of(int64_t change) {
  return change >> 8;  // arithmetic shift (C++20)
}

}  // namespace

std::string_view band_by_name(BandBy by) {
  return by == BandBy::category ? "category" : "site";
}

void Bands::seek(size_t n, size_t& at_n, std::vector<int64_t>& values) const {
  const size_t nb = size();
  // Forward within reach: apply the changes; otherwise restart from the checkpoint below n.
  if (n < at_n || n - at_n > kCheckpoint) {
    const size_t k = n / kCheckpoint;
    std::copy_n(checkpoints_.begin() + static_cast<ptrdiff_t>(k * nb), nb, values.begin());
    at_n = k * kCheckpoint;
  }
  for (; at_n < n; ++at_n) {
    const int64_t c = changes_[at_n].change;
    values[size_t(band_of(c))] += delta_of(c);
  }
}

std::vector<int64_t> Bands::at(uint64_t ts) const {
  std::vector<int64_t> values(size(), 0);
  if (size() == 0) return values;
  const auto it = std::upper_bound(changes_.begin(), changes_.end(), ts,
                                   [](uint64_t t, const Change& c) { return t < c.ts; });
  const size_t n = size_t(it - changes_.begin());
  size_t at_n = 0;
  seek(n, at_n, values);
  return values;
}

BandColumns Bands::columns(uint64_t from_ts, uint64_t to_ts, size_t width,
                           uint64_t bucket_ns) const {
  BandColumns c;
  width = std::max<size_t>(1, width);
  c.from_ts = from_ts;
  c.to_ts = std::max(to_ts, from_ts + 1);
  c.column_ns = std::max<uint64_t>(1, (c.to_ts - c.from_ts) / width);
  c.values.assign(size(), std::vector<int64_t>(width, 0));
  if (size() == 0) return c;
  std::vector<int64_t> values(size(), 0);
  size_t at_n = 0;
  auto from = changes_.begin();
  for (size_t col = 0; col < width; ++col) {
    uint64_t end = col + 1 == width ? c.to_ts : c.from_ts + (col + 1) * c.column_ns;
    if (bucket_ns > 1)
      end = (end - 1) / bucket_ns * bucket_ns + bucket_ns;  // its last bucket's end
    // The changes before that instant.
    from = std::lower_bound(from, changes_.end(), end,
                            [](const Change& ch, uint64_t t) { return ch.ts < t; });
    seek(size_t(from - changes_.begin()), at_n, values);
    for (size_t b = 0; b < size(); ++b) c.values[b][col] = values[b];
  }
  return c;
}

Bands allocated_bands(const Trace& trace, int64_t device, BandBy by, size_t top_sites) {
  Bands bands;
  bands.by_ = by;
  bands.device_id_ = device;
  // Which band each allocation goes to: by category name, or by its stack's site.
  std::unordered_map<std::string, int> site_band;  // site key -> band
  std::unordered_map<uint64_t, int> stack_band;
  int other = -1;
  if (by == BandBy::site) {
    top_sites = std::min(top_sites, kMaxBands - 1);
    if (auto at = peak_point(trace, device)) {
      const auto live = live_allocations(trace, device, *at);
      for (const Group& g : group_allocations(trace, live, GroupBy::site, top_sites)) {
        site_band[g.key] = int(bands.labels_.size());
        bands.labels_.push_back(g.label);
        bands.keys_.push_back(g.key);
      }
    }
    other = int(bands.labels_.size());
    bands.labels_.push_back("other sites");
    bands.keys_.emplace_back();
  }
  std::vector<Bands::Change>& changes = bands.changes_;
  changes.reserve(2 * store::allocation_count(trace.reader(), {.device = device}));
  // Custom categories (Note [Category rules]): bands by the rules' names, in their order.
  const CategoryRules* rules = by == BandBy::category ? trace.category_rules() : nullptr;
  std::vector<std::string> rule_names = rules ? rules->names() : std::vector<std::string>{};
  std::unordered_map<std::string, int> rule_band;
  for (size_t i = 0; i < rule_names.size(); ++i) rule_band[rule_names[i]] = int(i);
  std::vector<bool> used_rule(rule_names.size(), false);
  std::vector<bool> used_category(std::size(kCategoryOrder), false);
  int category_band[events::kNumCategories];
  for (int c = 0; c < events::kNumCategories; ++c) {
    category_band[c] = int(std::size(kCategoryOrder)) - 1;  // unknown
    for (size_t i = 0; i < std::size(kCategoryOrder); ++i)
      if (kCategoryOrder[i] == static_cast<events::Category>(c)) category_band[c] = int(i);
  }
  store::AllocationCursor rows(trace.reader(), {.device = device}, store::AllocationOrder::none);
  while (std::optional<store::AllocationSpan> a = rows.next()) {
    int band = 0;
    if (rules) {
      const uint64_t stack = a->stack_id;
      auto [it, fresh] = stack_band.try_emplace(stack, 0);
      if (fresh) it->second = rule_band.at(trace.category_label(stack, events::Category::unknown));
      band = it->second;
      used_rule[size_t(band)] = true;
    } else if (by == BandBy::category) {
      band = category_band[static_cast<int>(a->category)];
      used_category[size_t(band)] = true;
    } else {
      const uint64_t stack = a->stack_id;
      auto [it, fresh] = stack_band.try_emplace(stack, other);
      if (fresh) {
        auto s = site_band.find(trace.site(stack).key);
        if (s != site_band.end()) it->second = s->second;
      }
      band = it->second;
    }
    const auto size = static_cast<int64_t>(a->size);
    changes.push_back({a->alloc_ts, size * 256 + band});
    if (a->free_requested_ts) changes.push_back({*a->free_requested_ts, -size * 256 + band});
  }
  if (rules) {
    // Only the names that occur, in the rules' order.
    std::vector<int> renumber(rule_names.size(), -1);
    for (size_t i = 0; i < rule_names.size(); ++i) {
      if (!used_rule[i]) continue;
      renumber[i] = int(bands.labels_.size());
      bands.labels_.push_back(rule_names[i]);
      bands.keys_.emplace_back();
    }
    for (Bands::Change& c : changes)
      c.change = delta_of(c.change) * 256 + renumber[size_t(band_of(c.change))];
  } else if (by == BandBy::category) {
    // Only the categories that occur, in kCategoryOrder.
    std::vector<int> renumber(std::size(kCategoryOrder), -1);
    for (size_t i = 0; i < std::size(kCategoryOrder); ++i) {
      if (!used_category[i]) continue;
      renumber[i] = int(bands.labels_.size());
      bands.labels_.emplace_back(events::category_name(kCategoryOrder[i]));
      bands.keys_.emplace_back();
    }
    for (Bands::Change& c : changes)
      c.change = delta_of(c.change) * 256 + renumber[size_t(band_of(c.change))];
  }
  std::stable_sort(changes.begin(), changes.end(),
                   [](const Bands::Change& a, const Bands::Change& b) { return a.ts < b.ts; });
  std::vector<int64_t> values(bands.size(), 0);
  for (size_t i = 0; i < changes.size(); ++i) {
    if (i % kCheckpoint == 0)
      bands.checkpoints_.insert(bands.checkpoints_.end(), values.begin(), values.end());
    values[size_t(band_of(changes[i].change))] += delta_of(changes[i].change);
  }
  // A final checkpoint, so seeking to the end never reads past the stored ones.
  if (changes.size() % kCheckpoint == 0)
    bands.checkpoints_.insert(bands.checkpoints_.end(), values.begin(), values.end());
  return bands;
}

}  // namespace tidemark::analysis
