// The live view (analysis::LiveTrace) and finalize fold the same events into the same curves
// (Note [Memory curves] in profiler/events/events.h): every change LiveTrace holds for a
// device is a row of level 0 of the finalized trace's memory_lod, in the same order, with the
// same four values after it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "profiler/analysis/follow.h"
#include "profiler/naming/units.h"
#include "profiler/store/trace_reader.h"

namespace analysis_test {

// Checks a finalized trace; returns the number of changes compared.
inline size_t expect_live_curves_equal_level_0(const std::string& path) {
  namespace an = tidemark::analysis;
  namespace st = tidemark::store;
  an::LiveTrace live(path);
  EXPECT_GT(live.poll(), 0u) << path;
  EXPECT_TRUE(live.finalized()) << path;
  const st::TraceReader reader = st::TraceReader::open(path, st::TraceReader::Require::finalized);
  size_t compared = 0;
  for (const st::DeviceRow& d : reader.devices()) {
    const std::string name = an::device_name(d.info.id);
    SCOPED_TRACE(path + ", " + name);
    const std::vector<st::LodRow> rows =
        reader.lod(d.id, 0, 0, std::numeric_limits<uint64_t>::max());
    const auto& devices = live.devices();
    const auto it = std::find(devices.begin(), devices.end(), name);
    if (it == devices.end()) {
      EXPECT_TRUE(rows.empty()) << "finalize has changes the live view has no device for";
      continue;
    }
    const std::vector<an::LiveTrace::Change>& changes =
        live.changes(static_cast<size_t>(it - devices.begin()));
    EXPECT_EQ(changes.size(), rows.size());
    using Values = std::array<int64_t, 4>;  // allocated, active, reserved, requested
    for (size_t i = 0; i < std::min(changes.size(), rows.size()); ++i) {
      const an::LiveTrace::Change& c = changes[i];
      const st::LodRow& r = rows[i];
      const Values live_values{c.after.allocated, c.after.active, c.after.reserved,
                               c.after.requested};
      const Values stored{r.allocated, r.active, r.reserved, r.requested};
      if (c.ts == r.t && c.seq == r.seq.value_or(0) && live_values == stored) continue;
      EXPECT_EQ(c.ts, r.t) << "change " << i;
      EXPECT_EQ(c.seq, r.seq.value_or(0)) << "change " << i;
      EXPECT_EQ(live_values, stored) << "change " << i << " (seq " << c.seq << ")";
      break;  // the first difference; the ones after it follow from it
    }
    compared += rows.size();
  }
  return compared;
}

}  // namespace analysis_test
