// PyTorch snapshot import, two ways:
//  * a synthetic ~100 MB snapshot pickle (protocol 4, shaped like the real ones in
//    tests/data/pytorch: memoized keys and frames, a fresh frames list per alloc that its frees
//    share, LONG1 addresses and times, history that starts with blocks allocated before the
//    trace), written to a file and imported into a finalized trace. Target: <= 10 s. Also
//    reported: the pickle reader alone.
//  * a real snapshot (a Transformer's three training iterations) repeated until the file is
//    1 GB (TIDEMARK_IMPORT_BENCH_SCALED_MB): each copy's addresses and times shifted past the
//    previous copy's, its frame dicts shared with the original's as PyTorch's memo shares them,
//    everything else written anew. The import runs in a child process, so its peak resident
//    memory is its own. Targets: <= 20 s and <= 2 GB resident.
//  * a snapshot whose frames are all distinct (a quarter of that size): no program's are, but
//    memory must stay bounded on any shape (Note [Frame bound] in snapshot_reader.cpp).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bench_ratio.h"
#include "own_peak_rss.h"
#include "profiler/importers/pytorch_snapshot.h"
#include "profiler/pickle/pickle.h"
#include "profiler/pickle/pickle_writer.h"

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
    for (uint64_t off = 0; off < kSegment; off += 1 << 20)
      free_slots.push_back(base + s * kSegment + off);
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
  auto entry = [&](const char* action, uint64_t addr, uint64_t size, uint32_t frames,
                   bool new_frames, const std::vector<int>* path) {
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
  return (std::filesystem::temp_directory_path() /
          ("tidemark-import-bench-" + std::to_string(::getpid()) + name))
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
BENCHMARK(BM_ParsePickle100MB)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(3)
    ->ComputeStatistics("min", tidemark::bench::min_of)
    ->ReportAggregatesOnly(true);

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
BENCHMARK(BM_ImportSnapshot100MB)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(3)
    ->ComputeStatistics("min", tidemark::bench::min_of)
    ->ReportAggregatesOnly(true);

// ---- A real snapshot, repeated ------------------------------------------------------------------

// Writes `copies` copies of a parsed real snapshot as one snapshot (see the file comment).
class Repeater {
 public:
  // `share_frames` false: every frame dict and its strings are written anew wherever they occur
  // (a pickle whose writer shared nothing: the shape that costs an importer the most memory).
  explicit Repeater(const im::pickle::Document& doc, bool share_frames = true)
      : doc_(doc), share_frames_(share_frames) {
    // The shifts: addresses past the copy's highest address + size, times past its last time.
    scan(doc.root());
    while (addr_shift_ < max_addr_ - min_addr_) addr_shift_ <<= 1;
    time_shift_ = max_time_ - min_time_ + 1000;
  }

  std::string write(int copies) {
    using im::pickle::Ref;
    using im::pickle::Type;
    PickleWriter w(4);
    w_ = &w;
    strings_.clear();  // memo indices belong to one pickle
    shared_.clear();
    per_copy_.clear();
    copy_ = -1;
    Ref root = doc_.root();
    w.empty_dict().mark();
    str("segments");
    w.empty_list();
    for (int k = 0; k < copies; ++k) items(*root.get("segments"), k);
    str("device_traces");
    w.empty_list().mark();
    Ref traces = *root.get("device_traces");
    for (size_t d = 0; d < traces.size(); ++d) {
      w.empty_list();
      for (int k = 0; k < copies; ++k) items(traces[d], k);
    }
    w.appends();
    for (const char* key : {"allocator_settings", "external_annotations"}) {
      if (auto v = root.get(key)) {
        str(key);
        if (v->type() == Type::list) {
          w.empty_list();
          for (int k = 0; k < copies; ++k) items(*v, k);
        } else {
          emit(*v, 0);
        }
      }
    }
    w.setitems();
    return w.finish();
  }

 private:
  // Appends the items of `list` (copy k) to the list on top of the stack, in batches.
  void items(im::pickle::Ref list, int k) {
    for (size_t i = 0; i < list.size(); i += 1000) {
      w_->mark();
      for (size_t j = i; j < std::min(list.size(), i + 1000); ++j) emit(list[j], k);
      w_->appends();
    }
  }
  void str(std::string_view s) {
    if (in_unshared_frame_) {
      w_->str(s);
      w_->memoize();
      return;
    }
    auto it = strings_.find(std::string(s));
    if (it != strings_.end()) {
      w_->get(it->second);
      return;
    }
    w_->str(s);
    strings_.emplace(std::string(s), w_->memoize());
  }
  static bool shifted_key(std::string_view k) {
    return k == "addr" || k == "address" || k == "time_us";
  }
  // Frame dicts (no address or time inside) are shared by every copy; other containers are
  // memoized within their copy, as PyTorch shares an alloc's frames list with its frees.
  void emit(im::pickle::Ref v, int k) {
    using im::pickle::Type;
    switch (v.type()) {
      case Type::none:
        w_->none();
        return;
      case Type::boolean:
        w_->boolean(*v.as_bool());
        return;
      case Type::integer:
        w_->integer(*v.as_int());
        return;
      case Type::floating:
        w_->floating(*v.as_double());
        return;
      case Type::string:
        str(*v.as_string());
        return;
      default:
        break;
    }
    const bool frame = v.type() == Type::dict && !v.get("addr") && !v.get("address") &&
                       !v.get("time_us") && v.get("filename");
    auto& memo = frame ? shared_ : per_copy_;
    if (!frame && k != copy_) per_copy_.clear(), copy_ = k;
    const bool anew = frame && !share_frames_;
    if (auto it = memo.find(v.identity()); !anew && it != memo.end()) {
      w_->get(it->second);
      return;
    }
    if (v.type() == Type::dict) {
      w_->empty_dict().mark();
      for (size_t i = 0; i < v.size(); ++i) {
        emit(v.key(i), k);
        in_unshared_frame_ = anew;
        auto key = v.key(i).as_string();
        auto n = v.value(i).as_int();
        if (key && n && shifted_key(*key))
          w_->integer(*n + k * static_cast<int64_t>(*key == "time_us" ? time_shift_ : addr_shift_));
        else
          emit(v.value(i), k);
        in_unshared_frame_ = false;
      }
      w_->setitems();
    } else {
      v.type() == Type::tuple ? w_->mark() : w_->empty_list().mark();
      for (size_t i = 0; i < v.size(); ++i) emit(v[i], k);
      v.type() == Type::tuple ? w_->tuple() : w_->appends();
    }
    const uint32_t m = w_->memoize();
    if (!anew) memo.emplace(v.identity(), m);
  }
  void scan(im::pickle::Ref v) {
    using im::pickle::Type;
    if (v.type() == Type::dict) {
      for (size_t i = 0; i < v.size(); ++i) {
        auto key = v.key(i).as_string();
        auto n = v.value(i).as_int();
        if (key && n && (*key == "addr" || *key == "address")) {
          int64_t size = 0;
          for (const char* s : {"size", "total_size"})
            if (auto z = v.get(s)) size = z->as_int().value_or(0);
          min_addr_ = std::min<uint64_t>(min_addr_, static_cast<uint64_t>(*n));
          max_addr_ = std::max<uint64_t>(max_addr_, static_cast<uint64_t>(*n + size));
        } else if (key && n && *key == "time_us") {
          min_time_ = std::min<uint64_t>(min_time_, static_cast<uint64_t>(*n));
          max_time_ = std::max<uint64_t>(max_time_, static_cast<uint64_t>(*n));
        } else if (v.value(i).type() == Type::dict || v.value(i).type() == Type::list) {
          scan(v.value(i));
        }
      }
    } else if (v.type() == Type::list) {
      for (size_t i = 0; i < v.size(); ++i) scan(v[i]);
    }
  }

  const im::pickle::Document& doc_;
  bool share_frames_;
  bool in_unshared_frame_ = false;  // writing a value of a frame dict written anew
  PickleWriter* w_ = nullptr;
  std::map<std::string, uint32_t> strings_;
  std::map<uint32_t, uint32_t> shared_, per_copy_;  // container identity -> memo index
  int copy_ = -1;
  uint64_t min_addr_ = UINT64_MAX, max_addr_ = 0, min_time_ = UINT64_MAX, max_time_ = 0;
  uint64_t addr_shift_ = 1, time_shift_ = 0;
};

struct Scaled {
  std::string path;
  size_t bytes = 0;
  int copies = 0;
};
std::vector<std::string>
    g_temporaries;  // scaled snapshots written to temporary files (main removes them)

// The real snapshot repeated to about TIDEMARK_IMPORT_BENCH_SCALED_MB (default 1000) MB, in a
// file; with `share_frames` false, its frame dicts written anew at every use (Repeater).
Scaled make_scaled(bool share_frames, const char* keep) {
  Scaled out;
  std::ifstream in(TIDEMARK_REAL_SNAPSHOT, std::ios::binary);
  std::string real{std::istreambuf_iterator<char>(in), {}};
  im::pickle::Document doc = im::pickle::parse(real);
  Repeater rep(doc, share_frames);
  const char* env = std::getenv("TIDEMARK_IMPORT_BENCH_SCALED_MB");
  const double target = (env ? std::atof(env) : 1000.0) * 1e6;
  const size_t one = rep.write(1).size(), two = rep.write(2).size();  // a copy after the first
  out.copies = std::max(1, static_cast<int>(1 + (target - static_cast<double>(one)) /
                                                    static_cast<double>(two - one)));
  std::string bytes = rep.write(out.copies);
  out.bytes = bytes.size();
  out.path = keep ? keep : temp_path(share_frames ? "-scaled.pickle" : "-unshared.pickle");
  std::ofstream(out.path, std::ios::binary) << bytes;
  if (!keep) g_temporaries.push_back(out.path);
  return out;
}
const Scaled& scaled_snapshot() {
  static const Scaled s = make_scaled(true, std::getenv("TIDEMARK_IMPORT_BENCH_WRITE_SCALED"));
  return s;
}
const Scaled& unshared_snapshot() {
  static const Scaled s = make_scaled(false, std::getenv("TIDEMARK_IMPORT_BENCH_WRITE_UNSHARED"));
  return s;
}

// Imports in a child process: its wall time and peak resident memory (bytes). The child is
// this program started again (--import-child IN OUT PEAK), which writes its own peak (VmHWM)
// to the file PEAK: the kernel's count for a child (wait4's ru_maxrss) starts at what the
// parent had resident when it forked, and the parent holds the snapshots it wrote.
constexpr const char* kImportChild = "--import-child";
std::pair<double, uint64_t> import_in_child(const std::string& in, const std::string& out) {
  const std::string peak_file = out + ".peak";
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", "import_bench", kImportChild, in.c_str(), out.c_str(),
          peak_file.c_str(), static_cast<char*>(nullptr));
    std::perror("import_bench: exec /proc/self/exe");
    _exit(1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint64_t peak = 0;
  std::ifstream(peak_file) >> peak;
  std::filesystem::remove(peak_file);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || peak == 0) return {-1, 0};
  return {s, peak};
}

constexpr double kMaxScaledSeconds = 20;
constexpr double kMaxRssPerInputByte = 2;  // docs/importers.md: <= 2 GB for a 1 GB file, any shape
uint64_t g_scaled_rss = 0, g_unshared_rss = 0;  // peak resident memory, for main's verdict

void import_scaled(benchmark::State& state, const Scaled& s, uint64_t& rss_out) {
  const std::string out = temp_path("-scaled.db");
  uint64_t rss = 0;
  for (auto _ : state) {
    auto [seconds, peak] = import_in_child(s.path, out);
    if (seconds < 0) state.SkipWithError("the import failed");
    state.SetIterationTime(seconds);
    rss = std::max(rss, peak);
    remove_trace(out);
  }
  state.counters["MB"] = static_cast<double>(s.bytes) / 1e6;
  state.counters["copies"] = s.copies;
  state.counters["rss_MB"] = static_cast<double>(rss) / 1e6;
  state.counters["rss_per_input"] = static_cast<double>(rss) / static_cast<double>(s.bytes);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * s.bytes));
  rss_out = rss;
}
void BM_ImportScaledRealSnapshot(benchmark::State& state) {
  import_scaled(state, scaled_snapshot(), g_scaled_rss);
}
BENCHMARK(BM_ImportScaledRealSnapshot)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(1);
// The same snapshot with no frame dict shared: what the importer's memory must stay bounded on.
void BM_ImportScaledUnsharedFrames(benchmark::State& state) {
  import_scaled(state, unshared_snapshot(), g_unshared_rss);
}
BENCHMARK(BM_ImportScaledUnsharedFrames)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(1);

// A snapshot of allocations of 20 frames each, every frame distinct, of about a quarter of
// TIDEMARK_IMPORT_BENCH_SCALED_MB (default 1000) MB.
Scaled make_distinct() {
  const char* env = std::getenv("TIDEMARK_IMPORT_BENCH_SCALED_MB");
  const double target = (env ? std::atof(env) : 1000.0) * 1e6 / 4;
  PickleWriter w(4);
  w.empty_dict().mark().str("segments").empty_list();
  w.str("device_traces").empty_list().mark().empty_list().mark();
  int64_t line = 0;
  for (int64_t i = 0; static_cast<double>(w.size()) < target; ++i) {
    w.empty_dict().mark().str("action").str("alloc").str("addr").integer(0x100000 + 512 * i);
    w.str("size").integer(512).str("time_us").integer(10 + i).str("frames").empty_list().mark();
    for (int k = 0; k < 20; ++k)
      w.empty_dict()
          .mark()
          .str("filename")
          .str("model.py")
          .str("line")
          .integer(++line)
          .str("name")
          .str("forward")
          .setitems();
    w.appends().setitems();
    if (i % 1000 == 999) w.appends().mark();  // entries in batches of 1000, as Python's pickler
  }
  w.appends().appends().setitems();
  Scaled out;
  std::string bytes = w.finish();
  out.bytes = bytes.size();
  out.copies = 1;
  out.path = temp_path("-distinct.pickle");
  std::ofstream(out.path, std::ios::binary) << bytes;
  g_temporaries.push_back(out.path);
  return out;
}
const Scaled& distinct_snapshot() {
  static const Scaled s = make_distinct();
  return s;
}
uint64_t g_distinct_rss = 0;
void BM_ImportDistinctFrames(benchmark::State& state) {
  import_scaled(state, distinct_snapshot(), g_distinct_rss);
}
BENCHMARK(BM_ImportDistinctFrames)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string_view(argv[1]) == kImportChild) {  // import_in_child's child
    try {
      im::import_pytorch_snapshot(argv[2], argv[3]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 1;
    }
    std::ofstream(argv[4]) << tidemark::bench::own_peak_rss();
    return 0;
  }
  // TIDEMARK_IMPORT_BENCH_WRITE=PATH: write the synthetic snapshot there and exit (to profile
  // `tidemark import` on it); TIDEMARK_IMPORT_BENCH_WRITE_SCALED=PATH: the repeated real one.
  // TIDEMARK_IMPORT_BENCH_WRITE_UNSHARED=PATH: the repeated real one with no frame dict shared.
  // TIDEMARK_IMPORT_BENCH_WRITE_DISTINCT=PATH: the one whose frames are all distinct.
  for (auto [env, make] : {std::pair{"TIDEMARK_IMPORT_BENCH_WRITE_SCALED", &scaled_snapshot},
                           std::pair{"TIDEMARK_IMPORT_BENCH_WRITE_UNSHARED", &unshared_snapshot},
                           std::pair{"TIDEMARK_IMPORT_BENCH_WRITE_DISTINCT", &distinct_snapshot}}) {
    if (const char* path = std::getenv(env)) {
      const Scaled& scaled = make();
      if (make == &distinct_snapshot) std::filesystem::rename(scaled.path, path);
      std::printf("wrote %s: %.1f MB, %d copies\n", path, static_cast<double>(scaled.bytes) / 1e6,
                  scaled.copies);
      return 0;
    }
  }
  const Synth& s = snapshot();
  if (const char* path = std::getenv("TIDEMARK_IMPORT_BENCH_WRITE")) {
    std::ofstream(path, std::ios::binary) << s.bytes;
    std::printf("wrote %s\n", path);
    return 0;
  }
  std::printf("synthetic snapshot: %.1f MB, %zu trace entries\n",
              static_cast<double>(s.bytes.size()) / 1e6, s.entries);
  int status = tidemark::bench::run_with_targets(
      argc, argv, {},
      {{"import of a 100 MB PyTorch snapshot (<= 10 s)", "BM_ImportSnapshot100MB",
        kMaxImportSeconds * 1e9},
       {"import of a real snapshot repeated to 1 GB (<= 20 s; <= 2 GB resident: see rss_MB)",
        "BM_ImportScaledRealSnapshot", kMaxScaledSeconds * 1e9}});
  auto verdict = [&](const char* what, uint64_t rss, const Scaled& input) {
    const double per_byte = static_cast<double>(rss) / static_cast<double>(input.bytes);
    const bool ok = per_byte <= kMaxRssPerInputByte;
    std::printf("%-60s %8.0f MB  %.2f per input byte (target <= %.0f)  %s\n", what,
                static_cast<double>(rss) / 1e6, per_byte, kMaxRssPerInputByte,
                ok ? "ok" : "MISSED");
    if (!ok) status = 1;
    return per_byte;
  };
  if (g_scaled_rss && g_unshared_rss) {
    const double shared = verdict("peak resident memory, the real snapshot repeated", g_scaled_rss,
                                  scaled_snapshot());
    const double unshared = verdict("peak resident memory, the same with no frame dict shared",
                                    g_unshared_rss, unshared_snapshot());
    std::printf("%-60s %8.2fx the shared snapshot's, per input byte\n", "unshared frames' memory",
                unshared / shared);
  }
  if (g_distinct_rss)
    verdict("peak resident memory, every frame distinct", g_distinct_rss, distinct_snapshot());
  for (const std::string& p : g_temporaries) std::filesystem::remove(p);
  return status;
}
