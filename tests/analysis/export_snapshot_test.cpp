// export_snapshot (profiler/analysis/export_snapshot.cpp): the exported PyTorch memory snapshot
// read back by tests/analysis/snapshot_check.py, which loads it with Python's own pickle, checks
// it as PyTorch's memory_viz reads it (its opcodes, blocks tiling segments, the history walked
// backwards from the final segments) and replays it. A hand-written history checks every
// field against values worked out by hand; real recordings of tensorlib check the replayed
// peaks against the trace's own curves, from the start and from a recording started late.
#include <gtest/gtest.h>

#include <tensorlib/tensorlib.h>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "profiler/analysis/export.h"
#include "profiler/analysis/trace.h"
#include "profiler/record/recorder.h"
#include "profiler/store/trace_reader.h"
#include "profiler/store/trace_writer.h"
#include "run_program.h"
#include "temp_trace.h"

namespace {

namespace ev = tidemark::events;
namespace st = tidemark::store;
namespace an = tidemark::analysis;
namespace fs = std::filesystem;
using nlohmann::json;
using tl_test::TempTrace;

constexpr uint64_t kStartTs = 1'000'000;
constexpr int64_t kStartUnix = 1'700'000'000'000'000'000;
constexpr uint64_t S = 0x100000;        // a cpu segment
constexpr uint64_t G = 0x7f0000000000;  // a cuda expandable segment
constexpr uint64_t H = 0x7f1000000000;  // a cuda segment reserved and released
constexpr uint64_t MiB = 1 << 20;
constexpr ev::DeviceId kCpu{ev::DeviceType::cpu, 0};
constexpr ev::DeviceId kCuda{ev::DeviceType::cuda, 0};

struct Check {
  json result;  // snapshot_check.py's output
  an::SnapshotExport stats;
};

// Exports `trace` and runs the checker on the pickle (with --dump: the snapshot comes back
// as JSON).
Check export_and_check(const std::string& trace, const std::string& name) {
  const fs::path pickle = tl_test::temp_dir("tidemark_snapshot") / (name + ".pickle");
  Check c;
  {
    std::ofstream out(pickle, std::ios::binary);
    c.stats = an::export_snapshot(an::Trace::open(trace), out);
  }
  const std::string script = (fs::path(__FILE__).parent_path() / "snapshot_check.py").string();
  tl_test::Result r = tl_test::run({"python3", script, pickle.string(), "--dump"});
  EXPECT_TRUE(r.rc == 0 || r.rc == 1)
      << "python3 " << script << " exited " << r.rc
      << " (python3 comes with `make test`'s dependencies): " << r.err;
  c.result = json::parse(r.out.empty() ? "{}" : r.out);
  EXPECT_EQ(c.result.value("ok", false), true) << r.out.substr(0, 2000);
  return c;
}

struct History {
  std::vector<ev::Event> events;
  std::vector<uint64_t> stacks;
  uint64_t seq = 0;
  void block(ev::Kind k, uint64_t t, ev::DeviceId d, uint64_t addr, uint64_t size, uint64_t req,
             uint64_t seg, uint64_t stream = 0, ev::Category cat = ev::Category::unknown,
             uint64_t stack = 0) {
    ev::Event e;
    e.kind = k;
    e.seq = ++seq;
    e.ts_ns = kStartTs + t;
    e.thread_id = 1;
    e.device = d;
    e.block = {addr, size, req, stream, seg, ev::Pool::small, cat};
    events.push_back(e);
    stacks.push_back(stack);
  }
};

// Writes and finalizes `h`; stacks 1-3 symbolize as a caller, an inlined frame and its caller,
// and an unresolved address.
void write_trace(const std::string& path, const History& h, std::vector<st::DeviceInfo> devices,
                 const std::string& settings = "") {
  st::TraceMeta meta;
  meta.command_line = "/usr/bin/train";
  meta.start_ts_ns = kStartTs;
  meta.start_unix_ns = kStartUnix;
  meta.allocator_settings = settings;
  meta.devices = std::move(devices);
  auto w = st::TraceWriter::create(path, meta);
  w->add_stack_node(1, 0, 0x1000);
  w->add_stack_node(2, 1, 0x2000);
  w->add_stack_node(3, 2, 0x3000);
  for (size_t i = 0; i < h.events.size(); ++i) w->append(h.events[i], h.stacks[i]);
  w->close(kStartTs + 1'000'000);
  w.reset();
  st::FinalizeOptions opt;
  opt.symbolize = [](uint64_t ip) -> std::vector<st::ResolvedFrame> {
    if (ip == 0x3000) return {{"tl::alloc(unsigned long)", "/src/alloc.cpp", 7, false, "/bin/t"}};
    if (ip == 0x2000)
      return {{"make_weights(int)", "model.h", 12, true, "/bin/t"},
              {"build_model()", "", 0, false, "/bin/t"}};
    return {};  // 0x1000: unresolved
  };
  st::finalize(path, opt);
}

// Times are ns after kStartTs.
void write_history(const std::string& path) {
  using K = ev::Kind;
  using C = ev::Category;
  History h;
  h.block(K::segment_alloc, 1000, kCpu, S, 2 * MiB, 0, S, 0, C::unknown, 2);
  h.block(K::alloc, 2000, kCpu, S, 1024, 1000, S, 0, C::parameter, 3);
  h.block(K::alloc, 3000, kCpu, S + 1024, 2048, 2000, S);
  {  // its role is set after the alloc: the entry carries the role it settled on
    ev::Event e;
    e.kind = K::category;
    e.seq = ++h.seq;
    e.ts_ns = kStartTs + 3500;
    e.device = kCpu;
    e.category = {S + 1024, C::activation};
    h.events.push_back(e);
    h.stacks.push_back(0);
  }
  h.block(K::free_requested, 4000, kCpu, S, 1024, 1000, S, 0, C::parameter);
  h.block(K::free_completed, 4000, kCpu, S, 1024, 1000, S, 0, C::parameter);
  // cuda: an expandable segment mapped in two pieces, one plain segment reserved and released.
  h.block(K::segment_map, 5000, kCuda, G, 2 * MiB, 0, G, 7);
  h.block(K::segment_map, 6000, kCuda, G + 2 * MiB, 2 * MiB, 0, G, 7);
  h.block(K::segment_alloc, 7000, kCuda, H, 2 * MiB, 0, H, 7);
  h.block(K::alloc, 8000, kCuda, G, 512, 500, G, 7, C::gradient);
  h.block(K::alloc, 9000, kCuda, G + 2 * MiB, MiB, MiB, G, 7, C::activation);
  h.block(K::free_requested, 10000, kCuda, G, 512, 500, G, 7, C::gradient);  // pending at the end
  h.block(K::segment_free, 11000, kCuda, H, 2 * MiB, 0, H, 7);
  {
    ev::Event e;
    e.kind = K::oom;
    e.seq = ++h.seq;
    e.ts_ns = kStartTs + 12000;
    e.device = kCuda;
    e.allocator = {8 * MiB, 7, MiB, 16 * MiB, MiB + 512, 4 * MiB, 0};
    h.events.push_back(e);
    h.stacks.push_back(0);
  }

  write_trace(path, h, {{kCpu, "cpu", 0}, {kCuda, "cuda:0 (Test GPU)", 16 * MiB}},
              "max_split_size_mb:128,expandable_segments:True,garbage_collection_threshold:0.6,"
              "roundup_power2_divisions:[256:1,512:2,>:8],backend:native");
}

json frame(const std::string& name, const std::string& file, int line) {
  return {{"name", name}, {"filename", file}, {"line", line}};
}

TEST(ExportSnapshot, EveryFieldOfAHandWrittenHistory) {
  TempTrace trace("snapshot_fields");
  write_history(trace.path());
  Check c = export_and_check(trace.path(), "fields");
  const json& snap = c.result["snapshot"];

  // cuda:0 is device 0, the CPU the next one.
  ASSERT_EQ(c.stats.devices.size(), 2u);
  EXPECT_EQ(c.stats.devices[0].name, "cuda:0");
  EXPECT_EQ(c.stats.devices[0].index, 0);
  EXPECT_EQ(c.stats.devices[1].name, "cpu");
  EXPECT_EQ(c.stats.devices[1].index, 1);
  EXPECT_EQ(c.stats.entries, 13u);
  EXPECT_EQ(c.stats.entries_left_out + c.stats.entries_dropped + c.stats.entries_restored, 0u);

  const json& cpu = snap["device_traces"][1];
  ASSERT_EQ(cpu.size(), 5u) << cpu;
  auto entry = [](const json& e) {
    return std::tuple(e["action"].get<std::string>(), e["addr"].get<uint64_t>(),
                      e["size"].get<uint64_t>(), e["category"].get<std::string>());
  };
  using E = std::tuple<std::string, uint64_t, uint64_t, std::string>;
  EXPECT_EQ(entry(cpu[0]), (E{"segment_alloc", S, 2 * MiB, "unknown"}));
  EXPECT_EQ(entry(cpu[1]), (E{"alloc", S, 1000, "parameter"}));  // requested size, as PyTorch
  EXPECT_EQ(entry(cpu[2]), (E{"alloc", S + 1024, 2000, "activation"}));
  EXPECT_EQ(entry(cpu[3]), (E{"free_requested", S, 1000, "parameter"}));
  EXPECT_EQ(entry(cpu[4]), (E{"free_completed", S, 1000, "parameter"}));
  EXPECT_EQ(cpu[1]["time_us"], (kStartUnix + 2000) / 1000);
  EXPECT_EQ(cpu[1]["stream"], 0);
  // Innermost first; inlined frames before their caller; an unresolved address by its value.
  EXPECT_EQ(cpu[1]["frames"],
            json::array({frame("tl::alloc(unsigned long)", "/src/alloc.cpp", 7),
                         frame("make_weights(int)", "model.h", 12),
                         frame("build_model()", "/bin/t", 0), frame("0x1000", "??", 0)}));
  EXPECT_EQ(cpu[0]["frames"].size(), 3u);
  EXPECT_EQ(cpu[2]["frames"], json::array());

  const json& cuda = snap["device_traces"][0];
  ASSERT_EQ(cuda.size(), 8u) << cuda;
  EXPECT_EQ(entry(cuda[0]), (E{"segment_map", G, 2 * MiB, "unknown"}));
  EXPECT_EQ(entry(cuda[3]), (E{"alloc", G, 500, "gradient"}));
  EXPECT_EQ(entry(cuda[6]), (E{"segment_free", H, 2 * MiB, "unknown"}));
  EXPECT_EQ(cuda[3]["stream"], 7);
  const json& oom = cuda[7];
  EXPECT_EQ(oom["action"], "oom");
  EXPECT_EQ(oom["size"], 8 * MiB);
  EXPECT_EQ(oom["device_free"], MiB);
  EXPECT_FALSE(oom.contains("addr"));

  // The final state: the two mapped pieces are one expandable segment; gaps are inactive.
  const json& segs = snap["segments"];
  ASSERT_EQ(segs.size(), 2u) << segs;
  const json& g = segs[0];
  EXPECT_EQ(g["device"], 0);
  EXPECT_EQ(g["address"], G);
  EXPECT_EQ(g["total_size"], 4 * MiB);
  EXPECT_EQ(g["is_expandable"], true);
  EXPECT_EQ(g["segment_type"], "small");
  EXPECT_EQ(g["segment_pool_id"], json::array({0, 0}));
  EXPECT_EQ(g["allocated_size"], MiB);
  EXPECT_EQ(g["active_size"], MiB + 512);
  EXPECT_EQ(g["requested_size"], MiB + 500);
  auto block = [](const json& b) {
    return std::tuple(b["address"].get<uint64_t>(), b["size"].get<uint64_t>(),
                      b["requested_size"].get<uint64_t>(), b["state"].get<std::string>());
  };
  using B = std::tuple<uint64_t, uint64_t, uint64_t, std::string>;
  ASSERT_EQ(g["blocks"].size(), 4u) << g;
  EXPECT_EQ(block(g["blocks"][0]), (B{G, 512, 500, "active_pending_free"}));
  EXPECT_EQ(block(g["blocks"][1]), (B{G + 512, 2 * MiB - 512, 0, "inactive"}));
  EXPECT_EQ(block(g["blocks"][2]), (B{G + 2 * MiB, MiB, MiB, "active_allocated"}));
  EXPECT_EQ(block(g["blocks"][3]), (B{G + 3 * MiB, MiB, 0, "inactive"}));
  const json& s = segs[1];
  EXPECT_EQ(s["device"], 1);
  EXPECT_EQ(s["is_expandable"], false);
  EXPECT_EQ(s["frames"].size(), 3u);
  ASSERT_EQ(s["blocks"].size(), 3u) << s;
  EXPECT_EQ(block(s["blocks"][1]), (B{S + 1024, 2048, 2000, "active_allocated"}));
  EXPECT_EQ(c.stats.segments, 2u);
  EXPECT_EQ(c.stats.blocks, 3u);

  EXPECT_EQ(snap["allocator_settings"], (json{{"max_split_size_mb", 128},
                                              {"expandable_segments", true},
                                              {"garbage_collection_threshold", 0.6},
                                              {"roundup_power2_divisions", "[256:1,512:2,>:8]"},
                                              {"backend", "native"}}));
  EXPECT_EQ(snap["external_annotations"], json::array());

  // The replay from the start agrees with the history.
  const json& rc = c.result["devices"]["0"];
  EXPECT_EQ(rc["start_blocks"], 0);
  EXPECT_EQ(rc["start_segments"], 0);
  EXPECT_EQ(rc["peak_requested"], MiB + 500);
  EXPECT_EQ(rc["final_requested"], MiB);
  EXPECT_EQ(rc["peak_reserved"], 6 * MiB);
  EXPECT_EQ(rc["final_reserved"], 4 * MiB);
  EXPECT_EQ(c.result["devices"]["1"]["peak_requested"], 3000);
}

[[gnu::noinline]] tl::Tensor snapshot_test_allocate(int64_t n) {
  return tl::ones({n});
}

// The replayed peaks and final values equal the trace's own curves (the derived tables).
void expect_replay_matches_trace(const Check& c, const std::string& path) {
  auto reader = st::TraceReader::open(path, st::TraceReader::Require::finalized);
  int64_t cpu = reader.device_row_id(kCpu).value();
  const json& d = c.result["devices"][std::to_string(c.stats.devices.at(0).index)];
  EXPECT_EQ(d["peak_requested"], reader.peak(cpu, st::Curve::requested)->bytes);
  EXPECT_EQ(d["peak_reserved"], reader.peak(cpu, st::Curve::reserved)->bytes);
  const st::LodRow last = reader.lod(cpu, 0, 0, UINT64_MAX).back();
  EXPECT_EQ(d["final_requested"], last.requested);
  EXPECT_EQ(d["final_reserved"], last.reserved);
}

TEST(ExportSnapshot, ARecordingOfTensorlibReplaysToItsOwnCurves) {
  TempTrace trace("snapshot_recorded");
  tl::empty_cache();  // no segment cached by an earlier test: the recording sees them all
  tidemark::record::Options o;
  o.path = trace.path();
  o.stack_depth = 32;
  tidemark::record::start(o);
  tl::Tensor kept;
  {
    tl::Tensor a = snapshot_test_allocate(1 << 16);
    tl::Tensor b = snapshot_test_allocate(1 << 20);  // a large-pool block
    kept = snapshot_test_allocate(1 << 12);
  }
  tidemark::record::stop();
  kept = tl::Tensor();

  Check c = export_and_check(trace.path(), "recorded");
  ASSERT_EQ(c.stats.devices.size(), 1u);
  EXPECT_EQ(c.stats.devices[0].name, "cpu");
  EXPECT_EQ(c.stats.devices[0].index, 0);
  const json& d = c.result["devices"]["0"];
  EXPECT_EQ(d["start_blocks"], 0);
  EXPECT_EQ(d["start_segments"], 0);
  EXPECT_EQ(d["entries"], c.stats.entries);
  expect_replay_matches_trace(c, trace.path());
  EXPECT_EQ(c.stats.blocks, 1u);  // `kept` was live when the recording stopped
  // Its alloc names the function that made it.
  bool named = false;
  for (const json& e : c.result["snapshot"]["device_traces"][0])
    if (e["action"] == "alloc" && e["size"] == (1 << 12) * 4)
      for (const json& f : e["frames"])
        named = named ||
                f["name"].get<std::string>().find("snapshot_test_allocate") != std::string::npos;
  EXPECT_TRUE(named);
  // Every stack starts at the allocator, below the recorder's own frames (Note [The recorder's
  // own frames]): as memory_viz shows them, as the importer reads them back.
  for (const json& e : c.result["snapshot"]["device_traces"][0]) {
    if (e["action"] != "alloc" || e["frames"].empty()) continue;
    const std::string innermost = e["frames"][0]["name"];
    EXPECT_EQ(innermost.find("tidemark::events::dispatch"), std::string::npos) << innermost;
    EXPECT_EQ(innermost.rfind("tl::memory::", 0), 0u) << innermost;
  }
}

// A recording started once memory is already reserved: blocks in those segments (and their
// entries) are left out, so what remains is consistent (the checker's backward walk passes).
TEST(ExportSnapshot, ARecordingStartedLateLeavesOutBlocksOfUnseenSegments) {
  TempTrace trace("snapshot_late");
  tl::empty_cache();
  tl::Tensor before = snapshot_test_allocate(1 << 10);  // its segment predates the recording
  tidemark::record::Options o;
  o.path = trace.path();
  o.stack_depth = 8;
  tidemark::record::start(o);
  tl::Tensor during = snapshot_test_allocate(1 << 11);  // same small segment: unseen
  tl::Tensor big = snapshot_test_allocate(1 << 22);     // a new large segment: seen
  before = tl::Tensor();
  big = tl::Tensor();
  tidemark::record::stop();

  Check c = export_and_check(trace.path(), "late");
  EXPECT_EQ(c.stats.entries_left_out, 3u);  // `during`'s alloc, and `before`'s two frees
  EXPECT_EQ(c.stats.blocks, 0u);            // `during` is not drawn: no segment holds it
  const json& d = c.result["devices"]["0"];
  EXPECT_EQ(d["actions"],
            json::array({"alloc", "free_completed", "free_requested", "segment_alloc"}));
  EXPECT_EQ(d["peak_requested"], (1 << 22) * 4);
}

// An expandable segment mapped in one piece and partly unmapped later, on the default stream
// of cuda:1 (no cuda:0): the map is written in two pieces, so memory_viz can undo each (it
// joins neighbouring ranges only on equal streams, and renames default-stream entries'
// streams but not the segments').
TEST(ExportSnapshot, APartlyUnmappedRangeIsWrittenInPiecesTheViewerCanUndo) {
  constexpr ev::DeviceId kCuda1{ev::DeviceType::cuda, 1};
  using K = ev::Kind;
  History h;
  h.block(K::segment_map, 1000, kCuda1, G, 60 * MiB, 0, G);
  h.block(K::alloc, 2000, kCuda1, G, 4096, 4096, G);
  h.block(K::alloc, 3000, kCuda1, G + 4096, 50 * MiB, 50 * MiB, G);
  h.block(K::free_requested, 4000, kCuda1, G + 4096, 50 * MiB, 50 * MiB, G);
  h.block(K::free_completed, 4000, kCuda1, G + 4096, 50 * MiB, 50 * MiB, G);
  h.block(K::alloc, 5000, kCuda1, G + 4096, 5 * MiB, 5 * MiB, G);
  h.block(K::segment_unmap, 6000, kCuda1, G + 20 * MiB, 40 * MiB, 0, G);
  TempTrace trace("snapshot_unmap");
  write_trace(trace.path(), h, {{kCuda1, "cuda:1 (Test GPU)", 0}});
  Check c = export_and_check(trace.path(), "unmap");
  ASSERT_EQ(c.stats.devices.size(), 1u);
  EXPECT_EQ(c.stats.devices[0].index, 1);
  const json& snap = c.result["snapshot"];
  EXPECT_EQ(snap["device_traces"][0], json::array());
  const json& t = snap["device_traces"][1];
  ASSERT_EQ(t.size(), 8u) << t;
  EXPECT_EQ(t[0]["action"], "segment_map");
  EXPECT_EQ(t[0]["size"], 20 * MiB);
  EXPECT_EQ(t[1]["action"], "segment_map");
  EXPECT_EQ(t[1]["addr"], G + 20 * MiB);
  EXPECT_EQ(t[1]["size"], 40 * MiB);
  EXPECT_EQ(t[7]["action"], "segment_unmap");
  ASSERT_EQ(snap["segments"].size(), 1u);
  EXPECT_EQ(snap["segments"][0]["total_size"], 20 * MiB);
  EXPECT_EQ(snap["segments"][0]["device"], 1);
  EXPECT_EQ(c.result["devices"]["1"]["peak_reserved"], 60 * MiB);
  EXPECT_EQ(c.result["devices"]["1"]["final_requested"], 4096 + 5 * MiB);
}

// Events the recording dropped: a free_completed lost before the address was allocated again,
// and the alloc of a block whose frees were kept. The lost free is restored where it must have
// happened, the frees of the unknown block are left out, and the history still matches the
// final state.
TEST(ExportSnapshot, DroppedEventsLeaveAHistoryThatMatchesTheFinalState) {
  using K = ev::Kind;
  History h;
  h.block(K::segment_alloc, 1000, kCpu, S, 2 * MiB, 0, S);
  h.block(K::alloc, 2000, kCpu, S, 1024, 1000, S);
  h.block(K::free_requested, 3000, kCpu, S, 1024, 1000, S);  // its free_completed is lost
  h.block(K::alloc, 4000, kCpu, S, 2048, 2000, S);
  h.block(K::free_requested, 5000, kCpu, S + 4096, 512, 500, S);  // its alloc is lost
  h.block(K::free_completed, 5000, kCpu, S + 4096, 512, 500, S);
  TempTrace trace("snapshot_dropped");
  write_trace(trace.path(), h, {{kCpu, "cpu", 0}});
  Check c = export_and_check(trace.path(), "dropped");
  EXPECT_EQ(c.stats.entries_restored, 1u);
  EXPECT_EQ(c.stats.entries_dropped, 2u);
  const json& t = c.result["snapshot"]["device_traces"][0];
  ASSERT_EQ(t.size(), 5u) << t;
  EXPECT_EQ(t[3]["action"], "free_completed");  // restored, before the address is reused
  EXPECT_EQ(t[3]["size"], 1000);
  EXPECT_EQ(t[3]["time_us"], (kStartUnix + 4000) / 1000);
  EXPECT_EQ(t[4]["action"], "alloc");
  const json& blocks = c.result["snapshot"]["segments"][0]["blocks"];
  EXPECT_EQ(blocks[0]["size"], 2048);
  EXPECT_EQ(blocks[0]["state"], "active_allocated");
}

// A segment holding thousands of blocks: its blocks list goes out in batches (the viewer
// pushes a batch's items in one call, which a list of 10000 or more overflows).
TEST(ExportSnapshot, LongListsGoOutInBatches) {
  using K = ev::Kind;
  History h;
  h.block(K::segment_map, 1000, kCuda, G, 64 * MiB, 0, G);
  for (uint64_t i = 0; i < 6000; ++i)  // every other KiB: 12000 blocks with the gaps
    h.block(K::alloc, 2000 + i, kCuda, G + i * 2048, 1024, 1000, G);
  TempTrace trace("snapshot_long");
  write_trace(trace.path(), h, {{kCuda, "cuda:0", 0}});
  Check c = export_and_check(trace.path(), "long");  // the checker refuses batches over 10000
  ASSERT_EQ(c.result["snapshot"]["segments"].size(), 1u);
  EXPECT_EQ(c.result["snapshot"]["segments"][0]["blocks"].size(), 12000u);
  EXPECT_EQ(c.stats.blocks, 6000u);
}

TEST(ExportSnapshot, RefusesAnUnfinalizedTraceNamingIt) {
  std::ostringstream out;
  try {
    an::export_snapshot(an::Trace::open("/nonexistent/trace.db"), out);
    ADD_FAILURE() << "no error";
  } catch (const st::StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/trace.db"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(out.str().empty());
}

}  // namespace
