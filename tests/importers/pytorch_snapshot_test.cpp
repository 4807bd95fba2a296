// PyTorch snapshot import: a real snapshot (tests/data/pytorch; peaks and final values checked against
// tests/importers/data/snapshot_small_gpu_expected.json, which the Python script beside it computes
// independently with Python's own pickle), and small snapshots built here for each case the
// importer handles: history that started late, blocks pending free, segment_free, expandable
// segments, several devices, frames, the pre-2.1 format, and bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "profiler/importers/pickle_writer.h"
#include "profiler/importers/pytorch_snapshot.h"
#include "profiler/store/trace_reader.h"

namespace {

namespace fs = std::filesystem;
namespace im = tidemark::importers;
namespace st = tidemark::store;
namespace ev = tidemark::events;
using im::pickle::PickleWriter;

const fs::path kData = fs::path(__FILE__).parent_path() / "data";
const fs::path kSnapshot = fs::path(TIDEMARK_TEST_DATA) / "pytorch/snapshot_small_gpu.pickle";

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("tidemark-import-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

struct Final {
  int64_t allocated = 0, active = 0, reserved = 0, requested = 0;
};

// The curves' values after the last memory event (level 0 of the LOD pyramid).
Final final_values(const st::TraceReader& r, int64_t device) {
  auto rows = r.lod(device, 0, 0, UINT64_MAX);
  if (rows.empty()) return {};
  const st::LodRow& last = rows.back();
  return {last.allocated, last.active, last.reserved, last.requested};
}

int64_t device_row(const st::TraceReader& r, int index) {
  auto id = r.device_row_id({ev::DeviceType::cuda, static_cast<int8_t>(index)});
  EXPECT_TRUE(id) << "no cuda:" << index;
  return id.value_or(-1);
}

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
    EXPECT_EQ(allocs.size(), d["actions"]["alloc"].get<size_t>() + d["initial_blocks"].get<size_t>());
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
  EXPECT_EQ(r.meta_value("last_ts_ns"), std::to_string(expected["devices"][0]["last_time_ns"].get<uint64_t>()));

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
  EXPECT_EQ(synthetic, d0["initial_blocks"].get<uint64_t>() + d0["initial_segments"].get<uint64_t>());

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

// ---- Snapshots built here ----------------------------------------------------------------------

struct Frame {
  std::string name, file;
  int line = 0;
};
struct Blk {
  uint64_t addr = 0, size = 0, requested = 0;
  std::string state = "active_allocated";
  std::vector<Frame> frames;
};
struct Seg {
  int device = 0;
  uint64_t addr = 0, total = 0, stream = 0;
  std::string type = "large";
  bool expandable = false;
  std::vector<Blk> blocks;
};
struct Ent {
  std::string action;
  uint64_t addr = 0, size = 0;
  int64_t time_us = 0;
  uint64_t stream = 0;
  std::vector<Frame> frames;
  std::optional<uint64_t> device_free;
};

class SnapshotBuilder {
 public:
  explicit SnapshotBuilder(int protocol = 4) : w_(protocol) {}

  std::string build(const std::vector<Seg>& segs, const std::vector<std::vector<Ent>>& traces) {
    w_.empty_dict();
    w_.memoize();
    w_.mark();
    w_.str("segments");
    w_.empty_list();
    w_.memoize();
    w_.mark();
    for (const Seg& s : segs) segment(s);
    w_.appends();
    w_.str("device_traces");
    w_.empty_list();
    w_.memoize();
    w_.mark();
    for (const auto& t : traces) {
      w_.empty_list();
      w_.memoize();
      if (!t.empty()) {
        w_.mark();
        for (const Ent& e : t) entry(e);
        w_.appends();
      }
    }
    w_.appends();
    w_.str("allocator_settings");
    w_.empty_dict().mark().str("expandable_segments").boolean(false).str("max_split_size").integer(-1).setitems();
    w_.setitems();
    return w_.finish();
  }

 private:
  // Keys are memoized once and fetched again (as Python's pickler does).
  void key(const std::string& k) {
    auto it = keys_.find(k);
    if (it != keys_.end()) {
      w_.get(it->second);
      return;
    }
    w_.str(k);
    keys_[k] = w_.memoize();
  }
  void frames(const std::vector<Frame>& fs) {
    key("frames");
    w_.empty_list();
    w_.memoize();
    if (fs.empty()) return;
    w_.mark();
    for (const Frame& f : fs) {
      std::string id = f.name + "\n" + f.file + "\n" + std::to_string(f.line);
      auto it = frames_.find(id);
      if (it != frames_.end()) {
        w_.get(it->second);
        continue;
      }
      w_.empty_dict();
      uint32_t m = w_.memoize();
      w_.mark();
      key("name");
    w_.str(f.name);
      key("filename");
    w_.str(f.file);
      key("line");
    w_.integer(f.line);
      w_.setitems();
      frames_[id] = m;
    }
    w_.appends();
  }
  void segment(const Seg& s) {
    w_.empty_dict();
    w_.memoize();
    w_.mark();
    key("device");
    w_.integer(s.device);
    key("address");
    w_.integer(static_cast<int64_t>(s.addr));
    key("total_size");
    w_.integer(static_cast<int64_t>(s.total));
    key("stream");
    w_.integer(static_cast<int64_t>(s.stream));
    key("segment_type");
    w_.str(s.type);
    key("segment_pool_id");
    w_.integer(0).integer(0).tuple_n(2);
    key("is_expandable");
    w_.boolean(s.expandable);
    frames({});
    key("blocks");
    w_.empty_list();
    w_.memoize();
    if (!s.blocks.empty()) {
      w_.mark();
      for (const Blk& b : s.blocks) {
        w_.empty_dict();
        w_.memoize();
        w_.mark();
        key("address");
    w_.integer(static_cast<int64_t>(b.addr));
        key("size");
    w_.integer(static_cast<int64_t>(b.size));
        key("requested_size");
    w_.integer(static_cast<int64_t>(b.requested));
        key("state");
    w_.str(b.state);
        frames(b.frames);
        w_.setitems();
      }
      w_.appends();
    }
    w_.setitems();
  }
  void entry(const Ent& e) {
    w_.empty_dict();
    w_.memoize();
    w_.mark();
    key("action");
    w_.str(e.action);
    if (e.device_free) {
      key("device_free");
    w_.integer(static_cast<int64_t>(*e.device_free));
    } else {
      key("addr");
    w_.integer(static_cast<int64_t>(e.addr));
    }
    key("size");
    w_.integer(static_cast<int64_t>(e.size));
    key("stream");
    w_.integer(static_cast<int64_t>(e.stream));
    key("time_us");
    w_.integer(e.time_us);
    frames(e.frames);
    w_.setitems();
  }

  PickleWriter w_;
  std::map<std::string, uint32_t> keys_, frames_;
};

constexpr uint64_t MiB = 1 << 20;

std::string write(const TempDir& dir, const std::string& name, const std::string& bytes) {
  std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// History that started late: blocks and segments that existed before the trace.
TEST(PytorchSnapshot, RebuildsTheStateBeforeTheTrace) {
  const uint64_t S1 = 0x10000000, S2 = 0x20000000, S3 = 0x30000000;
  const uint64_t B1 = S1, B2 = S1 + MiB, B3 = S1 + 3 * MiB, B4 = S2, B5 = S1 + 8 * MiB;
  std::vector<Frame> stack = {{"inner", "a.cpp", 10}, {"??", "??", 0}, {"outer", "train.py", 7}};
  std::vector<Seg> segs = {
      {0, S1, 20 * MiB, 0, "large", false,
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
      for (const auto& fr : r.frames(ip)) names.push_back(fr.function + "@" + fr.file + ":" + std::to_string(fr.line));
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
      {0, E, 40 * MiB, 0, "large", true, {{E + 20 * MiB, 8 * MiB, 8 * MiB, "active_allocated", {}}}},
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
  st::TraceReader r = st::TraceReader::open(dir.file("old.db"), st::TraceReader::Require::finalized);
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
  st::TraceReader r = st::TraceReader::open(dir.file("empty.db"), st::TraceReader::Require::finalized);
  EXPECT_TRUE(r.devices().empty());
}

// Every action, in a snapshot Python's own pickler wrote (make_reference_pickles.py).
TEST(PytorchSnapshot, EveryActionFromPython) {
  TempDir dir;
  std::string out = dir.file("every.db");
  im::ImportStats stats = im::import_pytorch_snapshot((kData / "snapshot_every_action.pkl").string(), out);
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
      for (const auto& f : r.frames(ip)) frames += f.function + "@" + f.file + ":" + std::to_string(f.line);
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

// ---- Bad input --------------------------------------------------------------------------------

std::string import_error(const std::string& in, const std::string& out) {
  try {
    im::import_pytorch_snapshot(in, out);
  } catch (const im::ImportError& e) {
    EXPECT_FALSE(fs::exists(out)) << "partial output left: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "imported " << in;
  return "";
}

TEST(PytorchSnapshotErrors, FilesThatAreNotSnapshots) {
  TempDir dir;
  std::string out = dir.file("out.db");
  std::string missing = dir.file("missing.pickle");
  EXPECT_EQ(import_error(missing, out), missing + ": cannot open: no such file");
  std::string empty = write(dir, "empty", "");
  EXPECT_EQ(import_error(empty, out), empty + ": not a pickle: the file is empty");
  std::string sqlite = write(dir, "x.db", std::string("SQLite format 3\0", 16) + std::string(100, '\0'));
  EXPECT_NE(import_error(sqlite, out).find("already a trace?"), std::string::npos);
  std::string text = write(dir, "t.txt", "hello");
  EXPECT_NE(import_error(text, out).find(text + ": not a pickle of protocol 2 to 5"), std::string::npos);
  PickleWriter w(4);
  std::string number = write(dir, "n.pickle", w.integer(3).finish());
  EXPECT_EQ(import_error(number, out), number +
                                           ": not a PyTorch memory snapshot: the pickle holds int 3, expected "
                                           "a dict with 'segments' and 'device_traces'");
  PickleWriter w2(4);
  std::string nosegs = write(dir, "d.pickle", w2.empty_dict().finish());
  EXPECT_EQ(import_error(nosegs, out), nosegs + ": not a PyTorch memory snapshot: snapshot: no 'segments' field");
  EXPECT_NE(import_error(dir.file(""), out).find("is a directory"), std::string::npos);
}

// Note [Lenient fields]: what describes (segment types, block states, frames) never refuses a
// file; odd values are read as unknown and counted.
TEST(PytorchSnapshot, OddDescriptiveFieldsAreCountedNotFatal) {
  TempDir dir;
  std::vector<Seg> segs = {{0, 0x1000, 2 * MiB, 0, "medium", false, {{0x1000, 512, 512, "zombie", {}},
                                                                       {0x1200, 1024, 1000, "active_allocated", {}}}}};
  std::string in = write(dir, "odd.pickle", SnapshotBuilder().build(segs, {}));
  im::ImportStats stats = im::import_pytorch_snapshot(in, dir.file("odd.db"));
  EXPECT_EQ(stats.notes, (std::vector<std::string>{
                             "1 segments of an unknown 'segment_type' (pool taken from the size)",
                             "1 blocks of an unknown 'state' (read as inactive)"}));
  st::TraceReader r = st::TraceReader::open(dir.file("odd.db"), st::TraceReader::Require::finalized);
  EXPECT_EQ(final_values(r, device_row(r, 0)).allocated, 1024);  // the zombie is not allocated
  EXPECT_EQ(r.segments_where("", {}).at(0).pool, ev::Pool::small);  // 2 MiB: the small pool's size

  // Frames: one not a dict, one with a float line and a name that is a list, one with a None line.
  PickleWriter w(4);
  w.empty_dict().mark().str("segments").empty_list().str("device_traces").empty_list().mark();
  w.empty_list().mark().empty_dict().mark();
  w.str("action").str("alloc").str("addr").integer(4096).str("size").integer(512).str("time_us").integer(1);
  w.str("frames").empty_list().mark().str("not a frame");
  w.empty_dict().mark().str("name").empty_list().str("filename").str("a.py").str("line").floating(1.8446744073709552e19).setitems();
  w.empty_dict().mark().str("name").str("f").str("filename").str("b.py").str("line").none().setitems();
  w.appends().setitems().appends().appends().setitems();
  std::string fr = write(dir, "frames.pickle", w.finish());
  stats = im::import_pytorch_snapshot(fr, dir.file("frames.db"));
  EXPECT_EQ(stats.notes, (std::vector<std::string>{"1 frames whose 'name' is not a str (read as unknown)",
                                                   "1 frames whose 'line' is not a line number (read as unknown)",
                                                   "1 frames that are not dicts (read as unknown)"}));
  st::TraceReader fr_r = st::TraceReader::open(dir.file("frames.db"), st::TraceReader::Require::finalized);
  auto allocs = fr_r.allocations(device_row(fr_r, 0));
  ASSERT_EQ(allocs.size(), 1u);
  std::vector<uint64_t> ips = fr_r.stack(allocs[0].stack_id);
  ASSERT_EQ(ips.size(), 3u);  // innermost first: the unknown frame, a.py, b.py
  EXPECT_EQ(fr_r.frames(ips[1])[0].file, "a.py");
  EXPECT_EQ(fr_r.frames(ips[1])[0].line, 0);
  EXPECT_EQ(fr_r.frames(ips[1])[0].function, "");
  EXPECT_EQ(fr_r.frames(ips[2])[0].function, "f");
}

TEST(PytorchSnapshotErrors, BadFieldsNameTheEntry) {
  TempDir dir;
  std::string out = dir.file("out.db");
  std::vector<Seg> bad_dev = {{200, 0x1000, 2 * MiB, 0, "small", false, {}}};
  std::string dev_path = write(dir, "dev.pickle", SnapshotBuilder().build(bad_dev, {}));
  EXPECT_NE(import_error(dev_path, out).find("segments[0]: device index 200 is out of range"), std::string::npos);
  // A trace for device 128.
  std::vector<std::vector<Ent>> many(129);
  many[128] = {{"alloc", 0x1000, 512, 5, 0, {}}};
  std::string many_path = write(dir, "many.pickle", SnapshotBuilder().build({}, many));
  EXPECT_NE(import_error(many_path, out).find("device_traces[128]: device index 128 is out of range"),
            std::string::npos);
  // A missing field.
  PickleWriter m(4);
  m.empty_dict().mark().str("segments").empty_list().str("device_traces").empty_list().mark();
  m.empty_list().mark().empty_dict().mark();
  m.str("action").str("free_requested").str("size").integer(512).str("time_us").integer(1);
  m.setitems().appends().appends().setitems();
  std::string miss = write(dir, "miss.pickle", m.finish());
  EXPECT_EQ(import_error(miss, out), miss + ": not a PyTorch memory snapshot: device_traces[0][0]: no 'addr' field");
}

TEST(PytorchSnapshotErrors, HostilePickles) {
  TempDir dir;
  std::string out = dir.file("out.db");
  std::vector<std::vector<Ent>> traces = {{{"alloc", 0x1000, 512, 5, 0, {{"f", "g.py", 1}}},
                                           {"free_requested", 0x1000, 512, 6, 0, {{"f", "g.py", 1}}}}};
  std::string good = SnapshotBuilder().build({}, traces);
  // Every truncation fails cleanly and leaves no output.
  for (size_t n = 1; n < good.size(); n += 7) {
    std::string path = write(dir, "cut.pickle", good.substr(0, n));
    std::string msg = import_error(path, out);
    ASSERT_NE(msg.find(path + ": pickle: offset "), std::string::npos) << msg;
  }
  // A pre-existing output file is left alone when the input is refused before writing.
  std::ofstream(out) << "keep";
  try {
    im::import_pytorch_snapshot(write(dir, "cut.pickle", good.substr(0, 10)), out);
  } catch (const im::ImportError&) {
  }
  EXPECT_TRUE(fs::exists(out));
}

// Issue-level hostile input: a device file is refused at once, absurd sizes name the field, and
// a small pickle whose memo shares one trace among many devices cannot expand without bound.
TEST(PytorchSnapshotErrors, NotARegularFile) {
  TempDir dir;
  std::string out = dir.file("out.db");
  EXPECT_EQ(import_error("/dev/zero", out),
            "/dev/zero: cannot read: not a regular file (a device, pipe or socket); save the snapshot to a file first");
  // A large file of another kind is refused on its first byte, before it is read.
  std::string big = dir.file("big.bin");
  {
    std::ofstream f(big, std::ios::binary);
    f << "x";
  }
  fs::resize_file(big, uint64_t{4} << 30);  // 4 GiB, sparse
  EXPECT_NE(import_error(big, out).find(big + ": not a pickle of protocol 2 to 5"), std::string::npos);
}

TEST(PytorchSnapshotErrors, SizesOutOfRangeNameTheField) {
  TempDir dir;
  std::string out = dir.file("out.db");
  std::vector<std::vector<Ent>> traces = {{{"alloc", 0x1000, uint64_t{INT64_MAX}, 5, 0, {}}}};
  std::string huge = write(dir, "huge.pickle", SnapshotBuilder().build({}, traces));
  EXPECT_EQ(import_error(huge, out),
            huge + ": not a PyTorch memory snapshot: device_traces[0][0]: 'size' 9223372036854775807 is out of "
                   "range (more than 2^56)");
  PickleWriter w(4);  // a segment whose total_size is -17
  w.empty_dict().mark().str("segments").empty_list().mark().empty_dict().mark();
  w.str("device").integer(0).str("address").integer(4096).str("total_size").integer(-17).str("blocks").empty_list();
  w.setitems().appends().setitems();
  std::string negative = write(dir, "neg.pickle", w.finish());
  EXPECT_EQ(import_error(negative, out),
            negative + ": not a PyTorch memory snapshot: segments[0]: 'total_size' is negative (-17)");
}

TEST(PytorchSnapshotErrors, MemoSharedTracesCannotExpandWithoutBound) {
  TempDir dir;
  std::string out = dir.file("out.db");
  // One trace of 20,000 entries (each the same memoized dict), named by 100 devices: 2 million
  // entries from a pickle of about 40 KB.
  PickleWriter w(4);
  w.empty_dict().mark().str("segments").empty_list().str("device_traces").empty_list().mark();
  w.empty_list();
  uint32_t list = w.memoize();
  w.mark();
  w.empty_dict().mark().str("action").str("snapshot").str("size").integer(0).str("time_us").integer(1).setitems();
  uint32_t entry = w.memoize();
  for (int i = 1; i < 20000; ++i) w.get(entry);
  w.appends();
  for (int d = 1; d < 100; ++d) w.get(list);
  w.appends().setitems();
  std::string bomb = write(dir, "bomb.pickle", w.finish());
  std::string msg = import_error(bomb, out);
  EXPECT_NE(msg.find(bomb + ": device_traces[50]: the snapshot expands to more than 1000000 trace entries"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("--max-events raises the limit"), std::string::npos);
  // A caller who means it raises the limit.
  im::ImportOptions o;
  o.max_events = 3'000'000;
  EXPECT_EQ(im::import_pytorch_snapshot(bomb, out, o).devices, 100);
}

// Trace entries are read as the pickle is parsed and released with their frames lists (docs/
// importers.md, "Reading while parsing"); an entry that does not read cleanly stays for the
// reader. A frames list a block in `segments` shares with a released entry keeps its frames.
TEST(PytorchSnapshot, EntriesReadWhileParsingKeepSharedFrames) {
  TempDir dir;
  PickleWriter w(4);
  w.empty_dict().mark().str("segments").empty_list().mark();
  w.empty_dict().mark().str("device").integer(0).str("address").integer(0x1000).str("total_size")
      .integer(2 * MiB).str("stream").integer(0).str("segment_type").str("small").str("blocks").empty_list().mark();
  w.empty_dict().mark().str("address").integer(0x1200).str("size").integer(512).str("requested_size")
      .integer(512).str("state").str("active_allocated").str("frames").empty_list().mark();
  w.empty_dict().mark().str("name").str("f").str("filename").str("a.py").str("line").integer(3).setitems();
  w.appends();
  const uint32_t shared = w.memoize();
  w.setitems().appends().setitems().appends();
  w.str("device_traces").empty_list().mark().empty_list().mark();
  w.empty_dict().mark().str("action").str("alloc").str("addr").integer(0x1000).str("size").integer(500)
      .str("time_us").integer(10).str("frames").get(shared).setitems();
  w.empty_dict().mark().str("action").str("weird").str("time_us").integer(11).setitems();
  w.empty_dict().mark().str("action").str("alloc").str("addr").integer(0x1400).str("size").integer(100)
      .str("time_us").integer(12).str("frames").get(shared).setitems();
  w.appends().appends().setitems();
  std::string in = write(dir, "shared.pickle", w.finish());
  im::ImportStats stats = im::import_pytorch_snapshot(in, dir.file("shared.db"));
  EXPECT_EQ(stats.notes, (std::vector<std::string>{
                             "1 entries of an action the importer does not know, such as 'weird' (skipped)"}));
  st::TraceReader r = st::TraceReader::open(dir.file("shared.db"), st::TraceReader::Require::finalized);
  std::vector<std::string> allocs;
  for (const auto& a : r.allocations(device_row(r, 0))) {
    std::string frames;
    for (uint64_t ip : r.stack(a.stack_id))
      for (const auto& f : r.frames(ip)) frames += f.function + "@" + f.file + ":" + std::to_string(f.line);
    allocs.push_back(std::to_string(a.addr) + " " + std::to_string(a.size) + " " + frames);
  }
  std::sort(allocs.begin(), allocs.end());
  EXPECT_EQ(allocs, (std::vector<std::string>{"4096 512 f@a.py:3", "4608 512 f@a.py:3", "5120 512 f@a.py:3"}));
}

// PyTorch before 2.1 wrote no times: entries are ordered, times synthetic, and said so.
TEST(PytorchSnapshot, NoTimesMeansEntryOrder) {
  TempDir dir;
  PickleWriter w(4);
  w.empty_dict().mark().str("segments").empty_list().str("device_traces").empty_list().mark();
  w.empty_list().mark();
  for (uint64_t a : {0x1000, 0x2000})
    w.empty_dict().mark().str("action").str("alloc").str("addr").integer(static_cast<int64_t>(a))
        .str("size").integer(512).setitems();
  w.empty_dict().mark().str("action").str("free_requested").str("addr").integer(0x1000).str("size").integer(512).setitems();
  w.appends().appends().setitems();
  std::string in = write(dir, "old.pickle", w.finish());
  im::ImportStats stats = im::import_pytorch_snapshot(in, dir.file("old.db"));
  EXPECT_TRUE(stats.synthetic_times);
  st::TraceReader r = st::TraceReader::open(dir.file("old.db"), st::TraceReader::Require::finalized);
  EXPECT_TRUE(r.meta().synthetic_times);
  EXPECT_EQ(r.meta().start_unix_ns, 0);
  std::vector<uint64_t> times;
  r.for_each_event([&](const ev::Event& e, uint64_t) {
    if (e.kind == ev::Kind::alloc || e.kind == ev::Kind::free_requested) times.push_back(e.ts_ns);
  });
  EXPECT_EQ(times, (std::vector<uint64_t>{0, 1000, 2000}));  // entry i at i microseconds
}

}  // namespace
