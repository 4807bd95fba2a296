// The `rank-imbalance` finding over the ranks of a distributed run, which
// profiler/analysis/ranks.h compares: what `tidemark summary` and `diagnose` of several ranks'
// traces report, and what the detector reports of a merged trace (rank_imbalance.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "profiler/analysis/ranks.h"
#include "profiler/diagnose/diagnose.h"

namespace tidemark::diagnose {

// Note [Rank imbalance]
// One rank's peak (allocated or reserved) on a device above the others' by at least
// kImbalanceShare of that peak and kImbalanceMinBytes: the lowest rank shows what the program
// needs, the difference is what the highest rank holds beyond it (rank 0's extra state, uneven
// gradient buckets, a larger shard). Below that, ranks differ by noise (a batch of another
// size, the allocator's rounding). The finding names the rank, the bytes and the site (and
// category) that grew most between the two peaks; its share is the difference over the high
// rank's peak (Note [Severity]).
inline constexpr double kImbalanceShare = 0.10;
inline constexpr int64_t kImbalanceMinBytes = int64_t{1} << 20;
// The findings over the ranks' devices, with device named `rank<R>/<device>` and severity set.
std::vector<Finding> rank_imbalance(const std::vector<analysis::RankDevice>& devices);

}  // namespace tidemark::diagnose
