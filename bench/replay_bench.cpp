// What-if replay speed (docs/performance.md, docs/replay.md): a training-like trace recorded
// through the caching allocator itself, replayed once and under the 24 settings of --sweep,
// against reading the trace's events alone in the same run.
//
// Targets: >= 2 M events/s replayed; a 24-setting sweep of a 1 M-event trace in <= 10 s on
// this 2-core machine.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "allocator_trace.h"
#include "bench_ratio.h"
#include "profiler/analysis/trace.h"
#include "profiler/replay/replay.h"
#include "profiler/store/trace_writer.h"
#include "tensorlib/memory/caching_allocator.h"
#include "tensorlib/memory/fake_device.h"

namespace {

namespace ev = tidemark::events;
namespace mem = tl::memory;
namespace rp = tidemark::replay;
namespace st = tidemark::store;

std::string g_path;
uint64_t g_events = 0;

// Steps of a training loop on an 80 GiB device: parameters made once; per step, activations
// of varying sizes kept until the step's end and temporaries freed at once; every 50th step
// an empty_cache.
void generate(const std::string& path, uint64_t n_events) {
  st::TraceMeta meta;
  meta.command_line = "replay_bench synthetic";
  meta.devices.push_back({{ev::DeviceType::cuda, 0}, "cuda:0 (synthetic)", uint64_t{80} << 30});
  auto writer = st::TraceWriter::create(path, meta);
  for (uint64_t i = 1; i <= 64; ++i) writer->add_stack_node(i, 0, 0x400000 + i * 16);
  tidemark::bench::AllocatorTraceSink sink(*writer);
  {
    mem::CachingAllocator a(std::make_unique<mem::FakeDevice>(uint64_t{80} << 30));
    a.set_event_sink(&sink);
    std::mt19937_64 rng(7);
    std::vector<mem::DataPtr> params, step;
    for (int i = 0; i < 200; ++i) {
      sink.tick();
      params.push_back(a.allocate((size_t{1} << 16) + rng() % (size_t{64} << 20)));
    }
    for (uint64_t s = 0; sink.events() < n_events; ++s) {
      for (int k = 0; k < 300 && sink.events() < n_events; ++k) {
        sink.tick();
        const int shift = 9 + static_cast<int>(rng() % 20);  // 512 B .. 256 MiB
        mem::DataPtr p = a.allocate((size_t{1} << shift) + rng() % (size_t{1} << shift));
        if (k % 3 == 0) {
          step.push_back(p);
        } else {
          sink.tick();
          a.deallocate(p);
        }
      }
      for (const mem::DataPtr& p : step) {
        sink.tick();
        a.deallocate(p);
      }
      step.clear();
      if (s % 50 == 49) {
        sink.tick();
        a.empty_cache();
      }
      if (s % 20 == 0) writer->commit();
    }
    a.set_event_sink(nullptr);
    for (const mem::DataPtr& p : params) a.deallocate(p);
  }
  g_events = sink.events();
  writer->close(sink.now());
  writer.reset();
  st::finalize(path);
}

void BM_ReadEvents(benchmark::State& state) {
  auto trace = tidemark::analysis::Trace::open(g_path);
  for (auto _ : state) {
    uint64_t n = 0;
    trace.reader().for_each_event([&](const ev::Event&, uint64_t) { ++n; });
    benchmark::DoNotOptimize(n);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * g_events));
}
BENCHMARK(BM_ReadEvents)->Unit(benchmark::kMillisecond)->Repetitions(3)->ReportAggregatesOnly(true);

void BM_BuildPlans(benchmark::State& state) {
  auto trace = tidemark::analysis::Trace::open(g_path);
  for (auto _ : state) benchmark::DoNotOptimize(rp::build_plans(trace));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * g_events));
}
BENCHMARK(BM_BuildPlans)->Unit(benchmark::kMillisecond)->Repetitions(3)->ReportAggregatesOnly(true);

void BM_Replay(benchmark::State& state) {
  auto trace = tidemark::analysis::Trace::open(g_path);
  const std::vector<rp::Plan> plans = rp::build_plans(trace);
  rp::Settings s;
  s.conf = plans[0].recorded;
  for (auto _ : state) benchmark::DoNotOptimize(rp::run(plans[0], s));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * g_events));
}
BENCHMARK(BM_Replay)->Unit(benchmark::kMillisecond)->Repetitions(3)->ReportAggregatesOnly(true);

// Reading the trace, then 24 settings on every core: what `tidemark replay --sweep` does.
void BM_Sweep24(benchmark::State& state) {
  auto trace = tidemark::analysis::Trace::open(g_path);
  const auto grid = rp::default_sweep();
  for (auto _ : state) {
    const std::vector<rp::Plan> plans = rp::build_plans(trace);
    benchmark::DoNotOptimize(rp::sweep(plans[0], grid));
  }
}
BENCHMARK(BM_Sweep24)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);

}  // namespace

int main(int argc, char** argv) {
  const uint64_t n = tidemark::bench::take_events_option(argc, argv, 1'000'000);
  g_path = (std::filesystem::temp_directory_path() /
            ("replay_bench_" + std::to_string(::getpid()) + ".db"))
               .string();
  generate(g_path, n);
  std::printf("trace: %llu allocator events, %.1f MB\n", static_cast<unsigned long long>(g_events),
              static_cast<double>(std::filesystem::file_size(g_path)) / 1e6);
  const double events = static_cast<double>(g_events);
  int rc = tidemark::bench::run_with_targets(
      argc, argv,
      {
          // Guards against regressions, about 1.5x the figures measured (docs/performance.md).
          {"replay / reading the trace's events", "BM_Replay", "BM_ReadEvents", 4.0, true},
          {"building the plans / reading the trace's events", "BM_BuildPlans", "BM_ReadEvents", 5.5,
           true},
      },
      {
          {"replay, per event (>= 2 M events/s)", "BM_Replay", 500.0, events},
          {"24-setting sweep of the trace, read included (<= 10 s for 1 M events)", "BM_Sweep24",
           10e9 * events / 1e6, 1},
      });
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(g_path + suffix);
  return rc;
}
