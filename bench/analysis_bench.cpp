// analysis_bench: the analysis library on a large synthetic trace. A generator writes a trace
// of N events (default 10M) with TraceWriter and finalizes it, then `summary` and `timeline`
// (the work `tidemark summary` and `tidemark timeline` do) are timed, best of 3.
//
//   analysis_bench [--events N] [--trace PATH] [--keep]
//
// --trace with an existing finalized file reuses it (generating and finalizing 10M events
// takes a few minutes: finalize runs at about 2 s per million events); --keep leaves the
// generated file. Targets (issue 6): summary <= 2 s, timeline <= 1 s; and the PyTorch snapshot
// export within 2x the time of the Chrome trace export of the same trace (both stream every
// memory event; the snapshot also replays the history and writes the stacks' frames).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "profiler/analysis/export.h"
#include "profiler/analysis/memory.h"
#include "profiler/analysis/trace.h"
#include "profiler/store/sqlite_db.h"
#include "profiler/store/trace_writer.h"
#include "synthetic_trace.h"

namespace {

namespace an = tidemark::analysis;
namespace ev = tidemark::events;
namespace st = tidemark::store;

constexpr double kSummaryTargetSeconds = 2.0;
constexpr double kTimelineTargetSeconds = 1.0;
constexpr double kSnapshotVsChromeTarget = 2.0;

void generate(const std::string& path, uint64_t n_events) {
  tidemark::bench::generate_synthetic_trace(path, n_events);
}

// For the exports: a caching allocator in its steady state. 16 segments of 20 MiB reserved at
// the start; each step bump-allocates blocks from 64 sites inside them (reusing the same
// addresses step after step) and frees them all at its end; then the segments are released.
void generate_steady(const std::string& path, uint64_t n_events) {
  st::TraceMeta meta;
  meta.command_line = "analysis_bench steady";
  meta.start_ts_ns = 1'000'000'000;
  const ev::DeviceId cuda{ev::DeviceType::cuda, 0};
  meta.devices.push_back({cuda, "cuda:0 (synthetic)", 80ull << 30});
  auto w = st::TraceWriter::create(path, meta);
  for (uint64_t i = 1; i <= 64; ++i) w->add_stack_node(i, 0, 0x400000 + i * 16);
  constexpr uint64_t kSeg = 20 << 20, kBase = 0x7f0000000000;
  constexpr int kSegments = 16;
  ev::Event e;
  e.thread_id = 1;
  e.device = cuda;
  uint64_t seq = 0, ts = meta.start_ts_ns;
  auto event = [&](ev::Kind k, uint64_t addr, uint64_t size, uint64_t seg, uint64_t stack) {
    e.kind = k;
    e.seq = ++seq;
    e.ts_ns = (ts += 500);
    e.block = ev::BlockInfo{};
    e.block.addr = addr;
    e.block.size = e.block.requested_size = size;
    e.block.segment = seg;
    e.block.pool = ev::Pool::large;
    w->append(e, stack);
  };
  for (int s = 0; s < kSegments; ++s)
    event(ev::Kind::segment_alloc, kBase + s * kSeg, kSeg, kBase + s * kSeg, 0);
  std::vector<std::pair<uint64_t, uint64_t>> live;
  while (seq + 2 * kSegments < n_events) {
    for (int s = 0; s < kSegments && seq + 2 * kSegments < n_events; ++s) {
      const uint64_t seg = kBase + s * kSeg;
      for (uint64_t at = seg, k = 0; k < 8; ++k) {
        const uint64_t size = 512 * (1 + (seq * 104729) % 1024);
        event(ev::Kind::alloc, at, size, seg, 1 + (seq * 7919) % 64);
        live.emplace_back(at, seg);
        at += size;
      }
    }
    for (auto [addr, seg] : live) {
      event(ev::Kind::free_requested, addr, 0, seg, 0);
      event(ev::Kind::free_completed, addr, 0, seg, 0);
    }
    live.clear();
    if (seq % 8192 < 400) w->commit();
  }
  for (int s = 0; s < kSegments; ++s)
    event(ev::Kind::segment_free, kBase + s * kSeg, kSeg, kBase + s * kSeg, 0);
  w->close(ts);
  w.reset();
  st::finalize(path);
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
  // Size on disk, finalized, against the raw event blocks it was derived from.
  {
    tidemark::store::detail::Stmt raw(trace.reader().db(),
                                      "SELECT TOTAL(length(data)) FROM event_blocks");
    const double raw_bytes = raw.step() ? raw.f64(0) : 0;
    const double events = static_cast<double>(std::max<uint64_t>(s.event_count, 1));
    const auto file = static_cast<double>(std::filesystem::file_size(path));
    std::printf("%-60s %8.1f B/event (%.1fx the raw events' %.1f B/event)\n",
                "finalized trace on disk", file / events, file / std::max(raw_bytes, 1.0),
                raw_bytes / events);
  }
  // The exports, on a steady-state trace a tenth the size (every block inside a segment).
  const std::string steady = path + ".steady.db";
  generate_steady(steady, std::max<uint64_t>(n / 10, 10000));
  std::ofstream sink("/dev/null", std::ios::binary);
  double chrome_s = best_of_3([&] { an::export_chrome(an::Trace::open(steady), sink); });
  an::SnapshotExport exported;
  double snapshot_s =
      best_of_3([&] { exported = an::export_snapshot(an::Trace::open(steady), sink); });
  const double snapshot_ratio = snapshot_s / chrome_s;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(steady + suffix);
  bool summary_ok = summary_s <= kSummaryTargetSeconds;
  bool timeline_ok = timeline_s <= kTimelineTargetSeconds;
  std::printf("%-60s %8.3f s <= %4.1f s  %s\n", "summary (open, peaks, top at peak, leaks)",
              summary_s, kSummaryTargetSeconds, summary_ok ? "ok" : "MISSED");
  std::printf("%-60s %8.3f s <= %4.1f s  %s\n", "timeline (open, 1000 columns, whole trace)",
              timeline_s, kTimelineTargetSeconds, timeline_ok ? "ok" : "MISSED");
  bool export_ok = snapshot_ratio <= kSnapshotVsChromeTarget;
  std::printf("%-60s %8.2fx <= %4.1fx  %s (%.3f s vs %.3f s, %llu entries)\n",
              "export --format snapshot vs --format chrome", snapshot_ratio,
              kSnapshotVsChromeTarget, export_ok ? "ok" : "MISSED", snapshot_s, chrome_s,
              static_cast<unsigned long long>(exported.entries));
  if (!reuse && !keep)
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return summary_ok && timeline_ok && export_ok ? 0 : 1;
}
