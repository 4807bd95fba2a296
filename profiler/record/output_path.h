// The trace's file name as a pattern: `%p` the process id, `%r` the rank of a distributed run
// (MPI, torchrun), `%%` a literal percent (Note [Output patterns]). The recorder expands it in
// the recorded process, `tidemark record` to know which file(s) the program wrote.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace tidemark::record {

// Note [Output patterns]
// A distributed run starts one process per rank, each with its rank in its environment:
// OpenMPI's mpirun sets OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE, MPICH and Slurm's PMI
// PMI_RANK / PMI_SIZE, torchrun RANK / WORLD_SIZE (read in that order; the size is read from
// the same family as the rank). Each rank records its own trace, so `-o run-%r.db` gives
// run-0.db, run-1.db, ... In a pattern:
//   %p  the recording process's id
//   %r  its rank; with no rank in the environment, 0 (and the recorder says so on stderr)
//   %%  a literal %
// Any other `%x` stays as written. The pattern is expanded where the rank is known: in the
// recorded process (the recorder, the CUDA injection), whichever way `tidemark record` and
// mpirun are nested. Ranks of a run that would all write one file (world size above 1, and
// neither %r nor %p in the name) are refused: their writers would take turns replacing it.
struct RankEnv {
  std::optional<int64_t> rank, world_size;
  std::string variable;  // where the rank came from ("OMPI_COMM_WORLD_RANK"); "" without one
};
using EnvLookup = std::function<const char*(const char*)>;
// The rank and world size in the environment (`lookup` defaults to getenv). A value that is
// not a non-negative integer counts as absent.
RankEnv rank_from_env(const EnvLookup& lookup = {});

// Whether `pattern` holds `%<c>` (not the second half of a `%%`).
bool has_pattern(std::string_view pattern, char c);

struct ExpandedPath {
  std::string path;
  bool rank_missing = false;  // %r with no rank in the environment: expanded as 0
};
ExpandedPath expand_output_path(std::string_view pattern, int64_t pid, const RankEnv& ranks);

// Empty when `pattern` is fine for `ranks`, else why not (one line, naming the pattern and the
// variable): a world of several ranks writing one file.
std::string shared_file_problem(std::string_view pattern, const RankEnv& ranks);

// Whether `name` is `pattern` with %r and %p expanded to numbers (`pid`, when given, for %p)
// and %% to %: the files the ranks of a run wrote, which only they knew the names of.
bool matches_output_pattern(std::string_view pattern, std::string_view name,
                            std::optional<int64_t> pid = std::nullopt);

}  // namespace tidemark::record
