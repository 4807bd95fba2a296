// PyTorch snapshot import: a synthetic ~100 MB snapshot pickle (protocol 4, shaped like the real
// ones in tests/data/pytorch: memoized keys and frames, a fresh frames list per alloc that its frees share,
// LONG1 addresses and times, history that starts with blocks allocated before the trace) is
// written to a file and imported into a finalized trace. Target from issue 6: a 100 MB snapshot
// in <= 10 s. Also reported: the pickle reader alone.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench_ratio.h"
#include "profiler/importers/pickle.h"
#include "profiler/importers/pickle_writer.h"
#include "profiler/importers/pytorch_snapshot.h"

namespace {

namespace im = tidemark::importers;
using im::pickle::PickleWriter;

constexpr size_t kTargetBytes = 100'000'000;
constexpr double kMaxImportSeconds = 10;

struct Synth {
  std::string bytes;
  size_t entries = 0;
};

// A snapshot of about `target` bytes.
Synth make_snapshot(size_t target) {
  std::mt19937_64 rng(42);
  PickleWriter w(4);
  std::map<std::string, uint32_t> keys;
  auto key = [&](const char* k) {
    auto it = keys.find(k);
    if (it != keys.end()) {
      w.get(it->second);
    } else {
      w.str(k);
      keys[k] = w.memoize();
    }
  };
  // 2,000 distinct frames (C++ and Python), 400 call paths of 20-60 frames through them.
  constexpr int kFrames = 2000, kPaths = 400;
  std::vector<int64_t> frame_memo(kFrames, -1);
  std::vector<std::vector<int>> paths(kPaths);
  for (auto& p : paths) {
    p.resize(20 + rng() % 41);
    for (int& f : p) f = static_cast<int>(rng() % kFrames);
  }
  auto frames_list = [&](const std::vector<int>& path) {
    w.empty_list();
    uint32_t m = w.memoize();
    w.mark();
    for (int f : path) {
      if (frame_memo[f] >= 0) {
        w.get(static_cast<uint32_t>(frame_memo[f]));
        continue;
      }
      w.empty_dict();
      frame_memo[f] = w.memoize();
      w.mark();
      key("name");
      w.str("at::native::op_" + std::to_string(f) + "(at::Tensor const&, c10::ArrayRef<long>)");
      key("filename");
      w.str(f % 3 ? "??" : "/home/user/model/train_" + std::to_string(f % 50) + ".py");
      key("line");
      w.integer(f % 3 ? 0 : f % 700);
      w.setitems();
    }
    w.appends();
    return m;
  };
  const uint64_t base = 0x7f0000000000;
  constexpr uint64_t kSegment = 20 << 20;
  constexpr int kSegments = 256;
  struct Live {
    uint64_t addr, size;
    uint32_t frames;
  };
  std::vector<Live> live;
  std::vector<uint64_t> free_slots;
  for (int s = 0; s < kSegments; ++s)
    for (uint64_t off = 0; off < kSegment; off += 1 << 20) free_slots.push_back(base + s * kSegment + off);
  std::shuffle(free_slots.begin(), free_slots.end(), rng);

  w.empty_dict();
  w.memoize();
  w.mark();
  key("device_traces");
  w.empty_list();
  w.memoize();
  w.mark();
  w.empty_list();
  w.memoize();
  w.mark();
  int64_t t_us = 1'738'780'408'787'504;
  size_t entries = 0;
  auto entry = [&](const char* action, uint64_t addr, uint64_t size, uint32_t frames, bool new_frames,
                   const std::vector<int>* path) {
    w.empty_dict();
    w.memoize();
    w.mark();
    key("action");
    key(action);  // action strings are memoized too
    key("addr");
    w.integer(static_cast<int64_t>(addr));
    key("size");
    w.integer(static_cast<int64_t>(size));
    key("stream");
    w.integer(0);
    key("time_us");
    w.integer(t_us += 1 + static_cast<int64_t>(rng() % 50));
    key("frames");
    uint32_t m = frames;
    if (new_frames) {
      m = frames_list(*path);
    } else {
      w.get(frames);
    }
    w.setitems();
    ++entries;
    return m;
  };
  // Blocks allocated before the trace: freed early in it.
  for (int i = 0; i < 300; ++i) {
    uint64_t addr = free_slots.back();
    free_slots.pop_back();
    live.push_back({addr, 512 + rng() % (1 << 20), 0});
  }
  for (const Live& b : live) {
    uint32_t m = entry("free_requested", b.addr, b.size, 0, true, &paths[rng() % kPaths]);
    entry("free_completed", b.addr, b.size, m, false, nullptr);
  }
  for (const Live& b : live) free_slots.push_back(b.addr);
  live.clear();
  // Then a steady mix around ~2,000 live blocks.
  while (w.size() < target) {
    if (live.size() < 1000 || (live.size() < 3000 && rng() % 2)) {
      uint64_t addr = free_slots.back();
      free_slots.pop_back();
      uint64_t size = rng() % 4 ? 512 + rng() % 65536 : 1 + rng() % (1 << 20);
      const auto& path = paths[rng() % kPaths];
      uint32_t m = entry("alloc", addr, size, 0, true, &path);
      live.push_back({addr, size, m});
    } else {
      size_t i = rng() % live.size();
      Live b = live[i];
      live[i] = live.back();
      live.pop_back();
      entry("free_requested", b.addr, b.size, b.frames, false, nullptr);
      entry("free_completed", b.addr, b.size, b.frames, false, nullptr);
      free_slots.push_back(b.addr);
    }
  }
  w.appends();  // device 0's entries
  w.appends();  // device_traces
  // The final segments: every slot still allocated, as 1 MiB blocks in 20 MiB segments.
  key("segments");
  w.empty_list();
  w.memoize();
  w.mark();
  std::sort(live.begin(), live.end(), [](const Live& a, const Live& b) { return a.addr < b.addr; });
  size_t li = 0;
  for (int s = 0; s < kSegments; ++s) {
    uint64_t seg = base + s * kSegment;
    w.empty_dict();
    w.memoize();
    w.mark();
    key("device");
    w.integer(0);
    key("address");
    w.integer(static_cast<int64_t>(seg));
    key("total_size");
    w.integer(kSegment);
    key("stream");
    w.integer(0);
    key("segment_type");
    w.str("large");
    key("is_expandable");
    w.boolean(false);
    key("blocks");
    w.empty_list();
    w.memoize();
    w.mark();
    for (; li < live.size() && live[li].addr < seg + kSegment; ++li) {
      w.empty_dict();
      w.memoize();
      w.mark();
      key("address");
      w.integer(static_cast<int64_t>(live[li].addr));
      key("size");
      w.integer(static_cast<int64_t>((live[li].size + 511) / 512 * 512));
      key("requested_size");
      w.integer(static_cast<int64_t>(live[li].size));
      key("state");
      w.str("active_allocated");
      key("frames");
      w.get(live[li].frames);
      w.setitems();
    }
    w.appends();
    w.setitems();
  }
  w.appends();
  w.setitems();
  return {w.finish(), entries};
}

const Synth& snapshot() {
  static const Synth s = make_snapshot(kTargetBytes);
  return s;
}

std::string temp_path(const char* name) {
  return (std::filesystem::temp_directory_path() / ("tidemark-import-bench-" + std::to_string(::getpid()) + name))
      .string();
}

void remove_trace(const std::string& p) {
  for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(p + s);
}

void BM_ParsePickle100MB(benchmark::State& state) {
  const Synth& s = snapshot();
  for (auto _ : state) {
    im::pickle::Document doc = im::pickle::parse(s.bytes);
    benchmark::DoNotOptimize(doc.container_count());
  }
  state.counters["MB"] = static_cast<double>(s.bytes.size()) / 1e6;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * s.bytes.size()));
}
BENCHMARK(BM_ParsePickle100MB)->Unit(benchmark::kMillisecond)->Iterations(1)->Repetitions(3)
    ->ComputeStatistics("min", tidemark::bench::min_of)->ReportAggregatesOnly(true);

void BM_ImportSnapshot100MB(benchmark::State& state) {
  const Synth& s = snapshot();
  const std::string in = temp_path(".pickle"), out = temp_path(".db");
  std::ofstream(in, std::ios::binary) << s.bytes;
  im::ImportStats stats;
  for (auto _ : state) {
    stats = im::import_pytorch_snapshot(in, out);
    state.PauseTiming();
    remove_trace(out);
    state.ResumeTiming();
  }
  std::filesystem::remove(in);
  state.counters["MB"] = static_cast<double>(s.bytes.size()) / 1e6;
  state.counters["entries"] = static_cast<double>(s.entries);
  state.counters["events"] = static_cast<double>(stats.events);
  state.counters["frames"] = static_cast<double>(stats.frames);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * s.bytes.size()));
}
BENCHMARK(BM_ImportSnapshot100MB)->Unit(benchmark::kMillisecond)->Iterations(1)->Repetitions(3)
    ->ComputeStatistics("min", tidemark::bench::min_of)->ReportAggregatesOnly(true);

}  // namespace

int main(int argc, char** argv) {
  const Synth& s = snapshot();
  // TIDEMARK_IMPORT_BENCH_WRITE=PATH: write the synthetic snapshot there and exit (to profile
  // `tidemark import` on it).
  if (const char* path = std::getenv("TIDEMARK_IMPORT_BENCH_WRITE")) {
    std::ofstream(path, std::ios::binary) << s.bytes;
    std::printf("wrote %s\n", path);
    return 0;
  }
  std::printf("synthetic snapshot: %.1f MB, %zu trace entries\n", static_cast<double>(s.bytes.size()) / 1e6,
              s.entries);
  return tidemark::bench::run_with_targets(
      argc, argv, {},
      {{"import of a 100 MB PyTorch snapshot (issue 6: <= 10 s)", "BM_ImportSnapshot100MB",
        kMaxImportSeconds * 1e9}});
}
