// What newer PyTorch writes into a memory snapshot, kept by the importer: the FX fields of
// frames of compiled code (Note [FX frames]), the entries' compile_context and user_metadata
// as scopes (Note [Entry contexts]), the pinned host allocator's host_segments and host_traces
// as a device of their own, and each segment's segment_pool_id (Note [Private pools]). Each
// test builds a snapshot with the field and checks what a user sees; the expected figures are
// worked out by hand beside them.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profiler/analysis/details.h"
#include "profiler/analysis/json.h"
#include "profiler/analysis/memory.h"
#include "profiler/analysis/trace.h"
#include "snapshot_builder.h"

namespace {

using namespace snapshot_test;
namespace an = tidemark::analysis;

constexpr uint64_t KiB = 1024;

// ---- FX frames --------------------------------------------------------------------------------

TEST(SnapshotFields, FxFramesNameTheUsersSource) {
  TempDir dir;
  // Innermost first, as PyTorch writes frames: an aten op, the FX GraphModule's generated
  // forward (with the node and the traceback of the user's source that traced it), dynamo,
  // the user's training loop.
  const Frame op{"addmm", "/usr/lib/python3/site-packages/torch/_ops.py", 723};
  Frame generated{"forward", "<eval_with_key>.3", 7};
  generated.fx_node_op = "call_function";
  generated.fx_node_name = "addmm";
  generated.fx_node_target = "aten.addmm.default";
  generated.fx_original_trace =
      "  File \"/x/train.py\", line 40, in forward\n"
      "    return self.block(x)\n"
      "  File \"/x/model.py\", line 12, in forward\n"
      "    a = self.net1(x)\n"
      "        ^^^^^^^^^^^^\n";
  const Frame dynamo{"_fn", "/usr/lib/python3/site-packages/torch/_dynamo/eval_frame.py", 600};
  const Frame loop{"main", "/x/train.py", 80};
  // The same generated frame with a trace that names no source line, and with none at all.
  Frame bad = generated;
  bad.line = 9;
  bad.fx_original_trace = "no traceback here";
  Frame plain{"forward", "<eval_with_key>.3", 11};
  const std::vector<Ent> trace = {
      {"alloc", 0x100000, 4 * MiB, 10, 0, {op, generated, dynamo, loop}},
      {"alloc", 0x500000, 1 * MiB, 20, 0, {op, bad, dynamo, loop}},
      {"alloc", 0x600000, 2 * MiB, 30, 0, {op, plain, dynamo, loop}},
  };
  const std::string out = dir.file("fx.db");
  const im::ImportStats stats = im::import_pytorch_snapshot(
      write(dir, "fx.pickle", SnapshotBuilder().build({}, {trace})), out);
  EXPECT_EQ(stats.notes,
            std::vector<std::string>{
                "1 frames whose 'fx_original_trace' is not a Python traceback (kept as they are)"});

  // The site of the first alloc is the user's line that made the node, the node in its label;
  // the others keep the generated frame, which is not library code, so it is their site (one
  // site: a site is a function in a file, labelled with its line holding the most bytes).
  an::Trace t = an::Trace::open(out);
  std::map<std::string, int64_t> by_site;
  for (const an::Group& g : an::leaks(t, t.device("cuda:0").id, an::GroupBy::site, 0).groups)
    by_site[g.label] = g.bytes;
  const std::map<std::string, int64_t> want = {
      {"forward [fx addmm: aten.addmm.default] (model.py:12)", int64_t{4 * MiB}},
      {"forward (<eval_with_key>.3:11)", int64_t{1 * MiB + 2 * MiB}},
  };
  EXPECT_EQ(by_site, want);

  // The whole stacks, innermost first: the user's two lines in place of the generated frame.
  const st::TraceReader& r = t.reader();
  std::map<uint64_t, std::vector<std::string>> stacks;
  for (const st::AllocationRow& a : r.allocations(t.device("cuda:0").id))
    for (uint64_t ip : r.stack(a.stack_id)) {
      const st::ResolvedFrame f = r.frames(ip).at(0);
      stacks[a.addr].push_back(f.function + " " + f.file + ":" + std::to_string(f.line));
    }
  const std::string op_line = "addmm /usr/lib/python3/site-packages/torch/_ops.py:723",
                    dynamo_line =
                        "_fn /usr/lib/python3/site-packages/torch/_dynamo/eval_frame.py:600",
                    loop_line = "main /x/train.py:80";
  const std::map<uint64_t, std::vector<std::string>> want_stacks = {
      {0x100000,
       {op_line, "forward [fx addmm: aten.addmm.default] /x/model.py:12", "forward /x/train.py:40",
        dynamo_line, loop_line}},
      {0x500000, {op_line, "forward <eval_with_key>.3:9", dynamo_line, loop_line}},
      {0x600000, {op_line, "forward <eval_with_key>.3:11", dynamo_line, loop_line}},
  };
  EXPECT_EQ(stacks, want_stacks);
}

// ---- compile_context and user_metadata ---------------------------------------------------------

const std::string kRegion = "Torch-Compiled Region: 0/0";

// Bytes by scope path of the allocations still live at the end (what `tidemark summary` lists
// as live at the end of the snapshot, and `top --by scope` groups by).
std::map<std::string, int64_t> live_by_scope(const an::Trace& t, const std::string& device) {
  std::map<std::string, int64_t> out;
  for (const an::Group& g : an::leaks(t, t.device(device).id, an::GroupBy::scope, 0).groups)
    out[g.label] = g.bytes;
  return out;
}

Ent alloc(uint64_t addr, uint64_t size, int64_t t, std::optional<std::string> compile,
          std::optional<std::string> metadata) {
  Ent e{"alloc", addr, size, t, 0, {}};
  e.compile_context = std::move(compile);
  e.user_metadata = std::move(metadata);
  return e;
}

TEST(SnapshotFields, ContextsBecomeScopes) {
  TempDir dir;
  // PyTorch writes both keys on every entry: "N/A" and "" when there is none.
  const std::vector<Ent> trace = {
      alloc(0x100000, 1 * MiB, 20, kRegion, ""),           // A: in the region
      alloc(0x200000, 2 * MiB, 30, kRegion, "phase=fwd"),  // B: in the region, metadata set
      alloc(0x400000, 512 * KiB, 40, "N/A", "phase=fwd"),  // C: region left, metadata kept
      alloc(0x480000, 256 * KiB, 50, "N/A", ""),           // D: neither
      alloc(0x4c0000, 128 * KiB, 60, kRegion, ""),         // E: the region again
  };
  const std::string out = dir.file("ctx.db");
  const im::ImportStats stats = im::import_pytorch_snapshot(
      write(dir, "ctx.pickle", SnapshotBuilder().build({}, {trace})), out);
  EXPECT_TRUE(stats.notes.empty());
  // Runs: the region over A-B and E, the metadata over B (inside the region) and C (outside).
  EXPECT_EQ(stats.context_scopes, 4u);

  an::Trace t = an::Trace::open(out);
  const std::string region = "compile: " + kRegion, meta = "metadata: phase=fwd";
  const std::map<std::string, int64_t> want = {
      {region, int64_t{1 * MiB + 128 * KiB}},   // A and E: one name, two runs
      {region + "/" + meta, int64_t{2 * MiB}},  // B
      {meta, int64_t{512 * KiB}},               // C
      {"(no scope)", int64_t{256 * KiB}},       // D
  };
  EXPECT_EQ(live_by_scope(t, "cuda:0"), want);

  // The spans: a run closes at the first entry outside it (the metadata closes with the
  // region at 40 us and opens again outside it), the last at the last entry.
  std::vector<std::tuple<std::string, uint64_t, uint64_t>> spans;
  for (const an::ScopeSpan& s : an::scopes(t, 0, INT64_MAX))
    spans.emplace_back(s.path, s.push_ts / 1000, s.pop_ts.value_or(0) / 1000);
  const std::vector<std::tuple<std::string, uint64_t, uint64_t>> want_spans = {
      {region, 20, 40}, {region + "/" + meta, 30, 40}, {meta, 40, 50}, {region, 60, 60}};
  EXPECT_EQ(spans, want_spans);
}

// An annotation (record_function range) opening inside a run closes the run's scopes, which
// open again inside it: scopes nest, and the annotation's range stays whole.
TEST(SnapshotFields, ContextsNestInsideAnnotations) {
  TempDir dir;
  const std::vector<Ent> trace = {
      alloc(0x100000, 1 * MiB, 20, kRegion, ""),           // A: the region, before the range
      alloc(0x200000, 2 * MiB, 30, kRegion, "phase=fwd"),  // B: inside Optimizer.step (25-45)
      alloc(0x400000, 512 * KiB, 40, "N/A", "phase=fwd"),  // C: inside it too
      alloc(0x480000, 256 * KiB, 50, "N/A", "phase=fwd"),  // D: after it
  };
  const std::string step = "Optimizer.step#SGD.step";
  SnapshotBuilder b;
  b.annotations({{"START", step, 0, 25}, {"END", step, 0, 45}});
  const std::string out = dir.file("nest.db");
  const im::ImportStats stats =
      im::import_pytorch_snapshot(write(dir, "nest.pickle", b.build({}, {trace})), out);
  EXPECT_EQ(stats.annotations, 2u);
  // The region at 20 (closed at 25 by the range), again at 30 with the metadata, the metadata
  // alone at 40 (closed at 45 by the range's end) and again at 50.
  EXPECT_EQ(stats.context_scopes, 5u);

  an::Trace t = an::Trace::open(out);
  const std::string region = "compile: " + kRegion, meta = "metadata: phase=fwd";
  const std::map<std::string, int64_t> want = {
      {region, int64_t{1 * MiB}},
      {step + "/" + region + "/" + meta, int64_t{2 * MiB}},
      {step + "/" + meta, int64_t{512 * KiB}},
      {meta, int64_t{256 * KiB}},
  };
  EXPECT_EQ(live_by_scope(t, "cuda:0"), want);
  for (const an::ScopeSpan& s : an::scopes(t, 0, INT64_MAX))
    if (s.name == step) {
      EXPECT_EQ(s.push_ts, 25'000u);
      EXPECT_EQ(s.pop_ts.value_or(0), 45'000u);
      EXPECT_EQ(s.depth, 0);
    }
}

// A compile_context or user_metadata that is not a str is counted and read as none.
TEST(SnapshotFields, OddContextsAreNotes) {
  TempDir dir;
  PickleWriter w(4);
  w.empty_dict().mark().str("segments").empty_list().str("device_traces").empty_list().mark();
  w.empty_list().mark();
  for (int i = 0; i < 2; ++i) {
    w.empty_dict().mark().str("action").str("alloc").str("addr").integer(0x1000 + i * 0x1000);
    w.str("size").integer(512).str("time_us").integer(i + 1);
    w.str("compile_context").integer(7).str("user_metadata");
    if (i == 0)
      w.none();  // None: no metadata, nothing odd
    else
      w.empty_list();
    w.setitems();
  }
  w.appends().appends().setitems();
  const std::string out = dir.file("odd.db");
  const im::ImportStats stats =
      im::import_pytorch_snapshot(write(dir, "odd.pickle", w.finish()), out);
  const std::vector<std::string> want = {
      "2 trace entries whose 'compile_context' is not a str (read as none)",
      "1 trace entries whose 'user_metadata' is not a str (read as none)"};
  EXPECT_EQ(stats.notes, want);
  EXPECT_EQ(stats.context_scopes, 0u);
  an::Trace t = an::Trace::open(out);
  EXPECT_EQ(live_by_scope(t, "cuda:0"), (std::map<std::string, int64_t>{{"(no scope)", 1024}}));
}

// ---- pinned host memory -------------------------------------------------------------------------

TEST(SnapshotFields, PinnedHostMemoryIsADeviceOfItsOwn) {
  TempDir dir;
  const uint64_t H = 0x7f0000000000;
  // The pinned host allocator: a 4 MiB segment; 1 MiB and 2 MiB blocks (peak 3 MiB at 30 us),
  // the first freed, then 512 KiB. Its `device` (-1 here) is not a CUDA index and is not read.
  Host host;
  host.segments = {{-1,
                    H,
                    4 * MiB,
                    0,
                    "large",
                    false,
                    {{H + 1 * MiB, 2 * MiB, 2 * MiB}, {H + 3 * MiB, 512 * KiB, 512 * KiB}}}};
  host.traces = {{{"segment_alloc", H, 4 * MiB, 10, 0, {}},
                  {"alloc", H, 1 * MiB, 20, 0, {}},
                  {"alloc", H + 1 * MiB, 2 * MiB, 30, 0, {}},
                  {"free_requested", H, 1 * MiB, 40, 0, {}},
                  {"free_completed", H, 1 * MiB, 40, 0, {}},
                  {"alloc", H + 3 * MiB, 512 * KiB, 50, 0, {}}}};
  // The GPU beside it: one 2 MiB segment holding a 1 MiB block.
  const std::vector<Seg> segs = {
      {0, 0x200000, 2 * MiB, 0, "large", false, {{0x200000, 1 * MiB, 1 * MiB}}}};
  const std::vector<std::vector<Ent>> traces = {
      {{"segment_alloc", 0x200000, 2 * MiB, 15, 0, {}}, {"alloc", 0x200000, 1 * MiB, 25, 0, {}}}};
  for (bool flat : {false, true}) {
    SCOPED_TRACE(flat ? "host_traces as one list of entries" : "host_traces as a list of traces");
    host.flat = flat;
    SnapshotBuilder b;
    b.host(host);
    const std::string out = dir.file(flat ? "flat.db" : "pinned.db");
    const im::ImportStats stats =
        im::import_pytorch_snapshot(write(dir, "pinned.pickle", b.build(segs, traces)), out);
    EXPECT_TRUE(stats.notes.empty()) << stats.notes.front();
    EXPECT_EQ(stats.devices, 2);

    an::Trace t = an::Trace::open(out);
    const an::DeviceRef& pinned = t.device("pinned host");
    EXPECT_EQ(pinned.name, "cpu:1");
    const an::DeviceSummary p = an::summarize_device(t, pinned);
    EXPECT_EQ(p.peak_allocated_bytes, int64_t{3 * MiB});
    EXPECT_EQ(p.peak_allocated_time_ns, 30'000u - 10'000u);  // from the first entry
    EXPECT_EQ(p.peak_reserved_bytes, int64_t{4 * MiB});
    EXPECT_EQ(p.final_allocated_bytes, int64_t{2 * MiB + 512 * KiB});
    EXPECT_EQ(p.alloc_count, 3u);
    // The GPU's figures hold only its own memory.
    const an::DeviceSummary g = an::summarize_device(t, t.device("cuda:0"));
    EXPECT_EQ(g.peak_allocated_bytes, int64_t{1 * MiB});
    EXPECT_EQ(g.peak_reserved_bytes, int64_t{2 * MiB});
  }
  // What the curves are made of is checked there as in device_traces, named by its place.
  host.flat = false;
  host.traces[0][2].size = uint64_t{1} << 60;
  SnapshotBuilder b;
  b.host(host);
  const std::string bad = write(dir, "bad.pickle", b.build(segs, traces));
  try {
    im::import_pytorch_snapshot(bad, dir.file("bad.db"));
    ADD_FAILURE() << "imported";
  } catch (const im::ImportError& e) {
    EXPECT_EQ(std::string(e.what()),
              bad +
                  ": not a PyTorch memory snapshot: host_traces[0][2]: 'size' "
                  "1152921504606846976 is out of range (more than 2^56)");
  }
}

// ---- private pools ------------------------------------------------------------------------------

TEST(SnapshotFields, PrivatePoolsAreCountedPerPool) {
  TempDir dir;
  // cuda:0: 2 MiB in the default pool, pool (0, 1) with 20 + 2 MiB, pool (0, 2) with 4 MiB;
  // cuda:1: pool (0, 3) with 8 MiB.
  std::vector<Seg> segs = {
      {0, 0x10000000, 2 * MiB, 0, "small", false, {}},
      {0, 0x20000000, 20 * MiB, 0, "large", false, {}, {0, 1}},
      {0, 0x30000000, 2 * MiB, 0, "small", false, {}, {0, 1}},
      {0, 0x40000000, 4 * MiB, 0, "large", false, {}, {0, 2}},
      {1, 0x10000000, 8 * MiB, 0, "large", false, {}, {0, 3}},
  };
  const std::string out = dir.file("pools.db");
  const im::ImportStats stats = im::import_pytorch_snapshot(
      write(dir, "pools.pickle", SnapshotBuilder().build(segs, {})), out);
  ASSERT_EQ(stats.private_pools.size(), 3u);
  EXPECT_EQ(stats.private_pools[0].device, "cuda:0");
  EXPECT_EQ(stats.private_pools[0].pool, (std::pair<int64_t, int64_t>{0, 1}));
  EXPECT_EQ(stats.private_pools[0].segments, 2u);
  EXPECT_EQ(stats.private_pools[0].reserved_bytes, 22 * MiB);

  an::Trace t = an::Trace::open(out);
  const an::DeviceSummary d0 = an::summarize_device(t, t.device("cuda:0")),
                          d1 = an::summarize_device(t, t.device("cuda:1"));
  EXPECT_EQ(d0.final_reserved_bytes, int64_t{28 * MiB});  // every pool counts in reserved
  ASSERT_EQ(d0.private_pools.size(), 2u);
  EXPECT_EQ(d0.private_pools[0].pool_b, 1);
  EXPECT_EQ(d0.private_pools[0].segments, 2u);
  EXPECT_EQ(d0.private_pools[0].reserved_bytes, int64_t{22 * MiB});
  EXPECT_EQ(d0.private_pools[1].pool_b, 2);
  EXPECT_EQ(d0.private_pools[1].reserved_bytes, int64_t{4 * MiB});
  ASSERT_EQ(d1.private_pools.size(), 1u);
  EXPECT_EQ(d1.private_pools[0].reserved_bytes, int64_t{8 * MiB});
  // summary --json: per device.
  const nlohmann::json j = an::summarize(t, {});
  EXPECT_EQ(j["devices"][0]["private_pools"],
            nlohmann::json::parse(R"([{"pool": [0, 1], "segments": 2, "reserved_bytes": 23068672},
                                      {"pool": [0, 2], "segments": 1, "reserved_bytes": 4194304}])"));
  EXPECT_EQ(j["devices"][1]["private_pools"][0]["reserved_bytes"], 8 * MiB);
  // The meta key, for whoever reads the trace by SQL.
  EXPECT_EQ(nlohmann::json::parse(t.meta_text("private_pools")).size(), 3u);

  // No private pool: no key, and an odd pool id is a note, read as the default pool.
  PickleWriter w(4);
  w.empty_dict().mark().str("segments").empty_list().mark().empty_dict().mark();
  w.str("device").integer(0).str("address").integer(4096).str("total_size").integer(2 * MiB);
  w.str("segment_pool_id").str("graph").str("blocks").empty_list();
  w.setitems().appends().setitems();
  const std::string plain = dir.file("plain.db");
  const im::ImportStats ps =
      im::import_pytorch_snapshot(write(dir, "plain.pickle", w.finish()), plain);
  EXPECT_EQ(
      ps.notes,
      std::vector<std::string>{
          "1 segments whose 'segment_pool_id' is not a pair of ints (read as the default pool)"});
  EXPECT_TRUE(ps.private_pools.empty());
  an::Trace pt = an::Trace::open(plain);
  EXPECT_EQ(pt.meta_text("private_pools"), "");
  EXPECT_TRUE(an::summarize_device(pt, pt.device("cuda:0")).private_pools.empty());
}

}  // namespace
