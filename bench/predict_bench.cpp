// `tidemark predict` speed (docs/predict.md, docs/performance.md): three runs of a training-like
// program at sizes 1, 2 and 3 (about 1 M allocator events each, recorded through the caching
// allocator itself), aligned, fitted and predicted at 6, against reading the three traces'
// events and against one replay of the largest, in the same run.
//
// Target: a prediction from 1 M-event runs in <= 10 s on this 2-core machine.
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
#include "profiler/predict/predict.h"
#include "profiler/replay/replay.h"
#include "profiler/store/trace_writer.h"
#include "tensorlib/memory/caching_allocator.h"
#include "tensorlib/memory/fake_device.h"

namespace {

namespace ev = tidemark::events;
namespace mem = tl::memory;
namespace pr = tidemark::predict;
namespace rp = tidemark::replay;
namespace st = tidemark::store;

std::vector<std::string> g_paths;
uint64_t g_events = 0;  // of the largest run

// Steps of a training loop at size x: 200 parameters made once (constant); per step 300
// allocations from 64 sites, a third kept to the step's end; the sites' sizes grow with x
// (sites 1-32), with x^2 (33-48) or not at all (49-64). The same steps at every x.
void generate(const std::string& path, uint64_t x, uint64_t n_events) {
  st::TraceMeta meta;
  meta.command_line = "predict_bench synthetic";
  meta.devices.push_back({{ev::DeviceType::cuda, 0}, "cuda:0 (synthetic)", uint64_t{1} << 40});
  auto writer = st::TraceWriter::create(path, meta);
  for (uint64_t i = 1; i <= 65; ++i) writer->add_stack_node(i, 0, 0x400000 + i * 16);
  tidemark::bench::AllocatorTraceSink sink(*writer);
  {
    mem::CachingAllocator a(std::make_unique<mem::FakeDevice>(uint64_t{1} << 40));
    a.set_event_sink(&sink);
    std::mt19937_64 rng(7);
    std::vector<mem::DataPtr> params, step;
    for (int i = 0; i < 200; ++i) {
      sink.tick(65);
      params.push_back(a.allocate((size_t{1} << 16) + rng() % (size_t{16} << 20)));
    }
    for (uint64_t s = 0; sink.events() < n_events; ++s) {
      for (int k = 0; k < 300; ++k) {
        const uint64_t site = 1 + static_cast<uint64_t>(k) % 64;
        const uint64_t base = (uint64_t{1} << (9 + k % 13)) + static_cast<uint64_t>(k) * 512;
        const uint64_t size = site <= 32 ? base * x : site <= 48 ? base / 8 * x * x : base;
        sink.tick(site);
        mem::DataPtr p = a.allocate(size);
        if (k % 3 == 0) {
          step.push_back(p);
        } else {
          sink.tick(site);
          a.deallocate(p);
        }
      }
      for (const mem::DataPtr& p : step) {
        sink.tick(0);
        a.deallocate(p);
      }
      step.clear();
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
  for (auto _ : state) {
    uint64_t n = 0;
    for (const std::string& p : g_paths) {
      auto trace = tidemark::analysis::Trace::open(p);
      trace.reader().for_each_event([&](const ev::Event&, uint64_t) { ++n; });
    }
    benchmark::DoNotOptimize(n);
  }
}
BENCHMARK(BM_ReadEvents)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);

void BM_ReplayLargest(benchmark::State& state) {
  auto trace = tidemark::analysis::Trace::open(g_paths.back());
  for (auto _ : state) {
    const std::vector<rp::Plan> plans = rp::build_plans(trace);
    rp::Settings s;
    s.conf = plans[0].recorded;
    benchmark::DoNotOptimize(rp::run(plans[0], s));
  }
}
BENCHMARK(BM_ReplayLargest)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);

// What `tidemark predict 1=a.db 2=b.db 3=c.db --at 6` does once its traces are open.
void BM_Predict(benchmark::State& state) {
  std::vector<tidemark::analysis::Trace> traces;
  for (const std::string& p : g_paths) traces.push_back(tidemark::analysis::Trace::open(p));
  for (auto _ : state) {
    std::vector<pr::Run> runs;
    for (size_t i = 0; i < traces.size(); ++i)
      runs.push_back({static_cast<double>(i + 1), &traces[i], ""});
    pr::Model m = pr::Model::build(runs);
    benchmark::DoNotOptimize(m.at(6, {}));
  }
}
BENCHMARK(BM_Predict)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);

}  // namespace

int main(int argc, char** argv) {
  const uint64_t n = tidemark::bench::take_events_option(argc, argv, 1'000'000);
  for (uint64_t x = 1; x <= 3; ++x) {
    g_paths.push_back(
        (std::filesystem::temp_directory_path() /
         ("predict_bench_" + std::to_string(::getpid()) + "_" + std::to_string(x) + ".db"))
            .string());
    generate(g_paths.back(), x, n);
  }
  std::printf("runs: 3 traces of %llu allocator events each\n",
              static_cast<unsigned long long>(g_events));
  int rc = tidemark::bench::run_with_targets(
      argc, argv,
      {
          // Guards against regressions, about 1.5x the figures measured (docs/performance.md).
          {"prediction / reading the three runs' events", "BM_Predict", "BM_ReadEvents", 10.0,
           true},
          {"prediction / one replay of the largest run", "BM_Predict", "BM_ReplayLargest", 6.0,
           true},
      },
      {
          {"prediction from three 1 M-event runs (<= 10 s)", "BM_Predict",
           10e9 * static_cast<double>(g_events) / 1e6, 1},
      });
  for (const std::string& p : g_paths)
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(p + suffix);
  return rc;
}
