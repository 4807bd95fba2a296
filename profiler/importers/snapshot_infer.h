// The snapshot side of Note [Inferred categories] (infer.cpp): the phases of a snapshot's
// entries from their frames and the record_function ranges around them, and the categories
// of its blocks (those before the trace and those its `alloc` entries make).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "profiler/importers/infer.h"
#include "profiler/importers/snapshot_reader.h"

namespace tidemark::importers::snapshot {

// A block allocated before the snapshot's history began (the importer's backward walk).
struct StartBlock {
  uint64_t addr = 0;
  bool pending = false;  // freed by the caller already (active_pending_free)
  FrameRun frames = 0;
  uint64_t size = 0;  // requested (Note [State before the history] in infer.cpp)
};

struct DeviceInference {
  std::vector<ev::Category> entries;  // per trace entry (an alloc's category; unknown for others)
  std::vector<ev::Category> start;    // per StartBlock
  // Note [Inferred categories], rules 4 and 5: a step comes just before each of these
  // entries (entries.size(): after the last).
  std::vector<uint64_t> step_ends;
  infer::StepBasis step_basis = infer::StepBasis::none;  // what ends the steps
  std::array<uint64_t, infer::kPhases> runs{};           // runs per phase (infer::Phase)
  bool annotations_used = false;                         // an annotation gave an event its phase
  bool any = false;  // some block got a category other than unknown
};

// `annotations`: this device's, in time order. `t0`: the time of the start state.
DeviceInference infer_device(const SnapshotReader& reader, const std::vector<Entry>& entries,
                             const std::vector<StartBlock>& start,
                             const std::vector<Annotation>& annotations, uint64_t t0);

// The meta value `categories_inferred` for the devices' inferences ("frames and lifetimes
// (...)"), empty when nothing was inferred.
std::string inference_basis(const std::vector<const DeviceInference*>& devices);

}  // namespace tidemark::importers::snapshot
