// A PyTorch snapshot imported onto an injected trace of the same run (Note [Snapshot line-up]):
// a real snapshot (tests/data/pytorch), and a trace built here as libtidemark_inject.so would
// record that run (PyTorch's segments as cudaMalloc records on the recording's own clock, a sync,
// an NVTX range), with a clock that disagrees with the recording's meta by a few milliseconds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "profiler/importers/lineup.h"
#include "profiler/store/trace_reader.h"
#include "profiler/store/trace_writer.h"

namespace {

namespace fs = std::filesystem;
namespace im = tidemark::importers;
namespace st = tidemark::store;
namespace ev = tidemark::events;

const fs::path kSnapshot = fs::path(TIDEMARK_TEST_DATA) / "pytorch/snapshot_small_gpu.pickle";

std::vector<std::vector<int64_t>> query(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::vector<std::vector<int64_t>> out;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "cannot open " << path;
    sqlite3_close(db);
    return out;
  }
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
  } else {
    while (sqlite3_step(s) == SQLITE_ROW) {
      std::vector<int64_t> row;
      for (int i = 0; i < sqlite3_column_count(s); ++i)
        row.push_back(sqlite3_column_type(s, i) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, i));
      out.push_back(row);
    }
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return out;
}

int64_t one(const std::string& path, const std::string& sql) {
  auto rows = query(path, sql);
  return rows.empty() || rows[0].empty() ? -2 : rows[0][0];
}

// Changes (level 0 of the memory curves) after which a device has more allocated than
// reserved, over every device.
int64_t allocated_over_reserved(const std::string& path) {
  const auto r = st::TraceReader::open(path, st::TraceReader::Require::finalized);
  int64_t n = 0;
  for (const st::DeviceRow& d : r.devices())
    r.for_each_lod(d.id, 0, 0, INT64_MAX, [&](const st::LodRow& row) {
      n += row.allocated > row.reserved;
      return true;
    });
  return n;
}

class Files {
 public:
  Files() : dir_(fs::temp_directory_path() / ("tidemark-lineup-" + std::to_string(getpid()))) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~Files() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string operator()(const std::string& name) const { return (dir_ / name).string(); }

 private:
  fs::path dir_;
};

constexpr int64_t kMs = 1'000'000;
// Allocations not covered by segments (whole ones, or mapped ranges of an expandable one) live
// from their allocation to their free.
constexpr const char* kLiveSegmentAt =
    "SELECT count(*) FROM allocations a WHERE (SELECT ifnull(sum(min(s.addr + s.size, a.addr + "
    "a.size) - max(s.addr, a.addr)), 0) FROM segments s WHERE s.device = a.device AND s.addr < "
    "a.addr + a.size AND s.addr + s.size > a.addr AND s.alloc_ts <= a.alloc_ts AND (s.free_ts IS "
    "NULL OR s.free_ts >= ifnull(a.free_requested_ts, a.alloc_ts))) < a.size";

TEST(ImportLineup, SnapshotBlocksSitInsideRecordedSegments) {
  Files f;
  // The snapshot alone: its segments are what the recording must have seen.
  im::import_pytorch_snapshot(kSnapshot.string(), f("alone.db"));
  const auto alone = st::TraceReader::open(f("alone.db"), st::TraceReader::Require::finalized);
  const int64_t t0_unix = alone.meta().start_unix_ns;
  const auto segments = query(f("alone.db"),
                              "SELECT d.idx, s.kind = 'mapped', s.addr, s.size, s.alloc_ts, "
                              "ifnull(s.free_ts, -1) FROM segments s JOIN devices d "
                              "ON d.id = s.device ORDER BY s.alloc_ts, s.seq");
  ASSERT_FALSE(segments.empty());

  // The recording: started 5 s before the snapshot's history on a steady clock at 10^12 ns;
  // its meta maps that clock to Unix time 3 ms off the truth; PyTorch writes its segment_alloc
  // entry 40 us after the cudaMalloc record.
  const int64_t rec_start_unix = t0_unix - 5000 * kMs;
  const uint64_t rec_start_ts = 1'000'000'000'000;
  const int64_t truth = static_cast<int64_t>(rec_start_ts) - rec_start_unix + 3 * kMs;
  auto steady = [&](int64_t unix_ns) { return static_cast<uint64_t>(unix_ns + truth); };
  struct Rec {
    ev::Event e;
    uint64_t stack;
  };
  std::vector<Rec> recorded;
  for (const auto& s : segments) {
    ev::Event e;
    e.kind = s[1] ? ev::Kind::segment_map : ev::Kind::segment_alloc;
    e.device = {ev::DeviceType::cuda, static_cast<int8_t>(s[0])};
    e.block.addr = static_cast<uint64_t>(s[2]);
    e.block.size = static_cast<uint64_t>(s[3]);
    e.block.segment = e.block.addr;
    e.block.pool = ev::Pool::large;
    // Segments from before the history: allocated a second before it started.
    e.ts_ns = s[4] == t0_unix ? steady(t0_unix - 1000 * kMs) : steady(s[4] - 40'000);
    recorded.push_back({e, 1});
    if (s[5] >= 0) {
      e.kind = s[1] ? ev::Kind::segment_unmap : ev::Kind::segment_free;
      e.ts_ns = steady(s[5] + 10'000);
      recorded.push_back({e, 0});
    }
  }
  ev::Event sync;
  sync.kind = ev::Kind::sync;
  sync.device = {ev::DeviceType::cuda, 0};
  sync.sync.kind = ev::SyncKind::copy_to_host;
  sync.sync.duration_ns = 1000;
  sync.ts_ns = steady(t0_unix + 1 * kMs);
  recorded.push_back({sync, 1});
  ev::Event scope;
  scope.kind = ev::Kind::scope_push;
  scope.name = {};
  scope.name.name = "train";
  scope.ts_ns = steady(t0_unix - 2000 * kMs);
  recorded.push_back({scope, 0});
  std::stable_sort(recorded.begin(), recorded.end(),
                   [](const Rec& a, const Rec& b) { return a.e.ts_ns < b.e.ts_ns; });

  st::TraceMeta meta;
  meta.command_line = "python train.py";
  meta.start_unix_ns = rec_start_unix;
  meta.start_ts_ns = rec_start_ts;
  meta.devices.push_back({ev::DeviceId{ev::DeviceType::cpu, 0}, "cpu", 0});
  meta.devices.push_back({ev::DeviceId{ev::DeviceType::cuda, 0}, "cuda:0", 0});
  meta.stack_depth = 1;
  {
    auto w = st::TraceWriter::create(f("recorded.db"), meta);
    w->add_stack_node(1, 0, 0x401000);
    uint64_t seq = 0;
    for (Rec& r : recorded) {
      r.e.seq = ++seq;
      r.e.thread_id = 1;
      w->append(r.e, r.stack);
    }
    w->close(recorded.back().e.ts_ns);
  }
  st::finalize(f("recorded.db"));

  const im::LineupStats stats =
      im::import_pytorch_snapshot_onto(kSnapshot.string(), f("recorded.db"), f("merged.db"));
  const std::string merged = f("merged.db");

  // Every snapshot segment matched a recorded one, and the clock was corrected.
  EXPECT_GT(stats.snapshot_segments, 0u);
  EXPECT_EQ(stats.matched_segments, stats.snapshot_segments);
  EXPECT_EQ(stats.clock_offset_ns, truth - 40'000);
  EXPECT_EQ(stats.recorded_events, recorded.size());
  // Reserved memory counted once: the recorded segments only, with the recording's thread and
  // stack (1, of every recorded segment_alloc / segment_map).
  EXPECT_EQ(one(merged, "SELECT count(*) FROM segments"), static_cast<int64_t>(segments.size()));
  EXPECT_EQ(one(merged, "SELECT count(*) FROM segments WHERE thread = 1 AND stack = 1"),
            static_cast<int64_t>(segments.size()));
  // All the snapshot's blocks, each inside a recorded segment live at the time.
  EXPECT_EQ(one(merged, "SELECT count(*) FROM allocations"),
            one(f("alone.db"), "SELECT count(*) FROM allocations"));
  EXPECT_EQ(one(merged, kLiveSegmentAt), 0);
  // Allocated never exceeds reserved, and the allocated peak is the snapshot's.
  EXPECT_EQ(allocated_over_reserved(merged), 0);
  const auto m = st::TraceReader::open(merged, st::TraceReader::Require::finalized);
  const auto cuda0 = m.device_row_id({ev::DeviceType::cuda, 0});
  const auto alone0 = alone.device_row_id({ev::DeviceType::cuda, 0});
  ASSERT_TRUE(cuda0 && alone0);
  EXPECT_EQ(m.peak(*cuda0, st::Curve::allocated)->bytes,
            alone.peak(*alone0, st::Curve::allocated)->bytes);
  // The recording's own events are there, on its clock; allocations fall in its NVTX range.
  EXPECT_EQ(one(merged, "SELECT ts FROM syncs WHERE kind = 'copy_to_host'"),
            static_cast<int64_t>(steady(t0_unix + 1 * kMs)));
  EXPECT_EQ(one(merged, "SELECT count(*) FROM allocations WHERE scope IS NULL"), 0);
  // The snapshot's Python frames resolve in the merged trace.
  EXPECT_GT(one(merged, "SELECT count(*) FROM frames WHERE file LIKE '%.py'"), 0);
}

// Expandable segments: PyTorch writes one segment_map entry per range it maps, the recording
// has one cuMemMap per 2 MiB granule; covered ranges match, and only the unrecorded device's
// segments come from the snapshot.
TEST(ImportLineup, MappedRangesMatchWhenRecordedMappingsCoverThem) {
  const fs::path every = fs::path(__FILE__).parent_path() / "data/snapshot_every_action.pkl";
  Files f;
  im::import_pytorch_snapshot(every.string(), f("alone.db"));
  constexpr uint64_t kBase = uint64_t{1} << 30;
  st::TraceMeta meta;
  meta.start_unix_ns = 0;
  meta.start_ts_ns = 0;
  meta.devices.push_back({ev::DeviceId{ev::DeviceType::cuda, 0}, "cuda:0", 0});
  uint64_t recorded = 0;
  {
    auto w = st::TraceWriter::create(f("recorded.db"), meta);
    uint64_t seq = 0;
    for (uint64_t off = 0; off < (60u << 20); off += 2u << 20) {
      ev::Event e;
      e.kind = ev::Kind::segment_map;
      e.device = {ev::DeviceType::cuda, 0};
      e.block.addr = kBase + off;
      e.block.size = 2u << 20;
      e.block.segment = kBase;
      e.block.pool = ev::Pool::large;
      e.ts_ns = 1000 + off / 1024;  // before the history's first entry (10 us)
      e.seq = ++seq;
      e.thread_id = 1;
      w->append(e, 0);
      ++recorded;
    }
    w->close(1'000'000);
  }
  st::finalize(f("recorded.db"));
  const im::LineupStats stats =
      im::import_pytorch_snapshot_onto(every.string(), f("recorded.db"), f("merged.db"));
  const std::string merged = f("merged.db");
  auto segments_on = [&](const std::string& path, int idx) {
    return one(path,
               "SELECT count(*) FROM segments s JOIN devices d ON d.id = s.device "
               "WHERE d.type = 'cuda' AND d.idx = " +
                   std::to_string(idx));
  };
  EXPECT_EQ(segments_on(merged, 0), static_cast<int64_t>(recorded));
  EXPECT_EQ(segments_on(merged, 1), segments_on(f("alone.db"), 1));
  EXPECT_EQ(stats.snapshot_segments - stats.matched_segments,
            static_cast<uint64_t>(segments_on(f("alone.db"), 1)));
  EXPECT_EQ(allocated_over_reserved(merged), 0);
  EXPECT_EQ(one(merged, kLiveSegmentAt), 0);
}

TEST(ImportLineup, RefusesToOverwriteTheRecording) {
  Files f;
  im::import_pytorch_snapshot(kSnapshot.string(), f("a.db"));
  try {
    im::import_pytorch_snapshot_onto(kSnapshot.string(), f("a.db"), f("a.db"));
    ADD_FAILURE() << "writing the merged trace over the recording must be refused";
  } catch (const im::ImportError& e) {
    EXPECT_NE(std::string(e.what()).find("is the recorded trace itself"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(fs::exists(f("a.db")));
  // Nor onto an imported snapshot (its blocks would be counted twice); an existing output file
  // is left alone when nothing was written.
  std::ofstream(f("out.db")) << "kept";
  try {
    im::import_pytorch_snapshot_onto(kSnapshot.string(), f("a.db"), f("out.db"));
    ADD_FAILURE() << "no error";
  } catch (const im::ImportError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("is an imported snapshot, not a recording"));
  }
  EXPECT_TRUE(fs::exists(f("out.db")));
}

}  // namespace
