// Every real PyTorch snapshot in tests/data/pytorch imports, and its curves equal an independent
// replay: tests/importers/data/real_snapshots_expected.json, which real_snapshots_expected.py
// computes with Python's own pickle the way memory_viz builds its timelines. Then every file,
// cut short and with bytes flipped, either imports or fails with one line naming it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "analysis/live_fold_check.h"
#include "profiler/analysis/memory.h"
#include "profiler/analysis/steps.h"
#include "profiler/analysis/trace.h"
#include "profiler/diagnose/diagnose.h"
#include "profiler/importers/pytorch_snapshot.h"
#include "profiler/store/trace_reader.h"

namespace {

namespace fs = std::filesystem;
namespace im = tidemark::importers;
namespace st = tidemark::store;
namespace an = tidemark::analysis;
namespace diag = tidemark::diagnose;
namespace ev = tidemark::events;

const fs::path kSnapshots = fs::path(TIDEMARK_TEST_DATA) / "pytorch";
const fs::path kExpected =
    fs::path(TIDEMARK_TEST_DATA).parent_path() / "importers/data/real_snapshots_expected.json";

nlohmann::json expected_files() {
  std::ifstream in(kExpected);
  EXPECT_TRUE(in) << kExpected;
  return in ? nlohmann::json::parse(in) : nlohmann::json::array();
}

std::string temp_file(const std::string& name) {
  return (fs::temp_directory_path() / ("tidemark-real-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(RealSnapshots, EveryFileIsChecked) {
  // A snapshot added to tests/data/pytorch without expected values fails here.
  std::vector<std::string> on_disk, expected;
  for (const auto& e : fs::directory_iterator(kSnapshots))
    if (e.path().extension() == ".pickle") on_disk.push_back(e.path().filename().string());
  for (const auto& f : expected_files()) expected.push_back(f["source"]);
  std::sort(on_disk.begin(), on_disk.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(on_disk, expected);
  EXPECT_EQ(on_disk.size(), 8u);
}

// The live view folds an imported snapshot's events into the curves finalize stores.
TEST(RealSnapshots, TheLiveCurvesAreTheFinalizedLevel0) {
  for (const auto& file : expected_files()) {
    const std::string name = file["source"];
    SCOPED_TRACE(name);
    const std::string out = temp_file(name + ".live.db");
    ASSERT_NO_THROW(im::import_pytorch_snapshot((kSnapshots / name).string(), out));
    EXPECT_GT(analysis_test::expect_live_curves_equal_level_0(out), 0u);
    im::detail::remove_trace(out);
  }
}

TEST(RealSnapshots, CurvesEqualAnIndependentReplay) {
  for (const auto& file : expected_files()) {
    const std::string name = file["source"];
    SCOPED_TRACE(name);
    const std::string out = temp_file(name + ".db");
    im::ImportStats stats;
    ASSERT_NO_THROW(stats = im::import_pytorch_snapshot((kSnapshots / name).string(), out));
    EXPECT_EQ(stats.segments, file["segments"].get<uint64_t>());
    EXPECT_EQ(stats.devices, static_cast<int>(file["devices"].size()));
    EXPECT_EQ(stats.synthetic_times, !file["timed"].get<bool>());
    EXPECT_EQ(stats.annotations, file["annotations"].get<uint64_t>());
    EXPECT_EQ(stats.inferred_steps, file["inferred_steps"].get<uint64_t>());
    // Real files hold nothing the importer had to guess at.
    EXPECT_TRUE(stats.notes.empty()) << stats.notes.front();

    an::Trace t = an::Trace::open(out);
    EXPECT_EQ(t.synthetic_times(), !file["timed"].get<bool>());
    for (const auto& d : file["devices"]) {
      const std::string dev = d["device"];
      SCOPED_TRACE(dev);
      const an::DeviceSummary s = an::summarize_device(t, t.device(dev));
      EXPECT_EQ(s.peak_requested_bytes, d["requested_peak"].get<int64_t>());
      EXPECT_EQ(s.peak_reserved_bytes, d["reserved_peak"].get<int64_t>());
      EXPECT_EQ(s.peak_allocated_bytes, d["allocated_peak"].get<int64_t>());
      EXPECT_EQ(s.peak_allocated_estimated_blocks == 0, d["allocated_peak_exact"].get<bool>());
      EXPECT_EQ(s.final_reserved_bytes, d["final_reserved"].get<int64_t>());
      EXPECT_EQ(s.final_allocated_bytes, d["final_allocated"].get<int64_t>());
      // Every alloc entry is an allocation, and so is every block from before the history.
      EXPECT_GE(s.alloc_count, d["actions"].value("alloc", uint64_t{0}));
      // Note [Private pools]: the segments of each pool other than (0, 0), and their bytes
      // (verl's vLLM KV cache and its other private pool).
      std::map<std::string, std::pair<uint64_t, int64_t>> pools, want;
      for (const an::PrivatePoolSummary& p : s.private_pools)
        pools[std::to_string(p.pool_a) + "," + std::to_string(p.pool_b)] = {p.segments,
                                                                            p.reserved_bytes};
      for (const auto& [pool, v] : d["private_pools"].items())
        want[pool] = {v["segments"].get<uint64_t>(), v["reserved_bytes"].get<int64_t>()};
      EXPECT_EQ(pools, want);
    }
    im::detail::remove_trace(out);
  }
}

// Protocol 5 (Python 3.14's default; memory_viz cannot read it): the same real snapshot written
// again with it gives the same curves as the protocol 4 original.
TEST(RealSnapshots, Protocol5GivesTheSameTrace) {
  const fs::path p5 =
      fs::path(TIDEMARK_TEST_DATA).parent_path() / "importers/data/yiyi_oom_snapshot_p5.pkl";
  ASSERT_EQ(read_file(p5).substr(0, 2), std::string("\x80\x05", 2));
  const std::string a = temp_file("p4.db"), b = temp_file("p5.db");
  im::ImportStats s4 =
      im::import_pytorch_snapshot((kSnapshots / "yiyi_oom_snapshot.pickle").string(), a);
  im::ImportStats s5 = im::import_pytorch_snapshot(p5.string(), b);
  EXPECT_EQ(s4.events, s5.events);
  EXPECT_EQ(s4.frames, s5.frames);
  an::Trace ta = an::Trace::open(a), tb = an::Trace::open(b);
  const an::DeviceSummary da = an::summarize_device(ta, ta.device("cuda:0")),
                          db = an::summarize_device(tb, tb.device("cuda:0"));
  EXPECT_EQ(da.peak_allocated_bytes, db.peak_allocated_bytes);
  EXPECT_EQ(da.peak_requested_bytes, db.peak_requested_bytes);
  EXPECT_EQ(da.peak_reserved_bytes, db.peak_reserved_bytes);
  EXPECT_EQ(da.alloc_count, db.alloc_count);
  im::detail::remove_trace(a);
  im::detail::remove_trace(b);
}

// A record_function annotation becomes a scope that the allocations inside it fall in.
TEST(RealSnapshots, AnnotationsBecomeScopes) {
  const std::string out = temp_file("niu.db");
  im::import_pytorch_snapshot(
      (kSnapshots / "niu_forward_and_backward_memory_snapshot_200.pickle").string(), out);
  st::TraceReader r = st::TraceReader::open(out, st::TraceReader::Require::finalized);
  std::vector<std::string> pushed;
  int depth = 0, max_depth = 0;
  r.for_each_event([&](const ev::Event& e, uint64_t) {
    if (e.kind == ev::Kind::scope_push)
      pushed.emplace_back(e.name.name), max_depth = std::max(max_depth, ++depth);
    if (e.kind == ev::Kind::scope_pop) --depth;
  });
  EXPECT_EQ(pushed.size(), 6u);  // 12 annotations: zero_grad and step, three iterations
  EXPECT_EQ(std::count(pushed.begin(), pushed.end(), "Optimizer.step#NIUAdam.step"), 3);
  EXPECT_EQ(depth, 0);
  EXPECT_EQ(max_depth, 1);
  // Note [Inferred steps]: one step per zero_grad, each starting where it opens.
  {
    an::Trace t = an::Trace::open(out);
    EXPECT_EQ(an::steps_inferred_from(t), "Optimizer.zero_grad#NIUAdam.zero_grad");
    const std::vector<an::StepStats> steps = an::step_stats(t, t.device("cuda:0").id);
    EXPECT_EQ(steps.size(), 3u);
    for (size_t i = 0; i < steps.size(); ++i)
      EXPECT_EQ(steps[i].number, static_cast<int64_t>(i + 1));
  }
  im::detail::remove_trace(out);
}

// Every real file cut at random places (10 per file) and with random bytes flipped (100 per
// file) imports or fails with one ImportError line naming the file, leaving no partial trace;
// nothing else escapes. The sanitizer build runs fewer (TIDEMARK_DAMAGE_TRIALS_DEFAULT, set
// by tests/CMakeLists.txt); the environment's TIDEMARK_DAMAGE_TRIALS overrides either.
#ifndef TIDEMARK_DAMAGE_TRIALS_DEFAULT
#define TIDEMARK_DAMAGE_TRIALS_DEFAULT 110
#endif
TEST(RealSnapshots, DamagedFilesImportOrFailWithOneLine) {
  int trials = TIDEMARK_DAMAGE_TRIALS_DEFAULT;
  if (const char* n = std::getenv("TIDEMARK_DAMAGE_TRIALS")) trials = std::max(1, std::atoi(n));
  std::mt19937_64 rng(20261201);
  const std::string in = temp_file("damaged.pickle"), out = temp_file("damaged.db");
  size_t imported = 0, refused = 0;
  for (const auto& e : fs::directory_iterator(kSnapshots)) {
    if (e.path().extension() != ".pickle") continue;
    const std::string good = read_file(e.path());
    for (int k = 0; k < trials; ++k) {
      std::string bad = good;
      if (k < trials / 11) {
        bad.resize(std::uniform_int_distribution<size_t>(0, good.size() - 1)(rng));
      } else {
        for (int f = 0; f < 1 + k % 4; ++f)
          bad[std::uniform_int_distribution<size_t>(0, good.size() - 1)(rng)] ^=
              static_cast<char>(1 << std::uniform_int_distribution<int>(0, 7)(rng));
      }
      std::ofstream(in, std::ios::binary) << bad;
      try {
        im::import_pytorch_snapshot(in, out);
        ++imported;
      } catch (const im::ImportError& err) {
        const std::string msg = err.what();
        EXPECT_EQ(msg.rfind(in + ": ", 0), 0u) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
        EXPECT_FALSE(fs::exists(out)) << "a refused file left a partial trace: " << msg;
        ++refused;
      }
      im::detail::remove_trace(out);
    }
  }
  EXPECT_GT(imported, 0u);
  EXPECT_GT(refused, 0u);
  fs::remove(in);
}

// Note [Allocation site]: on real snapshots the sites are the user's own lines, never PyTorch,
// CPython or pybind11, whatever the platform's paths look like.
TEST(RealSnapshots, SitesAreTheUsersCode) {
  const std::map<std::string, std::string> top_site = {
      {"constructorsun_memory_snapshot.pickle", "update_nodes (models.py:174)"},
      {"decomfl_memory.pickle", "update_K_param_paramwise (adam_forward.py:267)"},  // Windows paths
      {"cherryni_large_128_backward.pickle", "step (optimizer.py:74)"},  // the user's own optimizer
      {"verl_mem.pickle", "_build_rollout (megatron_workers.py:275)"},
      {"niu_forward_and_backward_memory_snapshot_200.pickle", "forward (softmax.py:14)"},
  };
  for (const auto& file : expected_files()) {
    const std::string name = file["source"];
    SCOPED_TRACE(name);
    const std::string out = temp_file(name + ".db");
    im::import_pytorch_snapshot((kSnapshots / name).string(), out);
    an::Trace t = an::Trace::open(out);
    an::Summary s = an::summarize(t, {});
    ASSERT_TRUE(s.top_at_peak);
    for (const an::Group& g : s.top_at_peak->groups)
      for (const char* library :
           {"torch::", "c10::", "at::", "pybind11", "cfunction_call", "method_vectorcall", "slot_",
            "site-packages", "std::", "_Py", "pthread"})
        EXPECT_EQ(g.label.find(library), std::string::npos) << g.label;
    if (auto it = top_site.find(name); it != top_site.end()) {
      EXPECT_EQ(s.top_at_peak->groups.at(0).label, it->second);
    }
    // --frames all: the innermost frame, library or not (PyTorch's own unwinder here).
    t.set_frames(an::Frames::all);
    if (name == "niu_forward_and_backward_memory_snapshot_200.pickle") {
      EXPECT_EQ(an::summarize(t, {}).top_at_peak->groups.at(0).label, "torch::unwind::unwind()");
    }
    im::detail::remove_trace(out);
  }
  // The autograd engine's own thread never reaches user code: named as such.
  const std::string out = temp_file("small.db");
  im::import_pytorch_snapshot((kSnapshots / "snapshot_small_gpu.pickle").string(), out);
  an::Trace t = an::Trace::open(out);
  const an::Summary s = an::summarize(t, {});
  bool engine = false;
  for (const an::Group& g : s.top_at_peak->groups)
    engine |= g.label == "backward (autograd engine)";
  EXPECT_TRUE(engine);
  im::detail::remove_trace(out);
}

// Note [OOM post-mortem] on the one real OOM: device 1 of a DataParallel GNN asks for 5.3 GB
// with 95 MB free. The request and the free bytes are the snapshot's own `oom` entry; allocated
// and reserved at that instant are the Python replay's peaks of cuda:1 (both curves stand at
// their peaks when the request fails; the frees after it come later). The site is the first
// frame of the user's own code in the entry's frames (torch's relu in functional.py is not).
TEST(RealSnapshots, OomIsExplained) {
  const std::string name = "constructorsun_memory_snapshot.pickle";
  nlohmann::json dev1;
  for (const auto& f : expected_files())
    if (f["source"] == name)
      for (const auto& d : f["devices"])
        if (d["device"] == "cuda:1") dev1 = d;
  ASSERT_FALSE(dev1.is_null());
  const int64_t request = 5'308'694'528, device_free = 95'682'560;
  const int64_t allocated = dev1["allocated_peak"], reserved = dev1["reserved_peak"];
  const std::string out = temp_file("oom.db");
  im::import_pytorch_snapshot((kSnapshots / name).string(), out);
  diag::Diagnosis d = diag::diagnose(an::Trace::open(out), {"oom"});
  ASSERT_EQ(d.findings.size(), 1u);
  const diag::Finding& f = d.findings[0];
  EXPECT_EQ(f.device, "cuda:1");
  EXPECT_EQ(f.bytes, request);
  std::map<std::string, std::string> ev(f.evidence.begin(), f.evidence.end());
  auto bytes_of = [&](const std::string& key) {  // "4.94 GiB (5,308,694,528 bytes)" -> 5308694528
    std::string v = ev[key], digits;
    for (char c : v.substr(v.find('(') + 1)) {
      if (std::isdigit(static_cast<unsigned char>(c))) digits += c;
      if (c == ' ') break;
    }
    return digits.empty() ? int64_t{-1} : std::stoll(digits);
  };
  EXPECT_EQ(bytes_of("failed request"), request);
  EXPECT_EQ(bytes_of("device free (outside the cache)"), device_free);
  EXPECT_EQ(bytes_of("allocated at the OOM"), allocated);
  EXPECT_EQ(bytes_of("reserved at the OOM"), reserved);
  EXPECT_EQ(bytes_of("short by"), request - device_free - (reserved - allocated));
  EXPECT_EQ(f.site, "update_nodes (models.py:181)");  // the user's line that asked
  EXPECT_NE(f.title.find("short"), std::string::npos) << f.title;
  EXPECT_NE(ev.find("live at the OOM: update_nodes (models.py:174)"), ev.end());
  // What was live by inferred category adds up to what was allocated, activations first.
  int64_t by_category = 0;
  std::vector<std::string> categories;
  const std::string prefix = "live at the OOM by category (inferred): ";
  for (const auto& [what, value] : f.evidence)
    if (what.rfind(prefix, 0) == 0) {
      categories.push_back(what.substr(prefix.size()));
      by_category += bytes_of(what);
    }
  EXPECT_EQ(by_category, allocated);
  ASSERT_FALSE(categories.empty());
  EXPECT_EQ(categories.front(), "activation");
  EXPECT_EQ(f.severity, diag::Severity::major);  // a 6% request, but the run failed there
  im::detail::remove_trace(out);
}

}  // namespace
