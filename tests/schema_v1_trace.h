// A trace as schema version 1 left it, made from a current finalized one, for the tests of
// the upgrade (store and CLI). Versions 2 to 4 changed only derived tables -- `segments`
// gained `thread` and `stack` in 2, `memory_lod` its chunks in 4 -- so a finalized v1 file is
// a v3 file (schema_v3_trace.h) whose `segments` has the v1 columns, with user_version and
// meta schema_version 1.
#pragma once

#include <sqlite3.h>

#include <string>

#include "schema_v3_trace.h"

namespace tl_test {

// Rewrites the finalized trace at `path` as version 1 wrote it. Returns "" or SQLite's error.
inline std::string make_schema_v1(const std::string& path) {
  if (std::string error = make_schema_v3(path); !error.empty()) return error;
  // The v1 table, as profiler/store/schema.h had it.
  const char* sql = R"sql(
BEGIN;
CREATE TABLE segments_v1 (id INTEGER PRIMARY KEY, device INTEGER NOT NULL, kind TEXT NOT NULL,
  addr INTEGER NOT NULL, size INTEGER NOT NULL, segment INTEGER NOT NULL, stream INTEGER NOT NULL,
  pool TEXT NOT NULL, alloc_ts INTEGER NOT NULL, free_ts INTEGER, seq INTEGER NOT NULL);
INSERT INTO segments_v1 SELECT id, device, kind, addr, size, segment, stream, pool, alloc_ts,
  free_ts, seq FROM segments;
DROP TABLE segments;
ALTER TABLE segments_v1 RENAME TO segments;
CREATE INDEX segments_by_alloc_ts ON segments (device, alloc_ts);
UPDATE meta SET value = 1 WHERE key = 'schema_version';
PRAGMA user_version = 1;
COMMIT;
)sql";
  sqlite3* db = nullptr;
  std::string error;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK ||
      sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK)
    error = path + ": " + sqlite3_errmsg(db);
  sqlite3_close(db);
  return error;
}

}  // namespace tl_test
