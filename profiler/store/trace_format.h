// Shared vocabulary of the trace file (schema v7, docs/trace-format.md): what the writer is
// given besides events, and what finalize asks of a symbolizer.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "profiler/events/events.h"

namespace tidemark::store {

inline constexpr int kSchemaVersion = 7;
// The oldest schema finalize() upgrades in place: versions since then changed only derived
// tables, so rebuilding them from the raw tables makes the file current (docs/trace-format.md,
// "Versioning"). Older files are refused.
inline constexpr int kOldestUpgradableSchemaVersion = 1;
// The largest size of a block or segment a trace may hold (2^56 B = 64 PiB, far above any
// device): the importer refuses larger ones naming the field, and finalize refuses an event
// with one as damaged, so no sum of sizes in the curves or the analysis can overflow int64.
inline constexpr uint64_t kMaxEventBytes = uint64_t{1} << 56;
// The mark an imported snapshot opens each device with (docs/importers.md, "The state before
// the trace"): its value counts the synthetic events after it on that device that rebuild the
// allocator's state from before the history began.
inline constexpr const char* kSnapshotStartMark = "snapshot: state before trace";
// `PRAGMA application_id`: marks a SQLite file as a Tidemark trace ("TDMK").
inline constexpr int32_t kApplicationId = 0x54444d4b;

// Every store failure (cannot open, foreign file, wrong schema version, SQLite error) throws
// this, with a message naming the file and the problem, and what the caller may act on: a
// database another process holds locked (busy), no room to write (a full disk, a quota, a file
// size limit).
class StoreError : public std::runtime_error {
 public:
  enum class Cause { other, busy, disk_full };
  explicit StoreError(const std::string& what, Cause cause = Cause::other)
      : std::runtime_error(what), cause_(cause) {}
  Cause cause() const { return cause_; }

 private:
  Cause cause_;
};

struct DeviceInfo {
  events::DeviceId id;
  std::string name;       // "cpu", "cuda:0 (NVIDIA H200)"
  uint64_t capacity = 0;  // bytes; 0 when unknown
  // In a merged trace (Note [Merged devices] in profiler/analysis/merge.h): the rank the
  // device belongs to and its id in that rank's own trace (`id` is the merged trace's).
  std::optional<int64_t> rank;
  events::DeviceId rank_id;
};

// One executable mapping of the recorded process (from /proc/<pid>/maps), so return addresses
// can be symbolized after the process is gone.
struct ModuleInfo {
  std::string path;
  uint64_t start = 0;  // mapping start address
  uint64_t end = 0;
  uint64_t file_offset = 0;
};

struct TraceMeta {
  std::string tool_version;
  std::string command_line;
  std::string host;
  int64_t pid = 0;
  // The process that finalizes the trace once the recording ends (`tidemark record`), 0 when
  // the recording process does so itself.
  int64_t finalizer_pid = 0;
  int64_t start_unix_ns = 0;  // wall-clock start
  uint64_t start_ts_ns = 0;   // the event clock (steady) at start: events' ts_ns are on it
  std::vector<DeviceInfo> devices;
  std::string allocator_settings;  // TL_ALLOC_CONF as given
  int stack_depth = 0;             // 0: stacks off
  // Events' times are the order of the source's entries (1 us apart), not clock times: an
  // imported snapshot that had no times (meta `synthetic_times`, docs/trace-format.md).
  bool synthetic_times = false;
  // What the allocations' categories were inferred from, when an importer inferred them (meta
  // `categories_inferred`, optional: absent when recorded or unknown; docs/trace-format.md).
  std::string categories_inferred;
  // The reserved bytes of each private memory pool (CUDA graphs, torch.cuda.MemPool) of an
  // imported snapshot, as JSON (meta `private_pools`, optional: absent when there are none;
  // docs/trace-format.md).
  std::string private_pools;
  // The process's rank in a distributed run and the run's world size, from its environment
  // (meta `rank`, `world_size`, optional: absent outside one; Note [Output patterns] in
  // profiler/record/output_path.h). A merged trace has the world size and no rank.
  std::optional<int64_t> rank, world_size;
  // A merged trace's sources, as JSON (meta `merged_ranks`, optional: absent otherwise;
  // docs/trace-format.md, "Merged traces").
  std::string merged_ranks;
  // A trace no GPU ran: `tidemark estimate`'s account of how it was made, as JSON (meta
  // `estimated`, optional: absent in a recorded or imported run; docs/estimate.md).
  std::string estimated;
  // false: the trace is made from sources not every loss of which was counted (meta
  // `loss_counted` 0: a merged trace of a rank that was killed); unset otherwise (Note [Counted
  // losses] in trace_writer.h).
  std::optional<bool> loss_counted;
};

// A merged trace's thread ids carry their rank: thread | rank << kMergedRankShift (Note
// [Merged devices] in profiler/analysis/merge.h), so each rank's steps end at its own next step.
inline constexpr int kMergedRankShift = 32;

// One source-level frame of a return address. An address inside inlined code gives several:
// the innermost inlined function first, the physical function last.
struct ResolvedFrame {
  std::string function;  // demangled; "" when unknown
  std::string file;      // "" when no debug info
  int line = 0;
  bool inlined = false;
  std::string module;  // path of the binary or shared library
};

// finalize() asks this for each distinct return address; it may return an empty vector.
using SymbolizeFn = std::function<std::vector<ResolvedFrame>(uint64_t ip)>;

}  // namespace tidemark::store
