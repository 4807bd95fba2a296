// A trace as schema version 3 left it, made from a current finalized one, for the tests of the
// upgrade (store and CLI). Version 4 changed only a derived table -- `memory_lod` went from one
// row per change or bucket to chunks of encoded rows -- so a finalized v3 file is a v4 file
// (schema_v4_trace.h) whose `memory_lod` has the v3 rows, with user_version and meta
// schema_version 3.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "profiler/store/trace_reader.h"
#include "schema_v4_trace.h"

namespace tl_test {

// Rewrites the finalized trace at `path` as version 3 wrote it. Returns "" or the error.
inline std::string make_schema_v3(const std::string& path) {
  namespace st = tidemark::store;
  // The v3 table and index, as profiler/store/schema.h had them.
  std::string sql = R"sql(
BEGIN;
DROP TABLE memory_lod;
CREATE TABLE memory_lod (device INTEGER NOT NULL, level INTEGER NOT NULL, t INTEGER NOT NULL,
  seq INTEGER, n INTEGER NOT NULL,
  allocated INTEGER NOT NULL, allocated_min INTEGER NOT NULL, allocated_max INTEGER NOT NULL,
  active INTEGER NOT NULL, active_min INTEGER NOT NULL, active_max INTEGER NOT NULL,
  reserved INTEGER NOT NULL, reserved_min INTEGER NOT NULL, reserved_max INTEGER NOT NULL,
  requested INTEGER NOT NULL, requested_min INTEGER NOT NULL, requested_max INTEGER NOT NULL);
CREATE INDEX memory_lod_by_time ON memory_lod (device, level, t);
)sql";
  try {
    const auto r = st::TraceReader::open(path, st::TraceReader::Require::finalized);
    for (const st::DeviceRow& d : r.devices())
      for (const st::LodLevel& l : r.lod_levels(d.id))
        r.for_each_lod(d.id, l.level, 0, INT64_MAX, [&](const st::LodRow& x) {
          sql += "INSERT INTO memory_lod VALUES (" + std::to_string(d.id) + ", " +
                 std::to_string(l.level) + ", " + std::to_string(x.t) + ", " +
                 (x.seq ? std::to_string(*x.seq) : "NULL") + ", " + std::to_string(x.n);
          for (int64_t v : {x.allocated, x.allocated_min, x.allocated_max, x.active, x.active_min,
                            x.active_max, x.reserved, x.reserved_min, x.reserved_max, x.requested,
                            x.requested_min, x.requested_max})
            sql += ", " + std::to_string(v);
          sql += ");\n";
          return true;
        });
  } catch (const st::StoreError& e) {
    return e.what();
  }
  if (std::string error = make_schema_v4(path); !error.empty()) return error;
  sql +=
      "UPDATE meta SET value = 3 WHERE key = 'schema_version';\nPRAGMA user_version = "
      "3;\nCOMMIT;\n";
  sqlite3* db = nullptr;
  std::string error;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK ||
      sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK)
    error = path + ": " + sqlite3_errmsg(db);
  sqlite3_close(db);
  return error;
}

}  // namespace tl_test
