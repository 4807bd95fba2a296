// TraceReader::open refuses what is not a trace it can read, with a message naming the file
// and what was expected and seen.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "profiler/store/trace_reader.h"
#include "profiler/store/trace_writer.h"
#include "schema_v1_trace.h"
#include "schema_v6_trace.h"

namespace {

namespace ev = tidemark::events;
namespace st = tidemark::store;

std::string temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path();
  return (dir / ("tidemark_" + name + "_" + std::to_string(::getpid()) + ".db")).string();
}

void remove_trace(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

std::string open_error(const std::string& path,
                       st::TraceReader::Require require = st::TraceReader::Require::raw) {
  try {
    st::TraceReader::open(path, require);
  } catch (const st::StoreError& e) {
    return e.what();
  }
  return "(no error)";
}

// The rows of `query`, columns joined by '|', NULL as "NULL".
std::vector<std::string> rows(const std::string& path, const char* query) {
  std::vector<std::string> out;
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, query, -1, &st, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << query << ": " << sqlite3_errmsg(db);
  } else {
    while (sqlite3_step(st) == SQLITE_ROW) {
      std::string row;
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        if (c) row += '|';
        const auto* text = sqlite3_column_text(st, c);
        row += text ? reinterpret_cast<const char*>(text) : "NULL";
      }
      out.push_back(row);
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

void sql(const std::string& path, const char* statements) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, statements, nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
}

TEST(StoreReader, RefusesAMissingFile) {
  std::string path = temp_path("missing");
  remove_trace(path);
  EXPECT_EQ(open_error(path), path + ": cannot open: no such file");
}

TEST(StoreReader, RefusesATextFile) {
  std::string path = temp_path("text");
  std::ofstream(path) << "this is not a database, just some text that is long enough to be a "
                         "header of a hundred bytes or so, which SQLite reads first...........\n";
  EXPECT_EQ(open_error(path), path + ": not a Tidemark trace: not a SQLite database");
  remove_trace(path);
}

TEST(StoreReader, RefusesAnotherApplicationsSqliteFile) {
  std::string path = temp_path("foreign");
  remove_trace(path);
  sql(path, "PRAGMA application_id = 1234; CREATE TABLE t (x); INSERT INTO t VALUES (1);");
  EXPECT_EQ(open_error(path), path +
                                  ": not a Tidemark trace: SQLite application_id is 0x000004d2, "
                                  "expected 0x54444d4b (\"TDMK\")");
  remove_trace(path);
}

TEST(StoreReader, RefusesNewerAndOlderSchemaVersions) {
  static_assert(st::kSchemaVersion == 7, "update the messages below");
  std::string path = temp_path("version");
  st::TraceWriter::create(path, {})->close(0);
  sql(path, "PRAGMA user_version = 8");
  EXPECT_EQ(open_error(path), path +
                                  ": trace schema version 8 is newer than this build of Tidemark "
                                  "reads (version 7); use a newer Tidemark");
  EXPECT_THROW(st::finalize(path), st::StoreError);
  sql(path, "PRAGMA user_version = 0");
  EXPECT_EQ(open_error(path), path +
                                  ": trace schema version 0 is older than this build of Tidemark "
                                  "reads (version 7); record it again");
  // Too old to upgrade: finalize() refuses it too.
  EXPECT_EQ(open_error(path, st::TraceReader::Require::upgradable),
            path +
                ": trace schema version 0 is older than this build of Tidemark reads "
                "(version 7); record it again");
  EXPECT_THROW(st::finalize(path), st::StoreError);
  remove_trace(path);
}

// Version 2 added the stack and thread of segments; a version-1 trace (same raw tables) is
// refused with a message naming the upgrade, and finalize() upgrades it in place.
TEST(StoreReader, FinalizeUpgradesASchemaVersion1Trace) {
  std::string path = temp_path("v1");
  {
    auto w = st::TraceWriter::create(path, {});
    w->add_stack_node(1, 0, 0x1000);
    w->add_stack_node(2, 1, 0x2000);
    ev::Event e;
    e.kind = ev::Kind::segment_alloc;
    e.seq = 1;
    e.ts_ns = 100;
    e.thread_id = 3;
    e.block.addr = 0x100000;
    e.block.size = 2 << 20;
    e.block.segment = 0x100000;
    w->append(e, 2);
    e.kind = ev::Kind::segment_map;
    e.seq = 2;
    e.ts_ns = 200;
    e.thread_id = 4;
    e.block.addr = e.block.segment = 0x40000000;
    w->append(e, 1);
    w->close(200);
  }
  st::FinalizeOptions symbols;  // as where it was recorded
  symbols.symbolize = [](uint64_t ip) -> std::vector<st::ResolvedFrame> {
    if (ip == 0x2000) return {{"grow", "a.cpp", 7, false, "/bin/x"}};
    return {};
  };
  st::finalize(path, symbols);
  ASSERT_EQ(tl_test::make_schema_v1(path), "");

  const std::string refused = path +
                              ": trace schema version 1 is older than this build of Tidemark "
                              "reads (version 7); `tidemark finalize " +
                              path + "` upgrades it";
  EXPECT_EQ(open_error(path), refused);
  EXPECT_EQ(open_error(path, st::TraceReader::Require::finalized), refused);
  {
    // Its raw tables read; its derived ones do not.
    auto r = st::TraceReader::open(path, st::TraceReader::Require::upgradable);
    EXPECT_EQ(r.schema_version(), 1);
    EXPECT_EQ(r.events().size(), 2u);
    EXPECT_THROW(r.segments_where("", {}), st::StoreError);
  }

  st::finalize(path);
  EXPECT_EQ(open_error(path, st::TraceReader::Require::finalized), "(no error)");
  auto r = st::TraceReader::open(path, st::TraceReader::Require::finalized);
  EXPECT_EQ(r.schema_version(), st::kSchemaVersion);
  EXPECT_EQ(r.meta_value("schema_version"), std::to_string(st::kSchemaVersion));
  std::vector<st::SegmentRow> segs = r.segments_where("ORDER BY addr", {});
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_EQ(segs[0].addr, 0x100000u);
  EXPECT_FALSE(segs[0].mapped);
  EXPECT_EQ(segs[0].thread, 3u);
  EXPECT_EQ(segs[0].stack_id, 2u);
  EXPECT_EQ(segs[1].addr, 0x40000000u);
  EXPECT_TRUE(segs[1].mapped);
  EXPECT_EQ(segs[1].thread, 4u);
  EXPECT_EQ(segs[1].stack_id, 1u);
  // Finalized here without a symbolizer, the address keeps the frame resolved before.
  ASSERT_EQ(r.frames(0x2000).size(), 1u);
  EXPECT_EQ(r.frames(0x2000)[0].function, "grow");
  EXPECT_EQ(r.frames(0x2000)[0].line, 7);
  remove_trace(path);
}

// Every stored row of the memory curves of a finalized trace, as text.
std::vector<std::string> curves(const std::string& path) {
  auto r = st::TraceReader::open(path, st::TraceReader::Require::finalized);
  std::vector<std::string> out;
  for (const st::DeviceRow& d : r.devices())
    for (const st::LodLevel& l : r.lod_levels(d.id))
      for (const st::LodRow& x : r.lod(d.id, l.level, 0, UINT64_MAX))
        out.push_back(std::to_string(l.level) + " " + std::to_string(x.t) + " " +
                      std::to_string(x.n) + " " + std::to_string(x.allocated) + " " +
                      std::to_string(x.allocated_min) + " " + std::to_string(x.allocated_max));
  return out;
}

// Version 4 stored the memory curves in chunks; a version-3 trace (its memory_lod one row per
// change or bucket) is refused naming the upgrade, and finalize() upgrades it to the same
// curves.
TEST(StoreReader, FinalizeUpgradesASchemaVersion3Trace) {
  std::string path = temp_path("v3");
  {
    auto w = st::TraceWriter::create(path, {});
    ev::Event e;
    uint64_t seq = 0;
    for (int i = 0; i < 3000; ++i) {
      e.kind = i % 3 == 2 ? ev::Kind::free_requested : ev::Kind::alloc;
      e.seq = ++seq;
      e.ts_ns = 1000 + 700 * static_cast<uint64_t>(i);
      e.block.addr = 0x100000 + 0x1000 * static_cast<uint64_t>(i % 3 == 2 ? i - 1 : i);
      e.block.size = e.block.requested_size = 512 * static_cast<uint64_t>(1 + i % 7);
      w->append(e, 0);
    }
    w->close(1000 + 700 * 3000);
  }
  st::finalize(path);
  auto dump = [&] { return curves(path); };
  const std::vector<std::string> before = dump();
  ASSERT_GT(before.size(), 3000u);
  ASSERT_EQ(tl_test::make_schema_v3(path), "");
  EXPECT_EQ(open_error(path, st::TraceReader::Require::finalized),
            path +
                ": trace schema version 3 is older than this build of Tidemark reads "
                "(version 7); `tidemark finalize " +
                path + "` upgrades it");
  st::finalize(path);
  EXPECT_EQ(st::TraceReader::open(path, st::TraceReader::Require::finalized).schema_version(),
            st::kSchemaVersion);
  EXPECT_EQ(dump(), before);
  remove_trace(path);
}

// Version 5 compressed the event blocks (a raw table) and the curve chunks, and keyed tensors
// and storages by their ids; a version-4 trace is refused naming the upgrade, and finalize()
// compresses its blocks in place and rebuilds the rest: the same events, tensors and curves.
TEST(StoreReader, FinalizeUpgradesASchemaVersion4Trace) {
  std::string path = temp_path("v4");
  {
    auto w = st::TraceWriter::create(path, {});
    uint64_t seq = 0;
    for (int i = 0; i < 2000; ++i) {
      ev::Event e;
      e.thread_id = 1;
      e.seq = ++seq;
      e.ts_ns = 1000 + 500 * static_cast<uint64_t>(i);
      if (i % 2) {
        e.kind = ev::Kind::tensor_create;
        e.tensor = ev::TensorInfo{};
        e.tensor.tensor_id = 100 + static_cast<uint64_t>(i);
        e.tensor.storage_id = 7;
        e.tensor.dtype = "float32";
      } else {
        e.kind = ev::Kind::alloc;
        e.block.addr = 0x100000 + 0x1000 * static_cast<uint64_t>(i);
        e.block.size = e.block.requested_size = 512 * static_cast<uint64_t>(1 + i % 5);
      }
      w->append(e, 0);
    }
    w->close(1000 + 500 * 2000);
  }
  st::finalize(path);
  auto dump = [&] {
    std::vector<std::string> out = curves(path);
    st::TraceReader::open(path).for_each_event([&](const ev::Event& x, uint64_t) {
      out.push_back(std::to_string(x.seq) + " " + std::to_string(x.ts_ns) + " " +
                    std::string(ev::kind_name(x.kind)));
    });
    return out;
  };
  const std::vector<std::string> before = dump();
  const std::vector<std::string> tensors = rows(path, "SELECT * FROM tensors ORDER BY tensor_id");
  ASSERT_EQ(tensors.size(), 1000u);
  ASSERT_EQ(tl_test::make_schema_v4(path), "");
  EXPECT_EQ(open_error(path, st::TraceReader::Require::finalized),
            path +
                ": trace schema version 4 is older than this build of Tidemark reads "
                "(version 7); `tidemark finalize " +
                path + "` upgrades it");
  st::finalize(path);
  EXPECT_EQ(st::TraceReader::open(path, st::TraceReader::Require::finalized).schema_version(),
            st::kSchemaVersion);
  EXPECT_EQ(dump(), before);
  EXPECT_EQ(rows(path, "SELECT * FROM tensors ORDER BY tensor_id"), tensors);
  // Every block is a zstd frame again (its magic number, little-endian).
  EXPECT_EQ(rows(path, "SELECT count(*) FROM event_blocks WHERE substr(data, 1, 4) <> x'28b52ffd'"),
            (std::vector<std::string>{"0"}));
  remove_trace(path);
}

// Version 6 gave `devices` the columns `rank` and `rank_idx` (a merged trace's devices) and
// added the derived table `collectives`; a version-5 file has neither: it is refused naming
// the upgrade, its raw tables still read, and finalize() adds them (NULL: a device of no rank).
TEST(StoreReader, FinalizeUpgradesASchemaVersion5Trace) {
  std::string path = temp_path("v5");
  {
    st::TraceMeta meta;
    meta.devices.push_back({ev::DeviceId{ev::DeviceType::cuda, 0}, "cuda:0 (X)", 80});
    auto w = st::TraceWriter::create(path, meta);
    ev::Event e;
    e.kind = ev::Kind::alloc;
    e.seq = 1;
    e.ts_ns = 1000;
    e.device = {ev::DeviceType::cuda, 0};
    e.block.addr = 0x100000;
    e.block.size = e.block.requested_size = 4096;
    w->append(e, 0);
    w->close(2000);
  }
  st::finalize(path);
  ASSERT_EQ(tl_test::make_schema_v6(path), "");
  sql(path,
      "ALTER TABLE devices DROP COLUMN rank; ALTER TABLE devices DROP COLUMN rank_idx; "
      "DROP TABLE collectives; "
      "PRAGMA user_version = 5");
  EXPECT_EQ(open_error(path, st::TraceReader::Require::finalized),
            path +
                ": trace schema version 5 is older than this build of Tidemark reads "
                "(version 7); `tidemark finalize " +
                path + "` upgrades it");
  {
    auto r = st::TraceReader::open(path, st::TraceReader::Require::upgradable);
    ASSERT_EQ(r.devices().size(), 1u);
    EXPECT_FALSE(r.devices()[0].info.rank);
  }
  st::finalize(path);
  auto r = st::TraceReader::open(path, st::TraceReader::Require::finalized);
  EXPECT_EQ(r.schema_version(), st::kSchemaVersion);
  ASSERT_EQ(r.devices().size(), 1u);
  EXPECT_EQ(r.devices()[0].info.name, "cuda:0 (X)");
  EXPECT_FALSE(r.devices()[0].info.rank);
  EXPECT_EQ(r.peak(r.devices()[0].id, st::Curve::allocated)->bytes, 4096);
  EXPECT_EQ(rows(path, "SELECT count(*) FROM collectives"), (std::vector<std::string>{"0"}));
  remove_trace(path);
}

// Version 7 sealed every event block with its row in a checksummed frame, and checksummed the
// curve chunks; a version-6 file has neither: it is refused naming the upgrade, its raw events
// still read, and finalize() seals its blocks to the same events.
TEST(StoreReader, FinalizeUpgradesASchemaVersion6Trace) {
  std::string path = temp_path("v6");
  {
    auto w = st::TraceWriter::create(path, {});
    for (uint64_t i = 0; i < 300; ++i) {
      ev::Event e;
      e.kind = i % 3 == 2 ? ev::Kind::free_requested : ev::Kind::alloc;
      e.seq = i + 1;
      e.ts_ns = 1000 + 10 * i;
      e.thread_id = 1 + i % 2;
      e.block.addr = 0x100000 + 0x1000 * (i / 3);
      e.block.size = e.block.requested_size = 4096;
      w->append(e, 0);
    }
    w->close(5000);
  }
  st::finalize(path);
  auto events = [&] {
    std::vector<std::string> out;
    st::TraceReader::open(path, st::TraceReader::Require::upgradable)
        .for_each_event([&](const ev::Event& x, uint64_t) {
          out.push_back(std::to_string(x.seq) + " " + std::to_string(x.ts_ns) + " " +
                        std::to_string(x.thread_id) + " " + std::string(ev::kind_name(x.kind)));
        });
    return out;
  };
  const std::vector<std::string> before = events();
  ASSERT_EQ(before.size(), 300u);
  ASSERT_EQ(tl_test::make_schema_v6(path), "");
  EXPECT_EQ(open_error(path, st::TraceReader::Require::finalized),
            path +
                ": trace schema version 6 is older than this build of Tidemark reads "
                "(version 7); `tidemark finalize " +
                path + "` upgrades it");
  EXPECT_EQ(events(), before);
  st::finalize(path);
  EXPECT_EQ(st::TraceReader::open(path, st::TraceReader::Require::finalized).schema_version(), 7);
  EXPECT_EQ(events(), before);
  // Every frame carries its checksum again: bit 2 of the frame header descriptor (byte 5).
  for (const char* table : {"event_blocks", "memory_lod"}) {
    const std::vector<std::string> descriptors =
        rows(path, (std::string("SELECT hex(substr(data, 5, 1)) FROM ") + table).c_str());
    ASSERT_FALSE(descriptors.empty()) << table;
    for (const std::string& d : descriptors)
      EXPECT_TRUE(std::stoi(d, nullptr, 16) & 0x04) << table << ": descriptor " << d;
  }
  remove_trace(path);
}

TEST(StoreReader, RefusesAnUnfinalizedTraceWhereFinalizedDataIsNeeded) {
  std::string path = temp_path("unfinalized");
  st::TraceWriter::create(path, {})->close(0);
  EXPECT_EQ(open_error(path), "(no error)");
  EXPECT_EQ(open_error(path, st::TraceReader::Require::finalized),
            path +
                ": trace is not finalized (meta finalized = 0, expected 1): finalize it first "
                "to build the allocation, tensor and timeline tables");
  // A reader that refuses the file leaves nothing beside it (a WAL-mode file without a -wal
  // has no writer: it is opened immutable, so SQLite makes no -wal or -shm).
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(path + "-shm"));
  auto r = st::TraceReader::open(path);
  EXPECT_THROW(r.peak(1), st::StoreError);
  st::finalize(path);
  EXPECT_EQ(open_error(path, st::TraceReader::Require::finalized), "(no error)");
  EXPECT_TRUE(st::TraceReader::open(path).finalized());
  remove_trace(path);
}

// Issue-level damage that once printed nonsense: a negative count (shown as 2^64 - 5) is named
// on open; an event whose size passes 2^56 (sums of such overflow the curves) is refused by
// finalize as damaged, leaving the file as it was.
TEST(StoreReader, NegativeCountsAndImpossibleSizesAreNamed) {
  std::string path = temp_path("damaged_counts");
  st::TraceWriter::create(path, {})->close(0);
  sql(path, "UPDATE meta SET value = -5 WHERE key = 'event_count'");
  EXPECT_EQ(open_error(path), path + ": damaged trace: meta event_count is -5, expected 0 or more");
  remove_trace(path);

  path = temp_path("damaged_sizes");
  {
    auto w = st::TraceWriter::create(path, {});
    ev::Event e;
    e.kind = ev::Kind::alloc;
    e.seq = 1;
    e.ts_ns = 10;
    e.block = {};
    e.block.addr = 0x1000;
    e.block.size = uint64_t{1} << 60;
    e.block.requested_size = 100;
    w->append(e, 0);
    w->close(20);
  }
  try {
    st::finalize(path);
    ADD_FAILURE() << "finalized a trace with a 2^60-byte block";
  } catch (const st::StoreError& e) {
    EXPECT_EQ(std::string(e.what()), path +
                                         ": damaged trace: event 1 (alloc) has a size of "
                                         "1152921504606846976 bytes, more than 2^56");
  }
  EXPECT_FALSE(st::TraceReader::open(path).finalized());  // nothing was written
  remove_trace(path);
}

// A count of lost events is all of them only where nothing could be lost after it was stored
// (Note [Counted losses]): a closed file, or a failed writer's count stored at stop; a writer
// that stopped mid-run (killed, or no room for the final count) reads as a lower bound.
TEST(StoreReader, ALossCountIsFinalOnlyWhenClosedOrStoredAtStop) {
  const std::string closed = temp_path("loss_closed"), mid = temp_path("loss_mid"),
                    last = temp_path("loss_last"), gone = temp_path("loss_gone");
  st::TraceWriter::create(closed, {})->close(0);
  EXPECT_TRUE(st::TraceReader::open(closed).loss_counted());
  {
    auto w = st::TraceWriter::create(mid, {});
    w->abandon(5, 10, "the disk is full");  // and then the process is gone
    auto r = st::TraceReader::open(mid);
    EXPECT_FALSE(r.loss_counted());
    EXPECT_EQ(r.dropped_count(), 5u);
  }
  {
    auto w = st::TraceWriter::create(last, {});
    w->abandon(5, 10, "the disk is full");
    w->abandon(7, 20, "the disk is full", /*last=*/true);
    auto r = st::TraceReader::open(last);
    EXPECT_TRUE(r.loss_counted());
    EXPECT_FALSE(r.clean_end());
    EXPECT_EQ(r.dropped_count(), 12u);
  }
  {
    auto w = st::TraceWriter::create(gone, {});
    ev::Event e{};
    e.kind = ev::Kind::mark;
    e.seq = 1;
    w->append(e, 0);
    w->commit();
    // Destroyed without close: what was committed stays, the count of what was lost is not known.
  }
  EXPECT_FALSE(st::TraceReader::open(gone).loss_counted());
  for (const std::string& p : {closed, mid, last, gone}) remove_trace(p);
}

}  // namespace
