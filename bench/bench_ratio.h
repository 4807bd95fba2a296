// Runs the registered benchmarks and prints each target as a ratio against a baseline measured
// in the same process, so the figure holds on any machine (docs/performance.md).
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tidemark::bench {

struct Target {
  std::string name;      // what the ratio means
  std::string measured;  // benchmark name
  std::string baseline;  // benchmark name
  double limit;          // target for measured/baseline time
  bool at_most;          // true: ratio <= limit; false: baseline/measured >= limit
};

// A target on the time of one iteration itself (ns), for costs stated absolutely.
struct AbsoluteTarget {
  std::string name;
  std::string measured;  // benchmark name
  double limit_ns;       // time per item must be <= this
  double items = 1;      // items per iteration (a batch of events)
};

class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    // With repetitions, the median stands for the benchmark (robust to a noisy neighbour);
    // without, the single run does.
    // A benchmark that also computes a "min" statistic (the least-disturbed repetition, for
    // figures that noise on a shared machine only inflates) is represented by it instead.
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name == "min") {
        times[r.run_name.function_name] = ns(r);
        medians.insert(r.run_name.function_name);
        mins.insert(r.run_name.function_name);
      } else if (r.run_type == Run::RT_Aggregate && r.aggregate_name == "median" &&
                 !mins.count(r.run_name.function_name)) {
        times[r.run_name.function_name] = ns(r);
        medians.insert(r.run_name.function_name);
      } else if (r.run_type == Run::RT_Iteration && !medians.count(r.run_name.function_name)) {
        times[r.run_name.function_name] = ns(r);
      }
    }
  }
  static double ns(const Run& r) {
    return r.GetAdjustedRealTime() * 1e9 / benchmark::GetTimeUnitMultiplier(r.time_unit);
  }
  std::map<std::string, double> times;  // ns per iteration
  std::set<std::string> medians;
  std::set<std::string> mins;
};

// Returns 0 when every target is met, 1 otherwise.
// The smallest of a benchmark's repetitions: register with ->ComputeStatistics("min", min_of).
inline double min_of(const std::vector<double>& v) {
  double m = v.empty() ? 0 : v[0];
  for (double x : v) m = x < m ? x : m;
  return m;
}

inline int run_with_targets(int argc, char** argv, const std::vector<Target>& targets,
                            const std::vector<AbsoluteTarget>& absolute = {}) {
  benchmark::Initialize(&argc, argv);
  CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  int failed = 0;
  std::printf("\n%-60s %10s %10s  %s\n", "target", "ratio", "limit", "result");
  for (const Target& t : targets) {
    auto m = reporter.times.find(t.measured), b = reporter.times.find(t.baseline);
    if (m == reporter.times.end() || b == reporter.times.end()) continue;  // filtered out
    double ratio = t.at_most ? m->second / b->second : b->second / m->second;
    bool ok = t.at_most ? ratio <= t.limit : ratio >= t.limit;
    failed += !ok;
    std::printf("%-60s %9.2fx %s%8.2fx  %s\n", t.name.c_str(), ratio,
                t.at_most ? "<=" : ">=", t.limit, ok ? "ok" : "MISSED");
  }
  for (const AbsoluteTarget& t : absolute) {
    auto m = reporter.times.find(t.measured);
    if (m == reporter.times.end()) continue;
    double per_item = m->second / t.items;
    bool ok = per_item <= t.limit_ns;
    failed += !ok;
    std::printf("%-60s %8.1fns <=%8.0fns  %s\n", t.name.c_str(), per_item, t.limit_ns,
                ok ? "ok" : "MISSED");
  }
  return failed ? 1 : 0;
}

}  // namespace tidemark::bench
