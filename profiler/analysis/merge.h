// The traces of one distributed run (one per rank: `tidemark record -o run-%r.db`) merged into
// one trace, which every command and the GUI read like any other (`tidemark merge`, and
// `tidemark import` of several per-rank snapshots).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tidemark::analysis {

// Note [Merged devices]
// The event contract names a device by (type, index), index an int8_t, and the devices table
// keeps (type, idx) unique, so the ranks' devices cannot keep their own ids in one trace: rank
// 0's cuda:0 and rank 1's cuda:0 would be one device. The merged trace numbers the devices of
// each type in rank order (rank 0's cpu is cpu, rank 1's cpu:1; rank 0's cuda:0 and cuda:1 are
// cuda:0 and cuda:1, rank 1's cuda:0 is cuda:2), which is what its events carry, and its
// devices table says whose each one is: `rank` and `rank_idx` (the index in that rank's own
// trace; both NULL in a trace that is not merged, schema version 6). Readers name such a
// device `rank1/cuda:0` (analysis::DeviceRef::name). An index mapping alone, with the rank only
// in the device's recorded name, would read as "cuda:2" to every reader that did not parse the
// name: the columns make it a fact of the file. A type holds at most 128 devices, so a merge
// of more ranks than that (of CPUs) is refused.
//
// Everything else of a rank is kept apart too: its threads (thread | rank << 32), its tensor
// and storage ids (id | rank << 48), its stacks (node ids offset; return addresses tagged with
// the rank, ip | (rank + 1) << 48, and resolved to the frames that rank's trace resolved them
// to). Times are aligned by each trace's wall-clock start (meta `start_unix_ns`): the merged
// clock is that of the rank that started first, and rank r's events move by
// (start_unix_ns[r] - start_ts_ns[r]) - (start_unix_ns[first] - start_ts_ns[first]); each
// rank's events keep their order, so every device's curves are those of its own trace.

class MergeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct MergedRank {
  int64_t rank = 0;
  std::string path;
  std::string rank_from;  // "meta" or "file name"
  bool complete = true;   // finalized after a clean end; false: a rank killed mid-run
  int64_t offset_ns = 0;  // added to its times
  uint64_t events = 0;
  std::vector<std::string> devices;  // their names in the merged trace ("rank1/cuda:0")
};

struct MergeResult {
  std::vector<MergedRank> ranks;  // in rank order
  int64_t world_size = 0;
  uint64_t events = 0;
  std::vector<std::string> warnings;  // one line each: missing ranks, partial traces
};

// The rank a file's name gives: the number after "rank" (`snapshot_rank3.pickle`,
// `rank-1.db`), else the name's only number (`run-0.db`). Empty when it has none; throws
// MergeError naming the file when it is ambiguous (several numbers, none after "rank").
std::optional<int64_t> rank_from_file_name(std::string_view path);

// Merges the traces at `inputs` (one per rank, each finalized or not: the recording of a rank
// killed mid-run merges what it committed, with a warning) into a finalized trace at `output`
// (created or replaced; the caller writes through an OutputFile). Each trace's rank is its
// meta `rank`, else rank_from_file_name. Refuses, with a MergeError naming the files, traces
// that are not of one run: a rank given twice, different world sizes, a rank beyond the world
// size, a trace without a rank, a trace that is itself merged, clock and synthetic times mixed.
// `names`, when given (one per input), stand for the inputs in messages and in the merged
// trace's meta (`tidemark import` merges temporary traces of the snapshots it names).
MergeResult merge_ranks(const std::vector<std::string>& inputs, const std::string& output,
                        const std::vector<std::string>& names = {});

}  // namespace tidemark::analysis
