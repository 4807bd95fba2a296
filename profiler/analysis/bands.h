// Allocated bytes split into bands -- by category (parameter, gradient, optimizer_state,
// activation, input, temporary, unknown) or by the top allocation sites -- over time, for a
// timeline stacked by what filled memory. Built in one pass over the allocations table and held
// in memory (16 bytes per alloc or free), so a viewer asks for any range at any width without
// touching the trace again: the bands of W columns cost O(W * bands) plus at most a checkpoint
// interval of changes per column.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/analysis/trace.h"

namespace tidemark::analysis {

enum class BandBy { category, site };
std::string_view band_by_name(BandBy by);

// Bands over W columns of [from_ts, to_ts) (absolute): values[b][c] is band b's bytes at the
// instant CurveColumns::last of timeline() describes for column c, so the bands of a column
// add up to its allocated `last` (see Bands::columns).
struct BandColumns {
  uint64_t from_ts = 0, to_ts = 0, column_ns = 1;
  std::vector<std::vector<int64_t>> values;
  size_t width() const { return values.empty() ? 0 : values.front().size(); }
};

class Bands {
 public:
  Bands() = default;
  BandBy by() const { return by_; }
  int64_t device_id() const { return device_id_; }
  // Band names, bottom of the stack first: categories in the order above (only those that
  // occur), or the top sites (largest at the allocated peak first) then "other sites".
  const std::vector<std::string>& labels() const { return labels_; }
  // Site keys (Site::key) of the site bands; empty for "other sites" and for categories.
  const std::vector<std::string>& keys() const { return keys_; }
  size_t size() const { return labels_.size(); }
  size_t changes() const { return changes_.size(); }

  // Every band's allocated bytes at `ts` (absolute): allocations with alloc_ts <= ts and not
  // free_requested by then (free_requested_ts > ts), as live_allocations() counts them.
  std::vector<int64_t> at(uint64_t ts) const;
  // The bands over `width` columns of [from_ts, to_ts), columns as timeline() makes them.
  // `bucket_ns`: the level-of-detail bucket width timeline() read for the same columns
  // (Timeline::level_width_ns). Its `last` of a column is the value at the end of the last
  // bucket starting in the column, which may reach past the column's end; the bands are taken
  // at the same instant, so they add up to it. 0: at the column's end.
  BandColumns columns(uint64_t from_ts, uint64_t to_ts, size_t width, uint64_t bucket_ns = 0) const;

 private:
  friend Bands allocated_bands(const Trace&, int64_t, BandBy, size_t);
  // Values after the first `n` changes, starting from the nearest checkpoint.
  void seek(size_t n, size_t& at_n, std::vector<int64_t>& values) const;

  BandBy by_ = BandBy::category;
  int64_t device_id_ = 0;
  std::vector<std::string> labels_, keys_;
  struct Change {
    uint64_t ts;
    int64_t change;  // delta * 256 + band
  };
  std::vector<Change> changes_;  // by ts
  // Every kCheckpoint changes, the bands' values before that change: [k * size() + band].
  std::vector<int64_t> checkpoints_;
};

// The allocated bytes of `device` in bands. BandBy::site keeps the `top_sites` sites holding
// the most bytes at the allocated peak (peak_point()) and puts every other allocation in
// "other sites".
Bands allocated_bands(const Trace& trace, int64_t device, BandBy by, size_t top_sites = 8);

}  // namespace tidemark::analysis
