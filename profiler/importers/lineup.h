// A PyTorch snapshot imported onto a trace recorded from the same run by libtidemark_inject.so
// (docs/interpose.md, "PyTorch: reserved from the trace, allocated from a snapshot").
//
// Note [Snapshot line-up]
// The injected trace knows PyTorch's segments (cudaMalloc, cuMemMap) with host stacks, copies,
// syncs and NVTX ranges, but not the blocks inside the segments; the snapshot knows the blocks.
// The merged trace keeps every recorded event and adds the snapshot's blocks (alloc,
// free_requested, free_completed, oom, marks) on the recorded clock. The snapshot's own segment
// events whose (device, address, size) the recording also has are dropped (a mapped range also
// when recorded mappings cover it: PyTorch writes one entry for a range it maps with several
// cuMemMap calls): the recorded ones stand for them, so reserved memory is counted once. Unmatched
// snapshot segments (the recording missed them) are kept, so allocated never exceeds reserved.
// Clock: PyTorch stamps entries with Unix time; the recording maps its clock to Unix time at its
// start (meta). That first guess is refined by the median difference between matched segment
// events (a cudaMalloc is recorded just before PyTorch's segment_alloc entry), and a block is
// never placed before the recorded start of its segment.
#pragma once

#include <string>

#include "profiler/importers/pytorch_snapshot.h"

namespace tidemark::importers {

struct LineupStats : ImportStats {
  uint64_t snapshot_segments = 0;  // segment_alloc / segment_map events of the snapshot
  uint64_t matched_segments = 0;   // ... the recording also has (dropped from the snapshot)
  int64_t clock_offset_ns = 0;     // added to the snapshot's Unix times
  uint64_t recorded_events = 0;    // events kept from the recording
};

// Reads the snapshot at `pickle_path` and the finalized trace `recorded_path`, writes the merged,
// finalized trace to `trace_path` (created or truncated; never the recorded file). Throws
// ImportError naming the file and the problem.
LineupStats import_pytorch_snapshot_onto(const std::string& pickle_path,
                                         const std::string& recorded_path,
                                         const std::string& trace_path,
                                         const ImportOptions& options = {});

}  // namespace tidemark::importers
