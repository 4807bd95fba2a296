// PyTorch snapshot import: a real snapshot (tests/data/pytorch; peaks and final values checked
// against tests/importers/data/snapshot_small_gpu_expected.json, which the Python script beside it
// computes independently with Python's own pickle), and small snapshots built here for each case
// the importer handles: history that started late, blocks pending free, segment_free, expandable
// segments, several devices, frames, the pre-2.1 format (bad input:
// pytorch_snapshot_errors_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "snapshot_builder.h"

namespace {

using namespace snapshot_test;

// ---- The real snapshot --------------------------------------------------------------------------

TEST(PytorchSnapshot, RealSnapshotMatchesIndependentPythonReplay) {
  std::ifstream jf(kData / "snapshot_small_gpu_expected.json");
  ASSERT_TRUE(jf) << "missing expected values";
  nlohmann::json expected = nlohmann::json::parse(jf);

  TempDir dir;
  std::string out = dir.file("snap.db");
  im::ImportStats stats = im::import_pytorch_snapshot(kSnapshot.string(), out);
  EXPECT_EQ(stats.devices, 1);
  EXPECT_EQ(stats.segments, 10u);
  EXPECT_GT(stats.frames, 50u);

  st::TraceReader r = st::TraceReader::open(out, st::TraceReader::Require::finalized);
  EXPECT_EQ(r.event_count(), stats.events);
  ASSERT_EQ(r.devices().size(), expected["devices"].size());
  for (const auto& d : expected["devices"]) {
    std::string name = d["device"];
    SCOPED_TRACE(name);
    int64_t dev = device_row(r, std::stoi(name.substr(5)));
    auto peak = [&](st::Curve c) { return r.peak(dev, c).value_or(st::Peak{}); };
    EXPECT_EQ(peak(st::Curve::allocated).bytes, d["peak_allocated_bytes"].get<int64_t>());
    EXPECT_EQ(peak(st::Curve::allocated).ts_ns, d["peak_allocated_time_ns"].get<uint64_t>());
    EXPECT_EQ(peak(st::Curve::reserved).bytes, d["peak_reserved_bytes"].get<int64_t>());
    EXPECT_EQ(peak(st::Curve::reserved).ts_ns, d["peak_reserved_time_ns"].get<uint64_t>());
    EXPECT_EQ(peak(st::Curve::active).bytes, d["peak_active_bytes"].get<int64_t>());
    EXPECT_EQ(peak(st::Curve::requested).bytes, d["peak_requested_bytes"].get<int64_t>());
    Final f = final_values(r, dev);
    EXPECT_EQ(f.allocated, d["final_allocated_bytes"].get<int64_t>());
    EXPECT_EQ(f.reserved, d["final_reserved_bytes"].get<int64_t>());
    EXPECT_EQ(f.active, d["final_active_bytes"].get<int64_t>());
    EXPECT_EQ(f.requested, d["final_requested_bytes"].get<int64_t>());
    // The end state is the snapshot's own `segments`.
    EXPECT_EQ(f.allocated, d["segments_allocated_bytes"].get<int64_t>());
    EXPECT_EQ(f.reserved, d["segments_reserved_bytes"].get<int64_t>());

    // One allocation row per alloc in the trace plus one per block that existed before it.
    auto allocs = r.allocations(dev);
    EXPECT_EQ(allocs.size(),
              d["actions"]["alloc"].get<size_t>() + d["initial_blocks"].get<size_t>());
  }

  // Segments carry the frames of their segment_alloc entry (the 7 of the history, with 50, 87,
  // ... frames, as Python's pickle reads them); the 3 from before the history have none (the
  // snapshot's `segments` give no frames).
  const std::map<uint64_t, size_t> entry_frames = {
      {0x7f4474000000, 50}, {0x7f4445600000, 87}, {0x7f4445800000, 73}, {0x7f4475400000, 69},
      {0x7f4476800000, 55}, {0x7f4477c00000, 32}, {0x7f4412000000, 35}};
  const std::vector<st::SegmentRow> segs = r.segments_where("ORDER BY addr", {});
  ASSERT_EQ(segs.size(), 10u);
  for (const st::SegmentRow& s : segs) {
    auto it = entry_frames.find(s.addr);
    SCOPED_TRACE(s.addr);
    EXPECT_EQ(r.stack(s.stack_id).size(), it == entry_frames.end() ? 0u : it->second);
    if (it != entry_frames.end()) {
      EXPECT_EQ(r.frames(r.stack(s.stack_id).front())[0].function, "torch::unwind::unwind()");
    }
  }
  EXPECT_EQ(r.meta().start_ts_ns, expected["devices"][0]["first_time_ns"].get<uint64_t>());
  EXPECT_EQ(r.meta_value("last_ts_ns"),
            std::to_string(expected["devices"][0]["last_time_ns"].get<uint64_t>()));

  // Marks: the start-state marker (its value: the synthetic events after it) and one per
  // `snapshot` entry, whose size PyTorch records as the allocated bytes at that moment: replaying
  // the imported events must give the same number at each.
  int64_t allocated = 0;
  int snapshot_marks = 0, start_marks = 0;
  uint64_t synthetic = 0;
  r.for_each_event([&](const ev::Event& e, uint64_t) {
    if (e.kind == ev::Kind::alloc) allocated += static_cast<int64_t>(e.block.size);
    if (e.kind == ev::Kind::free_requested) allocated -= static_cast<int64_t>(e.block.size);
    if (e.kind == ev::Kind::mark && e.name.name == "snapshot") {
      ++snapshot_marks;
      EXPECT_EQ(allocated, static_cast<int64_t>(e.name.value)) << "at seq " << e.seq;
    }
    if (e.kind == ev::Kind::mark && e.name.name == "snapshot: state before trace") {
      ++start_marks;
      synthetic = e.name.value;
    }
  });
  const auto& d0 = expected["devices"][0];
  EXPECT_EQ(snapshot_marks, d0["actions"]["snapshot"].get<int>());
  EXPECT_EQ(start_marks, 1);
  EXPECT_EQ(synthetic,
            d0["initial_blocks"].get<uint64_t>() + d0["initial_segments"].get<uint64_t>());

  // Frames: the stack of the first alloc after the trace's first instant, innermost first,
  // resolved from the snapshot's frames.
  std::optional<st::AllocationRow> in_trace;
  for (const auto& a : r.allocations(device_row(r, 0)))
    if (a.alloc_ts > r.meta().start_ts_ns && (!in_trace || a.seq < in_trace->seq)) in_trace = a;
  ASSERT_TRUE(in_trace);
  std::vector<uint64_t> ips = r.stack(in_trace->stack_id);
  ASSERT_GT(ips.size(), 10u);
  auto fr = r.frames(ips.front());
  ASSERT_EQ(fr.size(), 1u);
  EXPECT_EQ(fr[0].function, "torch::unwind::unwind()");
  EXPECT_EQ(fr[0].file, "");  // "??" in the snapshot
  bool python_frame = false;
  for (uint64_t ip : ips) {
    for (const auto& f : r.frames(ip)) {
      if (f.file.ends_with(".py") && f.line > 0) python_frame = true;
    }
  }
  EXPECT_TRUE(python_frame);
  EXPECT_EQ(r.frames(ips.back())[0].function, "_start");
}

// ---- Snapshots built here (snapshot_builder.h)
// ---------------------------------------------------

// History that started late: blocks and segments that existed before the trace.
TEST(PytorchSnapshot, RebuildsTheStateBeforeTheTrace) {
  const uint64_t S1 = 0x10000000, S2 = 0x20000000, S3 = 0x30000000;
  const uint64_t B1 = S1, B2 = S1 + MiB, B3 = S1 + 3 * MiB, B4 = S2, B5 = S1 + 8 * MiB;
  std::vector<Frame> stack = {{"inner", "a.cpp", 10}, {"??", "??", 0}, {"outer", "train.py", 7}};
  std::vector<Seg> segs = {
      {0,
       S1,
       20 * MiB,
       0,
       "large",
       false,
       {{B1, MiB, MiB, "active_allocated", stack},
        {B2, 2 * MiB, 2 * MiB, "active_allocated", {{"before", "b.py", 3}}},
        {B3, 4096, 4000, "active_pending_free", {}},
        {B3 + 4096, 20 * MiB - 3 * MiB - 4096, 0, "inactive", {}}}},
      {0, S2, 2 * MiB, 0, "small", false, {{B4, 512, 100, "active_allocated", {}}}},
  };
  std::vector<std::vector<Ent>> traces = {{
      {"free_requested", B5, 3000000, 1000, 0, {}},
      {"free_completed", B5, 3000000, 1001, 0, {}},
      {"alloc", B1, MiB, 1002, 0, stack},
      {"segment_free", S3, 20 * MiB, 1003, 0, {}},
      {"segment_alloc", S2, 2 * MiB, 1004, 0, {}},
      {"alloc", B4, 100, 1005, 0, {}},
      {"free_requested", B3, 4000, 1006, 0, {}},
      {"snapshot", 0, 3146240, 1007, 0, {}},
      {"oom", 0, uint64_t{1} << 30, 1008, 7, {}, 12345},
  }};
  TempDir dir;
  std::string in = write(dir, "s.pickle", SnapshotBuilder().build(segs, traces));
  std::string out = dir.file("s.db");
  im::ImportStats stats = im::import_pytorch_snapshot(in, out);
  EXPECT_EQ(stats.devices, 1);
  EXPECT_EQ(stats.segments, 2u);
  EXPECT_EQ(stats.frames, 4u);
  // 1 mark + 2 segments + 3 blocks before the trace; 9 entries.
  EXPECT_EQ(stats.events, 1u + 5u + 9u);

  st::TraceReader r = st::TraceReader::open(out, st::TraceReader::Require::finalized);
  int64_t dev = device_row(r, 0);
  const uint64_t t0 = 1000 * 1000;
  // Before the trace: S1 + S3 reserved; B2 (2 MiB), B3 (4096, exact) and B5 (3000000 rounded
  // to 3000320) allocated.
  auto pa = r.peak(dev, st::Curve::allocated);
  ASSERT_TRUE(pa);
  EXPECT_EQ(pa->bytes, int64_t(2 * MiB + 4096 + 3000320));
  EXPECT_EQ(pa->ts_ns, t0);
  EXPECT_EQ(r.peak(dev, st::Curve::reserved)->bytes, int64_t(40 * MiB));
  EXPECT_EQ(r.peak(dev, st::Curve::requested)->bytes, int64_t(2 * MiB + 4000 + 3000000));
  Final f = final_values(r, dev);
  EXPECT_EQ(f.allocated, int64_t(MiB + 2 * MiB + 512));
  EXPECT_EQ(f.active, int64_t(MiB + 2 * MiB + 512 + 4096));  // B3 is pending free
  EXPECT_EQ(f.reserved, int64_t(22 * MiB));
  EXPECT_EQ(f.requested, int64_t(MiB + 2 * MiB + 100));
  EXPECT_EQ(f.allocated, 3146240);  // what the `snapshot` entry says

  std::map<uint64_t, st::AllocationRow> by_addr;
  for (const auto& a : r.allocations(dev)) by_addr[a.addr] = a;
  ASSERT_EQ(by_addr.size(), 5u);
  EXPECT_EQ(by_addr[B5].size, 3000320u);
  EXPECT_EQ(by_addr[B5].alloc_ts, t0);
  EXPECT_EQ(by_addr[B5].free_completed_ts, 1001'000u);
  EXPECT_EQ(by_addr[B3].free_requested_ts, 1006'000u);
  EXPECT_FALSE(by_addr[B3].free_completed_ts);
  EXPECT_EQ(by_addr[B4].size, 512u);  // the exact block size from `segments`
  EXPECT_EQ(by_addr[B4].requested_size, 100u);
  EXPECT_EQ(by_addr[B4].segment, S2);
  EXPECT_EQ(by_addr[B4].pool, ev::Pool::small);
  EXPECT_EQ(by_addr[B1].segment, S1);
  EXPECT_EQ(by_addr[B1].pool, ev::Pool::large);
  EXPECT_EQ(by_addr[B1].alloc_ts, 1002'000u);
  // The synthetic alloc of B2 carries the block's frames; B1's the entry's.
  auto frames_of = [&](uint64_t stack_id) {
    std::vector<std::string> names;
    for (uint64_t ip : r.stack(stack_id))
      for (const auto& fr : r.frames(ip))
        names.push_back(fr.function + "@" + fr.file + ":" + std::to_string(fr.line));
    return names;
  };
  EXPECT_EQ(frames_of(by_addr[B2].stack_id), std::vector<std::string>{"before@b.py:3"});
  EXPECT_EQ(frames_of(by_addr[B1].stack_id),
            (std::vector<std::string>{"inner@a.cpp:10", "@:0", "outer@train.py:7"}));

  // The OOM carries the allocator state at that moment.
  bool saw_oom = false;
  r.for_each_event([&](const ev::Event& e, uint64_t) {
    if (e.kind != ev::Kind::oom) return;
    saw_oom = true;
    EXPECT_EQ(e.allocator.requested_size, uint64_t{1} << 30);
    EXPECT_EQ(e.allocator.device_free, 12345u);
    EXPECT_EQ(e.allocator.stream, 7u);
    EXPECT_EQ(e.allocator.allocated, 3146240u);
    EXPECT_EQ(e.allocator.reserved, 22 * MiB);
  });
  EXPECT_TRUE(saw_oom);
  EXPECT_EQ(r.meta().allocator_settings, "expandable_segments:False,max_split_size:-1");
  EXPECT_EQ(r.meta().command_line, "pytorch-snapshot:" + in);
  EXPECT_EQ(r.meta().stack_depth, 3);
}

TEST(PytorchSnapshot, ExpandableSegmentsAndSeveralDevices) {
  const uint64_t E = 0x50000000, P = 0x70000000;
  std::vector<Seg> segs = {
      {0,
       E,
       40 * MiB,
       0,
       "large",
       true,
       {{E + 20 * MiB, 8 * MiB, 8 * MiB, "active_allocated", {}}}},
      {1, P, 2 * MiB, 0, "small", false, {{P, 512, 512, "active_allocated", {}}}},
  };
  std::vector<std::vector<Ent>> traces = {
      {
          {"segment_map", E + 20 * MiB, 20 * MiB, 2000, 0, {}},
          {"alloc", E + 20 * MiB, 8 * MiB, 2002, 0, {}},
          {"segment_map", E + 40 * MiB, 20 * MiB, 2004, 0, {}},
          {"segment_unmap", E + 40 * MiB, 20 * MiB, 2006, 0, {}},
      },
      {
          {"segment_alloc", P, 2 * MiB, 2001, 0, {}},
          {"alloc", P, 512, 2003, 0, {}},
          {"alloc", P + 512, 1000, 2005, 0, {}},
          {"free_requested", P + 512, 1000, 2007, 0, {}},
          {"free_completed", P + 512, 1000, 2008, 0, {}},
      },
  };
  TempDir dir;
  std::string in = write(dir, "e.pickle", SnapshotBuilder(5).build(segs, traces));
  std::string out = dir.file("e.db");
  im::ImportStats stats = im::import_pytorch_snapshot(in, out);
  EXPECT_EQ(stats.devices, 2);
  st::TraceReader r = st::TraceReader::open(out, st::TraceReader::Require::finalized);
  int64_t d0 = device_row(r, 0), d1 = device_row(r, 1);
  // cuda:0: 20 MiB mapped before the trace, 60 at the peak, 40 at the end.
  EXPECT_EQ(r.peak(d0, st::Curve::reserved)->bytes, int64_t(60 * MiB));
  EXPECT_EQ(r.peak(d0, st::Curve::reserved)->ts_ns, 2004'000u);
  EXPECT_EQ(final_values(r, d0).reserved, int64_t(40 * MiB));
  EXPECT_EQ(final_values(r, d0).allocated, int64_t(8 * MiB));
  // cuda:1: 512 + 1024 at the peak.
  EXPECT_EQ(r.peak(d1, st::Curve::allocated)->bytes, 1536);
  EXPECT_EQ(final_values(r, d1).allocated, 512);
  EXPECT_EQ(final_values(r, d1).reserved, int64_t(2 * MiB));
  // Devices named cuda:N, capacity unknown.
  for (const auto& row : r.devices()) {
    EXPECT_EQ(row.info.id.type, ev::DeviceType::cuda);
    EXPECT_EQ(row.info.name, "cuda:" + std::to_string(row.info.id.index));
    EXPECT_EQ(row.info.capacity, 0u);
  }
  // Events are in time order across devices.
  uint64_t last = 0;
  r.for_each_event([&](const ev::Event& e, uint64_t) {
    EXPECT_GE(e.ts_ns, last);
    last = e.ts_ns;
  });
}

// PyTorch < 2.1: a bare list of segments, blocks without addresses, no trace.
TEST(PytorchSnapshot, SegmentsOnlyFormat) {
  PickleWriter w(2);
  w.empty_list().memoize();
  w.mark();
  w.empty_dict().memoize();
  w.mark();
  w.str("device").integer(0).str("address").integer(0x1000000).str("total_size").integer(2 * MiB);
  w.str("stream").integer(0).str("segment_type").str("small").str("blocks").empty_list().memoize();
  w.mark();
  for (auto [size, state] : {std::pair{4096, "active_allocated"}, std::pair{8192, "inactive"},
                             std::pair{1024, "active_allocated"}}) {
    w.empty_dict().memoize();
    w.mark().str("size").integer(size).str("state").str(state).setitems();
  }
  w.appends();
  w.setitems();
  w.appends();
  TempDir dir;
  std::string in = write(dir, "old.pickle", w.finish());
  im::ImportStats stats = im::import_pytorch_snapshot(in, dir.file("old.db"));
  EXPECT_EQ(stats.segments, 1u);
  st::TraceReader r =
      st::TraceReader::open(dir.file("old.db"), st::TraceReader::Require::finalized);
  int64_t dev = device_row(r, 0);
  EXPECT_EQ(final_values(r, dev).allocated, 4096 + 1024);
  EXPECT_EQ(final_values(r, dev).reserved, int64_t(2 * MiB));
  std::vector<uint64_t> addrs;
  for (const auto& a : r.allocations(dev)) addrs.push_back(a.addr);
  EXPECT_EQ(addrs, (std::vector<uint64_t>{0x1000000, 0x1000000 + 4096 + 8192}));
}

TEST(PytorchSnapshot, EmptySnapshot) {
  TempDir dir;
  std::string in = write(dir, "empty.pickle", SnapshotBuilder().build({}, {}));
  im::ImportStats stats = im::import_pytorch_snapshot(in, dir.file("empty.db"));
  EXPECT_EQ(stats.events, 0u);
  EXPECT_EQ(stats.devices, 0);
  st::TraceReader r =
      st::TraceReader::open(dir.file("empty.db"), st::TraceReader::Require::finalized);
  EXPECT_TRUE(r.devices().empty());
}

// Every action, in a snapshot Python's own pickler wrote (make_reference_pickles.py).
TEST(PytorchSnapshot, EveryActionFromPython) {
  TempDir dir;
  std::string out = dir.file("every.db");
  im::ImportStats stats =
      im::import_pytorch_snapshot((kData / "snapshot_every_action.pkl").string(), out);
  EXPECT_EQ(stats.devices, 2);
  st::TraceReader r = st::TraceReader::open(out, st::TraceReader::Require::finalized);
  int64_t d0 = device_row(r, 0), d1 = device_row(r, 1);
  // cuda:0: an expandable segment 20 MiB mapped before the trace, 60 MiB at most, 40 at the end.
  EXPECT_EQ(r.peak(d0, st::Curve::reserved)->bytes, int64_t(60 * MiB));
  EXPECT_EQ(final_values(r, d0).reserved, int64_t(40 * MiB));
  EXPECT_EQ(final_values(r, d0).allocated, int64_t(8 * MiB));
  // cuda:1: before the trace, segments at 2 GiB and 3 GiB (freed in the trace) and four blocks:
  // the one `free` frees (700 -> 1024), the one pending free at the end (512), the one a
  // free_completed ends (64 -> 512, already pending), and the allocated one (512).
  EXPECT_EQ(r.peak(d1, st::Curve::reserved)->bytes, int64_t(4 * MiB));
  EXPECT_EQ(r.peak(d1, st::Curve::allocated)->bytes, 1024 + 512 + 512);
  EXPECT_EQ(r.peak(d1, st::Curve::active)->bytes, 1024 + 512 + 512 + 512);
  EXPECT_EQ(final_values(r, d1).allocated, 512);
  EXPECT_EQ(final_values(r, d1).active, 1024);
  EXPECT_EQ(final_values(r, d1).reserved, int64_t(2 * MiB));
  // The mapped range of the segment_map entry has its frames (f0, train.py:10); the one mapped
  // before the trace and the one mapped without frames have none.
  std::vector<std::string> mapped;
  for (const st::SegmentRow& s : r.segments_where("WHERE device = ?1 ORDER BY addr", {d0})) {
    std::string frames;
    for (uint64_t ip : r.stack(s.stack_id))
      for (const auto& f : r.frames(ip))
        frames += f.function + "@" + f.file + ":" + std::to_string(f.line);
    mapped.push_back(std::to_string(s.addr) + " " + frames);
  }
  EXPECT_EQ(mapped, (std::vector<std::string>{std::to_string(0x40000000) + " ",
                                              std::to_string(0x41400000) + " f0@train.py:10",
                                              std::to_string(0x42800000) + " "}));
  int ooms = 0;
  r.for_each_event([&](const ev::Event& e, uint64_t) { ooms += e.kind == ev::Kind::oom; });
  EXPECT_EQ(ooms, 1);
  EXPECT_EQ(r.meta().allocator_settings, "expandable_segments:True,max_split_size:-1");
}

// Trace entries are read as the pickle is parsed and released with their frames lists (docs/
// importers.md, "Reading while parsing"); an entry that does not read cleanly stays for the
// reader. A frames list a block in `segments` shares with a released entry keeps its frames.
TEST(PytorchSnapshot, EntriesReadWhileParsingKeepSharedFrames) {
  TempDir dir;
  PickleWriter w(4);
  w.empty_dict().mark().str("segments").empty_list().mark();
  w.empty_dict()
      .mark()
      .str("device")
      .integer(0)
      .str("address")
      .integer(0x1000)
      .str("total_size")
      .integer(2 * MiB)
      .str("stream")
      .integer(0)
      .str("segment_type")
      .str("small")
      .str("blocks")
      .empty_list()
      .mark();
  w.empty_dict()
      .mark()
      .str("address")
      .integer(0x1200)
      .str("size")
      .integer(512)
      .str("requested_size")
      .integer(512)
      .str("state")
      .str("active_allocated")
      .str("frames")
      .empty_list()
      .mark();
  w.empty_dict()
      .mark()
      .str("name")
      .str("f")
      .str("filename")
      .str("a.py")
      .str("line")
      .integer(3)
      .setitems();
  w.appends();
  const uint32_t shared = w.memoize();
  w.setitems().appends().setitems().appends();
  w.str("device_traces").empty_list().mark().empty_list().mark();
  w.empty_dict()
      .mark()
      .str("action")
      .str("alloc")
      .str("addr")
      .integer(0x1000)
      .str("size")
      .integer(500)
      .str("time_us")
      .integer(10)
      .str("frames")
      .get(shared)
      .setitems();
  w.empty_dict().mark().str("action").str("weird").str("time_us").integer(11).setitems();
  w.empty_dict()
      .mark()
      .str("action")
      .str("alloc")
      .str("addr")
      .integer(0x1400)
      .str("size")
      .integer(100)
      .str("time_us")
      .integer(12)
      .str("frames")
      .get(shared)
      .setitems();
  w.appends().appends().setitems();
  std::string in = write(dir, "shared.pickle", w.finish());
  im::ImportStats stats = im::import_pytorch_snapshot(in, dir.file("shared.db"));
  EXPECT_EQ(stats.notes,
            (std::vector<std::string>{
                "1 entries of an action the importer does not know, such as 'weird' (skipped)"}));
  st::TraceReader r =
      st::TraceReader::open(dir.file("shared.db"), st::TraceReader::Require::finalized);
  std::vector<std::string> allocs;
  for (const auto& a : r.allocations(device_row(r, 0))) {
    std::string frames;
    for (uint64_t ip : r.stack(a.stack_id))
      for (const auto& f : r.frames(ip))
        frames += f.function + "@" + f.file + ":" + std::to_string(f.line);
    allocs.push_back(std::to_string(a.addr) + " " + std::to_string(a.size) + " " + frames);
  }
  std::sort(allocs.begin(), allocs.end());
  EXPECT_EQ(allocs, (std::vector<std::string>{"4096 512 f@a.py:3", "4608 512 f@a.py:3",
                                              "5120 512 f@a.py:3"}));
}

// Writes an `alloc` entry of 512 bytes up to its frames list, open for the frames that follow
// (then appends(), setitems()).
void open_alloc(PickleWriter& w, int64_t addr, int64_t time_us) {
  w.empty_dict().mark().str("action").str("alloc").str("addr").integer(addr);
  w.str("size").integer(512).str("time_us").integer(time_us).str("frames").empty_list().mark();
}

// Note [Frame dicts by content]: a pickle whose frame dicts are written anew at every use (no
// memo sharing) imports to the same stacks as its memo-shared twin, a duplicate named again
// through the memo included, and keeps one frame dict per content.
TEST(PytorchSnapshot, UnsharedFrameDictsImportAsTheirSharedTwin) {
  TempDir dir;
  struct Frame {
    const char* name;
    const char* file;
    int line;
  };
  const std::vector<std::vector<Frame>> stacks = {
      {{"f", "a.py", 3}, {"g", "a.py", 9}, {"main", "train.py", 40}},
      {{"h", "b.py", 1}, {"g", "a.py", 9}, {"main", "train.py", 40}},
      {{"f", "a.py", 3}, {"g", "a.py", 9}, {"main", "train.py", 41}},
  };
  auto write_snapshot = [&](bool shared) {
    PickleWriter w(4);
    std::map<std::string, uint32_t> memo;  // frame content -> memo index (shared)
    std::vector<uint32_t> dup_memo;        // memo of a frame dict written anew (unshared)
    w.empty_dict().mark().str("segments").empty_list();
    w.str("device_traces").empty_list().mark().empty_list().mark();
    for (int i = 0; i < 12; ++i) {
      const auto& stack = stacks[i % stacks.size()];
      open_alloc(w, 0x1000 + 512 * i, 10 + i);
      for (size_t k = 0; k < stack.size(); ++k) {
        const Frame& f = stack[k];
        const std::string key = std::string(f.name) + f.file + std::to_string(f.line);
        if (shared && memo.count(key)) {
          w.get(memo[key]);
          continue;
        }
        if (!shared && i == 7 && k == 0) {  // a duplicate already released, named again
          w.get(dup_memo[0]);
          continue;
        }
        w.empty_dict()
            .mark()
            .str("name")
            .str(f.name)
            .str("filename")
            .str(f.file)
            .str("line")
            .integer(f.line)
            .setitems();
        const uint32_t m = w.memoize();
        if (shared) memo[key] = m;
        if (!shared && i == 4 && k == 0)
          dup_memo.push_back(m);  // stacks[1]'s "h": a duplicate of i == 1's
      }
      w.appends().setitems();
    }
    w.appends().appends().setitems();
    return write(dir, shared ? "shared.pickle" : "unshared.pickle", w.finish());
  };
  auto sites = [&](const std::string& db) {
    st::TraceReader r = st::TraceReader::open(db, st::TraceReader::Require::finalized);
    std::vector<std::string> out;
    for (const auto& a : r.allocations(device_row(r, 0))) {
      std::string frames = std::to_string(a.addr) + ":";
      for (uint64_t ip : r.stack(a.stack_id))
        for (const auto& f : r.frames(ip))
          frames += " " + f.function + "@" + f.file + ":" + std::to_string(f.line);
      out.push_back(frames);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  const im::ImportStats a =
      im::import_pytorch_snapshot(write_snapshot(true), dir.file("shared.db"));
  const im::ImportStats b =
      im::import_pytorch_snapshot(write_snapshot(false), dir.file("unshared.db"));
  EXPECT_EQ(a.frames, 5u);  // f, g, h, main:40, main:41
  EXPECT_EQ(b.frames, a.frames);
  EXPECT_EQ(b.events, a.events);
  EXPECT_TRUE(b.notes.empty()) << b.notes.front();
  const std::vector<std::string> want = sites(dir.file("shared.db"));
  ASSERT_EQ(want.size(), 12u);
  // Innermost first; the 8th alloc (i == 7) is stacks[1], its "h" the released duplicate.
  EXPECT_EQ(want[7], std::to_string(0x1000 + 512 * 7) + ": h@b.py:1 g@a.py:9 main@train.py:40");
  EXPECT_EQ(sites(dir.file("unshared.db")), want);
}

// Note [Frame bound]: a snapshot of 6,000 allocations of 20 frames each, all 120,000 frames
// distinct (2.6 MB: the bound is its floor, 100,000), keeps the frames of the first 5,000
// allocations as they are and reads the last 1,000's as the one frame "(frames left out)", says
// how many it left out, and infers no steps from the stacks that now repeat.
TEST(PytorchSnapshot, DistinctFramesPastTheBoundAreLeftOut) {
  TempDir dir;
  constexpr int kAllocs = 6000, kDepth = 20;
  PickleWriter w(4);
  w.empty_dict().mark().str("segments").empty_list();
  w.str("device_traces").empty_list().mark().empty_list().mark();
  for (int i = 0; i < kAllocs; ++i) {
    open_alloc(w, 0x100000 + 512 * i, 10 + i);
    for (int k = 0; k < kDepth; ++k)
      w.empty_dict()
          .mark()
          .str("filename")
          .str("model.py")
          .str("line")
          .integer(1 + i * kDepth + k)
          .str("name")
          .str("forward")
          .setitems();
    w.appends().setitems();
  }
  w.appends().appends().setitems();
  const std::string in = write(dir, "distinct.pickle", w.finish());
  const im::ImportStats stats = im::import_pytorch_snapshot(in, dir.file("distinct.db"));
  EXPECT_EQ(stats.events, 1u + kAllocs);  // the mark at the start, the allocations
  EXPECT_EQ(stats.frames, 100'000u + 1);  // the kept ones and the one for those left out
  EXPECT_EQ(stats.inferred_steps, 0u);
  auto noted = [&](const std::string& line) {
    return std::find(stats.notes.begin(), stats.notes.end(), line) != stats.notes.end();
  };
  EXPECT_TRUE(noted(
      "20000 frames left out past 100000 distinct ones (one per 1024 bytes of the "
      "file, at least 100000; --max-events raises it) (read as one frame, '(frames left out)')"));
  EXPECT_TRUE(
      noted("1 devices whose categories and steps were not inferred (frames were left "
            "out)"));
  st::TraceReader r =
      st::TraceReader::open(dir.file("distinct.db"), st::TraceReader::Require::finalized);
  std::map<uint64_t, std::vector<std::string>> stack_of;  // addr -> frames, innermost first
  for (const auto& a : r.allocations(device_row(r, 0)))
    for (uint64_t ip : r.stack(a.stack_id))
      for (const auto& f : r.frames(ip))
        stack_of[a.addr].push_back(f.function + "@" + f.file + ":" + std::to_string(f.line));
  ASSERT_EQ(stack_of.size(), size_t(kAllocs));
  // The 5,000th allocation's frames are its own (lines 99,981 to 100,000); the next one's are
  // the frame left out, 20 times.
  const std::vector<std::string>& last_kept = stack_of[0x100000 + 512 * 4999];
  ASSERT_EQ(last_kept.size(), size_t(kDepth));
  EXPECT_EQ(last_kept.front(), "forward@model.py:99981");
  EXPECT_EQ(last_kept.back(), "forward@model.py:100000");
  const std::vector<std::string> left_out(kDepth, "(frames left out)@:0");
  EXPECT_EQ(stack_of[0x100000 + 512 * 5000], left_out);
  EXPECT_EQ(stack_of[0x100000 + 512 * 5999], left_out);
}

// PyTorch before 2.1 wrote no times: entries are ordered, times synthetic, and said so.
TEST(PytorchSnapshot, NoTimesMeansEntryOrder) {
  TempDir dir;
  PickleWriter w(4);
  w.empty_dict().mark().str("segments").empty_list().str("device_traces").empty_list().mark();
  w.empty_list().mark();
  for (uint64_t a : {0x1000, 0x2000})
    w.empty_dict()
        .mark()
        .str("action")
        .str("alloc")
        .str("addr")
        .integer(static_cast<int64_t>(a))
        .str("size")
        .integer(512)
        .setitems();
  w.empty_dict()
      .mark()
      .str("action")
      .str("free_requested")
      .str("addr")
      .integer(0x1000)
      .str("size")
      .integer(512)
      .setitems();
  w.appends().appends().setitems();
  std::string in = write(dir, "old.pickle", w.finish());
  im::ImportStats stats = im::import_pytorch_snapshot(in, dir.file("old.db"));
  EXPECT_TRUE(stats.synthetic_times);
  st::TraceReader r =
      st::TraceReader::open(dir.file("old.db"), st::TraceReader::Require::finalized);
  EXPECT_TRUE(r.meta().synthetic_times);
  EXPECT_EQ(r.meta().start_unix_ns, 0);
  std::vector<uint64_t> times;
  r.for_each_event([&](const ev::Event& e, uint64_t) {
    if (e.kind == ev::Kind::alloc || e.kind == ev::Kind::free_requested) times.push_back(e.ts_ns);
  });
  EXPECT_EQ(times, (std::vector<uint64_t>{0, 1000, 2000}));  // entry i at i microseconds
}

}  // namespace
