// merge_bench (docs/performance.md): `tidemark merge` of several ranks' traces (synthetic,
// training-like: bench/synthetic_trace.h), in a child process of its own, against two baselines
// measured in the same run, each in its own child too:
// * its peak resident memory against holding every rank's events at once (what a merge that
//   reads the ranks whole needs): target <= 0.5, since merge streams each rank through a cursor;
// * its time against reading the ranks' events once (reported, not a target: merge also writes
//   and finalizes the merged trace).
//
//   merge_bench                      4 ranks x 1,000,000 events
//   TIDEMARK_MERGE_BENCH_RANKS=R TIDEMARK_MERGE_BENCH_EVENTS=N merge_bench
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "own_peak_rss.h"
#include "profiler/analysis/merge.h"
#include "profiler/store/trace_reader.h"
#include "synthetic_trace.h"

namespace {

namespace fs = std::filesystem;
namespace st = tidemark::store;

struct Run {
  double seconds = -1;
  uint64_t rss = 0;  // peak resident bytes
};

// One measurement, `mode`, in a child process: its wall time and peak resident memory. The
// child is this program started again (--child MODE PEAK TOTAL OUTPUT INPUT...), which writes
// its own peak to the file PEAK: the kernel's count for a forked child starts at what the
// parent had resident (the traces it generated), ~60 MB here.
Run in_child(const char* mode, uint64_t total, const std::string& output,
             const std::vector<std::string>& inputs) {
  const std::string peak_file = output + "." + mode + ".peak", count = std::to_string(total);
  std::vector<const char*> argv = {"merge_bench",     "--child",     mode,
                                   peak_file.c_str(), count.c_str(), output.c_str()};
  for (const std::string& in : inputs) argv.push_back(in.c_str());
  argv.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    execv("/proc/self/exe", const_cast<char* const*>(argv.data()));
    std::perror("merge_bench: exec /proc/self/exe");
    _exit(1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  Run r;
  uint64_t peak = 0;
  std::ifstream(peak_file) >> peak;
  fs::remove(peak_file);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && peak > 0) {
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.rss = peak;
  }
  return r;
}

// The child's side: holding every rank's events, reading them once, or merging them.
int child(const std::string& mode, const char* peak_file, uint64_t total, const std::string& output,
          const std::vector<std::string>& inputs) {
  try {
    if (mode == "holding") {
      std::vector<std::vector<st::RecordedEvent>> all;
      for (const std::string& in : inputs) all.push_back(st::TraceReader::open(in).events());
    } else if (mode == "reading") {
      uint64_t n = 0;
      for (const std::string& in : inputs)
        st::TraceReader::open(in).for_each_event(
            [&](const tidemark::events::Event&, uint64_t) { ++n; });
      if (n != total) throw std::runtime_error("read " + std::to_string(n) + " events");
    } else {
      const tidemark::analysis::MergeResult m = tidemark::analysis::merge_ranks(inputs, output);
      if (m.events != total)
        throw std::runtime_error("merged " + std::to_string(m.events) + " events");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "merge_bench: %s\n", e.what());
    return 1;
  }
  std::ofstream(peak_file) << tidemark::bench::own_peak_rss();
  return 0;
}

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

double mb(uint64_t bytes) {
  return static_cast<double>(bytes) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 7 && std::string(argv[1]) == "--child")
    return child(argv[2], argv[3], std::stoull(argv[4]), argv[5],
                 std::vector<std::string>(argv + 6, argv + argc));
  const uint64_t ranks = env_or("TIDEMARK_MERGE_BENCH_RANKS", 4);
  const uint64_t events = env_or("TIDEMARK_MERGE_BENCH_EVENTS", 1'000'000);
  const fs::path dir =
      fs::temp_directory_path() / ("tidemark-merge-bench-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::vector<std::string> inputs;
  uint64_t input_bytes = 0;
  for (uint64_t r = 0; r < ranks; ++r) {
    inputs.push_back((dir / ("rank-" + std::to_string(r) + ".db")).string());
    tidemark::bench::generate_synthetic_trace(inputs.back(), events);
    input_bytes += fs::file_size(inputs.back());
  }
  const std::string output = (dir / "merged.db").string();
  uint64_t total = 0;  // the events the traces hold (the generator adds a few per trace)
  for (const std::string& in : inputs)
    st::TraceReader::open(in).for_each_event(
        [&](const tidemark::events::Event&, uint64_t) { ++total; });
  std::printf("%llu ranks x %llu events (%llu in all, %.1f MB of traces)\n",
              static_cast<unsigned long long>(ranks), static_cast<unsigned long long>(events),
              static_cast<unsigned long long>(total), mb(input_bytes));
  std::fflush(stdout);

  const Run holding = in_child("holding", total, output, inputs);
  const Run reading = in_child("reading", total, output, inputs);
  const Run merging = in_child("merging", total, output, inputs);
  fs::remove_all(dir);
  if (holding.seconds < 0 || reading.seconds < 0 || merging.seconds < 0) {
    std::fprintf(stderr, "merge_bench: a child failed\n");
    return 1;
  }
  std::printf("%-52s %8.2f s  %8.0f MB resident\n", "merge (tidemark merge)", merging.seconds,
              mb(merging.rss));
  std::printf("%-52s %8.2f s  %8.0f MB resident\n", "baseline: reading every rank's events once",
              reading.seconds, mb(reading.rss));
  std::printf("%-52s %8.2f s  %8.0f MB resident\n", "baseline: holding every rank's events at once",
              holding.seconds, mb(holding.rss));
  const double memory = static_cast<double>(merging.rss) / static_cast<double>(holding.rss);
  const bool ok = memory <= 0.5;
  std::printf("%-52s %8.2f   (target <= 0.50)  %s\n",
              "merge's resident memory / holding the events", memory, ok ? "ok" : "MISSED");
  std::printf("%-52s %8.2f   (reported)\n", "merge's time / reading the events",
              merging.seconds / reading.seconds);
  return ok ? 0 : 1;
}
