// The commands over the ranks of a distributed run: `summary`, `check` and `diagnose` given one
// trace per rank, and `merge`.
//
// Note [Several ranks]
// `tidemark record -o run-%r.db` leaves one trace per rank. A reporting command given several
// traces takes them as the ranks of one run: each trace's rank is its meta `rank` (else the
// number in its file name), a rank given twice or traces of different world sizes are refused
// (exit 2), and each rank is reported as its own trace would be -- the figures of `summary
// run-1.db` are those of rank 1's column -- with what compares them: the spread of the peaks
// and what makes the difference (summary), the ranks that fail (check), `rank-imbalance`
// (diagnose). A merged trace (`tidemark merge`) holds the same ranks as devices named
// `rank1/cuda:0`, on which every command works as on any trace.
#include <fmt/core.h>

#include <cmath>
#include <iostream>
#include <map>
#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "profiler/analysis/json.h"
#include "profiler/analysis/merge.h"
#include "profiler/analysis/output_file.h"
#include "profiler/analysis/ranks.h"
#include "profiler/diagnose/rank_imbalance.h"
#include "profiler/naming/units.h"
#include "profiler/store/meta_keys.h"
#include "profiler/store/trace_writer.h"

namespace tidemark::cli {

namespace an = analysis;
using nlohmann::json;

namespace {

struct OpenRank {
  int64_t rank = 0;
  std::string path;
  std::unique_ptr<an::Trace> trace;
};

// Opens the traces and orders them by rank (Note [Several ranks]).
std::vector<OpenRank> open_ranks(const std::vector<std::string>& files) {
  ensure_open_files(files.size(), "the ranks");  // Note [Open files]
  std::vector<OpenRank> out;
  std::optional<std::pair<int64_t, std::string>> world;  // (size, the file that says so)
  for (const std::string& f : files) {
    OpenRank r;
    r.path = f;
    r.trace = std::make_unique<an::Trace>(open_trace(f));
    std::optional<int64_t> rank;
    try {
      rank = an::trace_rank(*r.trace);
    } catch (const an::MergeError& e) {
      throw UsageError(e.what());
    }
    if (!rank)
      throw UsageError(f +
                       ": has no rank (not recorded under mpirun or torchrun, and no number "
                       "in its name); give one trace per rank, as `record -o run-%r.db` writes");
    r.rank = *rank;
    if (std::optional<int64_t> w = r.trace->meta_int(store::meta_keys::kWorldSize)) {
      if (world && world->first != *w)
        throw UsageError(world->second + " and " + f + ": not of one run (world size " +
                         std::to_string(world->first) + " and " + std::to_string(*w) + ")");
      world = {*w, f};
    }
    for (const OpenRank& o : out)
      if (o.rank == r.rank)
        throw UsageError(o.path + " and " + f + ": both are rank " + std::to_string(r.rank) +
                         "; give each rank's trace once");
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(),
            [](const OpenRank& a, const OpenRank& b) { return a.rank < b.rank; });
  return out;
}

std::vector<an::RankedTrace> ranked(const std::vector<OpenRank>& ranks) {
  std::vector<an::RankedTrace> out;
  for (const OpenRank& r : ranks) out.push_back({r.rank, r.trace.get()});
  return out;
}

const char* curve_name(store::Curve c) {
  return c == store::Curve::reserved ? "reserved" : "allocated";
}

json delta_json(const std::optional<an::GroupDelta>& d) {
  if (!d) return nullptr;
  return {{"key", d->key},
          {"label", d->label},
          {"high_bytes", d->high_bytes},
          {"low_bytes", d->low_bytes},
          {"delta_bytes", d->delta()}};
}

json spread_json(const an::RankSpread& s) {
  json peaks = json::array();
  for (const auto& [rank, bytes] : s.peaks) peaks.push_back({{"rank", rank}, {"bytes", bytes}});
  const double ratio = s.ratio();
  return {{"device", s.device},
          {"curve", curve_name(s.curve)},
          {"peaks", peaks},
          {"high_rank", s.high_rank},
          {"low_rank", s.low_rank},
          {"high_bytes", s.high_bytes},
          {"low_bytes", s.low_bytes},
          {"ratio", std::isfinite(ratio) ? json(ratio) : json(nullptr)},
          {"site", delta_json(s.site)},
          {"category", delta_json(s.category)}};
}

std::string spread_text(const an::RankSpread& s) {
  if (s.high_bytes == s.low_bytes) return "even";
  const double r = s.ratio();
  std::string out =
      fmt::format("{} (rank {} +{} over rank {})",
                  std::isfinite(r) ? fmt::format("{:.2f}x", r) : std::string("inf"), s.high_rank,
                  an::format_bytes(s.high_bytes - s.low_bytes), s.low_rank);
  if (s.site) out += fmt::format("; site {} +{}", s.site->label, an::format_bytes(s.site->delta()));
  if (s.category)
    out += fmt::format("; {} +{}", s.category->key, an::format_bytes(s.category->delta()));
  return out;
}

}  // namespace

std::vector<RankedFile> ranked_files(const std::vector<std::string>& files) {
  std::vector<RankedFile> out;
  for (const OpenRank& r : open_ranks(files)) out.push_back({r.rank, r.path});
  return out;
}

int run_summary_ranks(const SummaryArgs& a) {
  const std::vector<OpenRank> ranks = open_ranks(a.files);
  std::vector<an::Summary> summaries;
  std::vector<an::RankSpread> spreads;
  {
    Progress p("summarising " + std::to_string(ranks.size()) + " ranks");
    for (const OpenRank& r : ranks) {
      an::SummaryOptions o;
      if (!a.device.empty()) o.device = select_devices(*r.trace, a.device).front().id;
      o.top_limit = a.limit;
      summaries.push_back(an::summarize(*r.trace, o));
    }
    spreads = an::rank_spreads(an::rank_devices(ranked(ranks)));
  }
  if (!a.device.empty())
    std::erase_if(spreads, [&](const an::RankSpread& s) { return s.device != a.device; });
  if (a.json) {
    json list = json::array(), spread = json::array();
    for (size_t i = 0; i < ranks.size(); ++i)
      list.push_back({{"rank", ranks[i].rank}, {"path", ranks[i].path}, {"summary", summaries[i]}});
    for (const an::RankSpread& s : spreads) spread.push_back(spread_json(s));
    std::cout << json_text(json{{"json_version", an::kJsonSchemaVersion},
                                {"paths", a.files},
                                {"ranks", list},
                                {"spread", spread}})
              << '\n';
    return kExitOk;
  }
  fmt::print("{} ranks:\n", ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i)
    fmt::print("  rank {}: {} ({} events, {}{})\n", ranks[i].rank, ranks[i].path,
               summaries[i].event_count, an::format_duration(summaries[i].duration_ns),
               summaries[i].clean_end ? "" : ", recording did not end cleanly");
  std::string header = fmt::format("\n{:<24}", "peaks");
  for (const OpenRank& r : ranks)
    header += fmt::format(" {:>12}", "rank " + std::to_string(r.rank));
  fmt::print("{}  spread (max/min)\n", header);
  for (const an::RankSpread& s : spreads) {
    std::string line = fmt::format("{:<24}", s.device + " " + curve_name(s.curve));
    for (const OpenRank& r : ranks) {
      auto it =
          std::find_if(s.peaks.begin(), s.peaks.end(), [&](auto& p) { return p.first == r.rank; });
      line += fmt::format(" {:>12}", it == s.peaks.end() ? "-" : an::format_bytes(it->second));
    }
    fmt::print("{}  {}\n", line, spread_text(s));
  }
  if (spreads.empty()) fmt::print("  (no device two ranks have)\n");
  return kExitOk;
}

int run_diagnose_ranks(const DiagnoseArgs& a) {
  const std::set<std::string> only = parse_finding_ids("--only", a.only);
  const std::vector<OpenRank> ranks = open_ranks(a.files);
  diagnose::Diagnosis all;
  std::map<std::string, std::string> skipped;  // id -> reason (the first rank's)
  {
    Progress p("diagnosing " + std::to_string(ranks.size()) + " ranks");
    for (const OpenRank& r : ranks) {
      diagnose::Diagnosis d = diagnose::diagnose(*r.trace, only, a.all);
      for (diagnose::Finding& f : d.findings) {
        if (f.id == "rank-imbalance") continue;
        f.device = "rank" + std::to_string(r.rank) + "/" + f.device;
        all.findings.push_back(std::move(f));
      }
      for (const diagnose::SkippedDetector& s : d.skipped)
        if (s.id != "rank-imbalance")
          skipped.emplace(s.id, "rank " + std::to_string(r.rank) + ": " + s.reason);
      all.minor_hidden += d.minor_hidden;
    }
    if (only.empty() || only.count("rank-imbalance"))
      for (diagnose::Finding& f : diagnose::rank_imbalance(an::rank_devices(ranked(ranks)))) {
        if (f.severity == diagnose::Severity::minor && !a.all) {
          ++all.minor_hidden;
          continue;
        }
        all.findings.push_back(std::move(f));
      }
  }
  for (const auto& [id, reason] : skipped) all.skipped.push_back({id, reason});
  std::stable_sort(all.findings.begin(), all.findings.end(),
                   [](const diagnose::Finding& x, const diagnose::Finding& y) {
                     if (x.severity != y.severity) return x.severity > y.severity;
                     return x.share > y.share;
                   });
  if (a.json) {
    json j = diagnosis_json(all);
    j["json_version"] = an::kJsonSchemaVersion;
    j["paths"] = a.files;
    json list = json::array();
    for (const OpenRank& r : ranks) list.push_back({{"rank", r.rank}, {"path", r.path}});
    j["ranks"] = list;
    std::cout << json_text(j) << '\n';
    return kExitOk;
  }
  fmt::print("{} ranks: {} finding{}\n", ranks.size(), all.findings.size(),
             all.findings.size() == 1 ? "" : "s");
  for (size_t i = 0; i < all.findings.size(); ++i) {
    const diagnose::Finding& f = all.findings[i];
    fmt::print("\n{}. [{}] {} ({})\n", i + 1, f.id, f.title, f.device);
    fmt::print("   severity: {}{}\n", diagnose::severity_name(f.severity),
               f.bytes ? fmt::format(" ({} at stake, {:.1f}% of the device's peak)",
                                     an::format_bytes(f.bytes), 100.0 * f.share)
                       : "");
    fmt::print("   site: {}\n", f.site.empty() ? std::string("(no stack recorded)") : f.site);
    for (const auto& [what, value] : f.evidence) fmt::print("   {}: {}\n", what, value);
    fmt::print("   fix: {}\n", f.fix);
  }
  if (all.minor_hidden)
    fmt::print("\n{} minor finding{} not shown (--all shows them)\n", all.minor_hidden,
               all.minor_hidden == 1 ? "" : "s");
  if (!all.skipped.empty()) {
    fmt::print("\nskipped:\n");
    for (const diagnose::SkippedDetector& s : all.skipped) fmt::print("  {}: {}\n", s.id, s.reason);
  }
  return kExitOk;
}

int run_merge(const std::vector<std::string>& inputs, const std::string& output, bool json_out) {
  ensure_open_files(inputs.size(), "merge");  // Note [Open files]
  an::OutputFile out(output, inputs);         // Note [Output files]
  an::MergeResult r;
  try {
    Progress p("merging " + std::to_string(inputs.size()) + " traces");
    r = an::merge_ranks(inputs, out.part_path());
  } catch (const an::MergeError& e) {
    throw UsageError(e.what());
  }
  store::remove_trace_sidecars(output);  // an old trace's WAL must not meet the new file
  out.commit();
  for (const std::string& w : r.warnings) fmt::print(stderr, "tidemark: warning: {}\n", w);
  if (json_out) {
    json ranks = json::array();
    for (const an::MergedRank& m : r.ranks)
      ranks.push_back({{"rank", m.rank},
                       {"path", m.path},
                       {"rank_from", m.rank_from},
                       {"complete", m.complete},
                       {"offset_ns", m.offset_ns},
                       {"events", m.events},
                       {"devices", m.devices}});
    std::cout << json_text(json{{"json_version", an::kJsonSchemaVersion},
                                {"output", output},
                                {"world_size", r.world_size},
                                {"events", r.events},
                                {"ranks", ranks},
                                {"warnings", r.warnings}})
              << '\n';
    return kExitOk;
  }
  fmt::print("merged {} ranks of {} ({} events) into {}\n", r.ranks.size(), r.world_size, r.events,
             output);
  for (const an::MergedRank& m : r.ranks) {
    std::string devices;
    for (const std::string& d : m.devices) devices += (devices.empty() ? "" : ", ") + d;
    fmt::print("  rank {}: {} ({} events, clock {:+} ns{}): {}\n", m.rank, m.path, m.events,
               m.offset_ns, m.complete ? "" : ", partial", devices);
  }
  return kExitOk;
}

}  // namespace tidemark::cli
