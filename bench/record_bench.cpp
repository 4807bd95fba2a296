// The recorder's costs: per event on the emitting thread (without stacks and with 32-frame
// stacks), and on a training step, recorded vs not, in the same run.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "../samples/mlp.h"
#include "bench_ratio.h"
#include "profiler/record/recorder.h"

namespace {

namespace ev = tidemark::events;

std::string trace_path(const char* name) {
  return (std::filesystem::temp_directory_path() /
          (std::string("tidemark-bench-") + name + "-" + std::to_string(getpid()) + ".db"))
      .string();
}

// Records for the lifetime of the object, into a file removed afterwards.
class Recording {
 public:
  Recording(const char* name, int stacks) : path_(trace_path(name)) {
    tidemark::record::Options o;
    o.path = path_;
    o.stack_depth = stacks;
    o.finalize = false;
    tidemark::record::start(o);
  }
  ~Recording() {
    tidemark::record::stop();
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path_ + suffix);
  }

 private:
  std::string path_;
};

void emit_alloc_event() {
  ev::Event e;
  e.kind = ev::Kind::alloc;
  e.block = {0x7f0000001000, 4096, 4000, 0, 0x7f0000000000, ev::Pool::small, ev::Category::unknown};
  ev::dispatch(e);
}

// An empty sink: the cost of building and dispatching the event itself.
struct NullSink final : ev::Sink {
  void on_event(const ev::Event& e) noexcept override { benchmark::DoNotOptimize(&e); }
};

void BM_EventNullSink(benchmark::State& state) {
  NullSink sink;
  ev::add_sink(&sink);
  for (auto _ : state) emit_alloc_event();
  ev::remove_sink(&sink);
}
BENCHMARK(BM_EventNullSink)->Repetitions(5)->ReportAggregatesOnly(true);

// The emitting thread's cost, measured over batches that fit in its ring; between batches
// (untimed) the writer thread catches up, so back-pressure does not enter the figure.
constexpr int kBatch = 8192;

template <typename Emit>
void timed_batches(benchmark::State& state, Emit emit) {
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kBatch; ++i) emit();
    auto t1 = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    tidemark::record::flush(/*commit=*/false);
  }
}

void BM_EventRecorded(benchmark::State& state) {
  Recording rec("event", 0);
  timed_batches(state, emit_alloc_event);
}
BENCHMARK(BM_EventRecorded)
    ->UseManualTime()
    ->Iterations(200)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

// Recursion so a captured stack has at least `depth` frames.
[[gnu::noinline]] void emit_at_depth(int depth) {
  if (depth > 0) {
    emit_at_depth(depth - 1);
    benchmark::ClobberMemory();  // keeps the call from becoming a tail call
    return;
  }
  emit_alloc_event();
}

void BM_EventRecordedStacks32(benchmark::State& state) {
  Recording rec("stacks", 32);
  timed_batches(state, [] { emit_at_depth(32); });
}
BENCHMARK(BM_EventRecordedStacks32)
    ->UseManualTime()
    ->Iterations(20)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

void BM_EventNullSinkDepth32(benchmark::State& state) {
  NullSink sink;
  ev::add_sink(&sink);
  for (auto _ : state) emit_at_depth(32);
  ev::remove_sink(&sink);
}
BENCHMARK(BM_EventNullSinkDepth32)->Repetitions(5)->ReportAggregatesOnly(true);

samples::MlpConfig step_config() {
  samples::MlpConfig c;
  c.hidden = 256;
  c.batch = 128;
  return c;
}

void BM_TrainStep(benchmark::State& state) {
  samples::MlpTrainer t(step_config());
  for (auto _ : state) benchmark::DoNotOptimize(t.step());
}
BENCHMARK(BM_TrainStep)
    ->Repetitions(9)
    ->ComputeStatistics("min", tidemark::bench::min_of)
    ->ReportAggregatesOnly(true);

void BM_TrainStepRecorded(benchmark::State& state) {
  samples::MlpTrainer t(step_config());
  Recording rec("train", 0);
  for (auto _ : state) benchmark::DoNotOptimize(t.step());
}
BENCHMARK(BM_TrainStepRecorded)
    ->Repetitions(9)
    ->ComputeStatistics("min", tidemark::bench::min_of)
    ->ReportAggregatesOnly(true);

void BM_TrainStepRecordedStacks(benchmark::State& state) {
  samples::MlpTrainer t(step_config());
  Recording rec("train-stacks", 32);
  for (auto _ : state) benchmark::DoNotOptimize(t.step());
}
BENCHMARK(BM_TrainStepRecordedStacks)
    ->Repetitions(9)
    ->ComputeStatistics("min", tidemark::bench::min_of)
    ->ReportAggregatesOnly(true);

}  // namespace

int main(int argc, char** argv) {
  // Alternate the repetitions of the recorded and unrecorded steps so that drift on a shared
  // machine falls on both alike.
  std::vector<char*> args(argv, argv + argc);
  std::string interleave = "--benchmark_enable_random_interleaving=true";
  args.insert(args.begin() + 1, interleave.data());
  argc = static_cast<int>(args.size());
  argv = args.data();
  using tidemark::bench::Target;
  return tidemark::bench::run_with_targets(
      argc, argv,
      {{"training step recorded (no stacks) vs not recorded", "BM_TrainStepRecorded",
        "BM_TrainStep", 1.05, true},
       {"training step recorded (32-frame stacks) vs not recorded", "BM_TrainStepRecordedStacks",
        "BM_TrainStep", 1.25, true}},
      {{"recorder hot path per event, no stacks", "BM_EventRecorded", 50.0, kBatch},
       {"recorder hot path per event, 32-frame stacks", "BM_EventRecordedStacks32", 1500.0,
        kBatch}});
}
