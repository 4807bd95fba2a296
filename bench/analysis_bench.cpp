// analysis_bench: the analysis library on a large synthetic trace. A generator writes a trace
// of N events (default 10M) with TraceWriter and finalizes it, then `summary` and `timeline`
// (the work `tidemark summary` and `tidemark timeline` do) are timed, best of 3.
//
//   analysis_bench [--events N] [--trace PATH] [--keep]
//
// --trace with an existing finalized file reuses it (generating and finalizing 10M events
// takes a few minutes: finalize runs at about 2 s per million events); --keep leaves the
// generated file. Targets (issue 6): summary <= 2 s, timeline <= 1 s.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "profiler/analysis/memory.h"
#include "profiler/store/trace_writer.h"
#include "synthetic_trace.h"

namespace {

namespace an = tidemark::analysis;
namespace ev = tidemark::events;
namespace st = tidemark::store;

constexpr double kSummaryTargetSeconds = 2.0;
constexpr double kTimelineTargetSeconds = 1.0;

void generate(const std::string& path, uint64_t n_events) {
  tidemark::bench::generate_synthetic_trace(path, n_events);
}

template <class F>
double best_of_3(F&& f) {
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t n = 10'000'000;
  std::string path;
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--events") && i + 1 < argc)
      n = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--trace") && i + 1 < argc)
      path = argv[++i];
    else if (!std::strcmp(argv[i], "--keep"))
      keep = true;
    else {
      std::fprintf(stderr, "usage: analysis_bench [--events N] [--trace PATH] [--keep]\n");
      return 2;
    }
  }
  const bool reuse = !path.empty() && std::filesystem::exists(path);
  if (path.empty())
    path = (std::filesystem::temp_directory_path() /
            ("tidemark_analysis_bench_" + std::to_string(::getpid()) + ".db"))
               .string();
  if (!reuse) {
    auto t0 = std::chrono::steady_clock::now();
    generate(path, n);
    std::printf(
        "generated and finalized %llu events in %.1f s: %s\n", static_cast<unsigned long long>(n),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), path.c_str());
  }
  an::Trace trace = an::Trace::open(path);
  const int64_t dev = trace.devices().at(0).id;
  an::Summary s;
  double summary_s = best_of_3([&] { s = an::summarize(an::Trace::open(path)); });
  an::TimelineRequest req;
  req.width = 1000;
  double timeline_s = best_of_3([&] { (void)an::timeline(an::Trace::open(path), dev, req); });
  std::printf("trace: %llu events, peak allocated %lld bytes, %llu allocations\n",
              static_cast<unsigned long long>(s.event_count),
              static_cast<long long>(s.devices.at(0).peak_allocated_bytes),
              static_cast<unsigned long long>(s.devices.at(0).alloc_count));
  bool summary_ok = summary_s <= kSummaryTargetSeconds;
  bool timeline_ok = timeline_s <= kTimelineTargetSeconds;
  std::printf("%-60s %8.3f s <= %4.1f s  %s\n", "summary (open, peaks, top at peak, leaks)",
              summary_s, kSummaryTargetSeconds, summary_ok ? "ok" : "MISSED");
  std::printf("%-60s %8.3f s <= %4.1f s  %s\n", "timeline (open, 1000 columns, whole trace)",
              timeline_s, kTimelineTargetSeconds, timeline_ok ? "ok" : "MISSED");
  if (!reuse && !keep)
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return summary_ok && timeline_ok ? 0 : 1;
}
