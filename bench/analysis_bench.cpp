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

namespace {

namespace an = tidemark::analysis;
namespace ev = tidemark::events;
namespace st = tidemark::store;

constexpr double kSummaryTargetSeconds = 2.0;
constexpr double kTimelineTargetSeconds = 1.0;

// A training-like pattern: steps of ~1000 events, each allocating activations that live until
// the step's end and temporaries freed at once, from 64 sites; a sync per step; a new 20 MiB
// segment every 100k events; ~0.5 us between events.
void generate(const std::string& path, uint64_t n_events) {
  st::TraceMeta meta;
  meta.command_line = "analysis_bench synthetic";
  meta.start_ts_ns = 1'000'000'000;
  meta.devices.push_back({ev::DeviceId{ev::DeviceType::cuda, 0}, "cuda:0 (synthetic)", 80ull << 30});
  auto w = st::TraceWriter::create(path, meta);
  for (uint64_t i = 1; i <= 64; ++i) w->add_stack_node(i, 0, 0x400000 + i * 16);
  ev::Event e;
  e.thread_id = 1;
  e.device = ev::DeviceId{ev::DeviceType::cuda, 0};
  uint64_t seq = 0, ts = meta.start_ts_ns, step = 0, next_addr = 0x7f0000000000;
  std::vector<std::pair<uint64_t, uint64_t>> step_live;  // (addr, size) freed at step end
  auto emit = [&](ev::Kind kind, uint64_t stack) {
    e.kind = kind;
    e.seq = ++seq;
    e.ts_ns = (ts += 400 + (seq * 2654435761u) % 200);
    w->append(e, stack);
  };
  auto block = [&](ev::Kind kind, uint64_t addr, uint64_t size, uint64_t stack) {
    e.block = ev::BlockInfo{};
    e.block.addr = addr;
    e.block.size = size;
    e.block.requested_size = size;
    e.block.segment = addr & ~uint64_t{(20 << 20) - 1};
    e.block.pool = size > (1 << 20) ? ev::Pool::large : ev::Pool::small;
    emit(kind, stack);
  };
  while (seq < n_events) {
    if (seq % 100000 < 300) block(ev::Kind::segment_alloc, next_addr + (1ull << 40), 20 << 20, 0);
    e.name = ev::NameInfo{};
    e.name.value = step++;
    emit(ev::Kind::step, 0);
    for (int k = 0; k < 120 && seq < n_events; ++k) {
      uint64_t site = 1 + (seq * 7919) % 64;
      uint64_t size = 512 * (1 + (seq * 104729) % 4096);
      uint64_t addr = (next_addr += size);
      block(ev::Kind::alloc, addr, size, site);
      if (k % 3 == 0) {
        step_live.emplace_back(addr, size);  // an activation, freed at the step's end
      } else {
        block(ev::Kind::free_requested, addr, size, 0);
        block(ev::Kind::free_completed, addr, size, 0);
      }
    }
    e.sync = ev::SyncInfo{};
    e.sync.kind = ev::SyncKind::item;
    e.sync.duration_ns = 1000;
    emit(ev::Kind::sync, 1);
    for (auto [addr, size] : step_live) {
      block(ev::Kind::free_requested, addr, size, 0);
      block(ev::Kind::free_completed, addr, size, 0);
    }
    step_live.clear();
    if (seq % 8192 < 400) w->commit();
  }
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
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t n = 10'000'000;
  std::string path;
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--events") && i + 1 < argc) n = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--trace") && i + 1 < argc) path = argv[++i];
    else if (!std::strcmp(argv[i], "--keep")) keep = true;
    else {
      std::fprintf(stderr, "usage: analysis_bench [--events N] [--trace PATH] [--keep]\n");
      return 2;
    }
  }
  const bool reuse = !path.empty() && std::filesystem::exists(path);
  if (path.empty())
    path = (std::filesystem::temp_directory_path() /
            ("tidemark_analysis_bench_" + std::to_string(::getpid()) + ".db")).string();
  if (!reuse) {
    auto t0 = std::chrono::steady_clock::now();
    generate(path, n);
    std::printf("generated and finalized %llu events in %.1f s: %s\n",
                static_cast<unsigned long long>(n),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                path.c_str());
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
