// rank-imbalance (profiler/diagnose/diagnose.h): one rank of a distributed run peaking well
// above the others (Note [Rank imbalance] in rank_imbalance.h). docs/diagnoses.md gives its
// evidence and thresholds.
#include "profiler/diagnose/rank_imbalance.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/support.h"
#include "profiler/store/meta_keys.h"

namespace tidemark::diagnose {

namespace {

using analysis::format_bytes;
using detail::bytes_text;
using detail::ratio_text;

const char* curve_name(store::Curve c) {
  return c == store::Curve::reserved ? "reserved" : "allocated";
}

}  // namespace

std::vector<Finding> rank_imbalance(const std::vector<analysis::RankDevice>& devices) {
  std::vector<Finding> out;
  for (const analysis::RankSpread& s : analysis::rank_spreads(devices)) {
    const int64_t diff = s.high_bytes - s.low_bytes;
    if (diff < kImbalanceMinBytes ||
        static_cast<double>(diff) < kImbalanceShare * static_cast<double>(s.high_bytes))
      continue;
    // Reserved memory follows allocated: report it only where allocated does not explain it.
    if (s.curve == store::Curve::reserved &&
        std::any_of(out.begin(), out.end(), [&](const Finding& f) {
          return f.device == "rank" + std::to_string(s.high_rank) + "/" + s.device;
        }))
      continue;
    Finding f;
    f.id = "rank-imbalance";
    f.device = "rank" + std::to_string(s.high_rank) + "/" + s.device;
    f.bytes = diff;
    f.title = "rank " + std::to_string(s.high_rank) + " peaks at " + format_bytes(s.high_bytes) +
              " " + curve_name(s.curve) + " on " + s.device + ", " + ratio_text(s.ratio()) +
              " rank " + std::to_string(s.low_rank) + "'s " + format_bytes(s.low_bytes) +
              ": the ranks do not hold the same memory";
    if (s.site) f.site = s.site->label;
    for (const auto& [rank, bytes] : s.peaks)
      f.evidence.push_back(
          {"rank " + std::to_string(rank) + " peak " + curve_name(s.curve), bytes_text(bytes)});
    f.evidence.push_back({"difference", bytes_text(diff)});
    if (s.site)
      f.evidence.push_back(
          {"site making the difference", s.site->label + ": " + format_bytes(s.site->high_bytes) +
                                             " on rank " + std::to_string(s.high_rank) + ", " +
                                             format_bytes(s.site->low_bytes) + " on rank " +
                                             std::to_string(s.low_rank)});
    if (s.category)
      f.evidence.push_back({"category making the difference",
                            s.category->key + ": +" + format_bytes(s.category->delta())});
    f.fix =
        "Make the ranks hold the same memory: state kept on one rank only (rank 0 saving or "
        "logging, an unsharded optimizer) belongs on every rank or none; buckets and shards "
        "of equal size; the same batch size on every rank. The site above is where the "
        "high rank allocates more.";
    f.share =
        s.high_bytes > 0 ? static_cast<double>(diff) / static_cast<double>(s.high_bytes) : 1.0;
    f.severity = f.share >= kMajorMemoryShare      ? Severity::major
                 : f.share >= kModerateMemoryShare ? Severity::moderate
                                                   : Severity::minor;
    out.push_back(std::move(f));
  }
  return out;
}

void detail::detect_rank_imbalance(const analysis::Trace& trace, Diagnosis& out) {
  std::vector<analysis::RankDevice> devices = analysis::rank_devices(trace);
  if (devices.empty()) {
    // A trace of no distributed run has no ranks to compare: nothing to say. One rank's trace
    // needs the others.
    if (!trace.meta_int(store::meta_keys::kRank)) return;
    out.skipped.push_back({"rank-imbalance",
                           "one rank's trace: give the traces of every rank (`tidemark diagnose "
                           "run-*.db`) or a merged one (`tidemark merge`)"});
    return;
  }
  for (Finding& f : rank_imbalance(devices)) out.findings.push_back(std::move(f));
}

}  // namespace tidemark::diagnose
