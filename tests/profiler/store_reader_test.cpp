// TraceReader::open refuses what is not a trace it can read, with a message naming the file
// and what was expected and seen.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "profiler/store/trace_reader.h"
#include "profiler/store/trace_writer.h"

namespace {

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

void sql(const std::string& path, const char* statements) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, statements, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
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
  std::string path = temp_path("version");
  st::TraceWriter::create(path, {})->close(0);
  sql(path, "PRAGMA user_version = 2");
  EXPECT_EQ(open_error(path), path +
                                  ": trace schema version 2 is newer than this build of Tidemark "
                                  "reads (version 1); use a newer Tidemark");
  sql(path, "PRAGMA user_version = 0");
  EXPECT_EQ(open_error(path), path +
                                  ": trace schema version 0 is older than this build of Tidemark "
                                  "reads (version 1); record it again");
  // finalize() refuses it too.
  EXPECT_THROW(st::finalize(path), st::StoreError);
  remove_trace(path);
}

TEST(StoreReader, RefusesAnUnfinalizedTraceWhereFinalizedDataIsNeeded) {
  std::string path = temp_path("unfinalized");
  st::TraceWriter::create(path, {})->close(0);
  EXPECT_EQ(open_error(path), "(no error)");
  EXPECT_EQ(open_error(path, st::TraceReader::Require::finalized),
            path + ": trace is not finalized (meta finalized = 0, expected 1): finalize it first "
                   "to build the allocation, tensor and timeline tables");
  auto r = st::TraceReader::open(path);
  EXPECT_THROW(r.peak(1), st::StoreError);
  st::finalize(path);
  EXPECT_EQ(open_error(path, st::TraceReader::Require::finalized), "(no error)");
  EXPECT_TRUE(st::TraceReader::open(path).finalized());
  remove_trace(path);
}

}  // namespace
