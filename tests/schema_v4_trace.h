// A trace as schema version 4 left it, made from a current finalized one, for the tests of the
// upgrade (store and CLI). Version 7 sealed the blocks in checksummed frames
// (schema_v6_trace.h undoes that first); version 5 compressed the blobs -- `event_blocks.data` (a
// raw table) and `memory_lod.data` -- keyed `tensors` and `storages` by their ids, and left
// `allocations` one index on the time of allocation and one on the blocks never freed. So a
// finalized v4 file is a v5 file with its blobs decompressed, the v4 `tensors`, `storages` and
// their indexes, the v4 indexes of `allocations`, and user_version and meta schema_version 4.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "profiler/store/compress.h"
#include "profiler/store/trace_format.h"
#include "schema_v6_trace.h"

namespace tl_test {

// Rewrites the finalized trace at `path` as version 4 wrote it. Returns "" or the error.
inline std::string make_schema_v4(const std::string& path) {
  namespace st = tidemark::store;
  sqlite3* db = nullptr;
  std::string error;
  auto exec = [&](const char* sql) {
    if (error.empty() && sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK)
      error = path + ": " + sqlite3_errmsg(db);
  };
  // Every blob of `table` as it was before compression.
  auto decompress_all = [&](const char* table) {
    rewrite_blobs(
        db, path, table, "data",
        [&](sqlite3_stmt*, std::span<const uint8_t> stored) {
          std::vector<uint8_t> raw;
          st::detail::decompress(stored, raw, path, table, st::detail::Checksum::none);
          return raw;
        },
        error);
  };
  // The blobs as version 6 stored them (frames of the bare content), then decompressed.
  if (std::string v6 = make_schema_v6(path); !v6.empty()) return v6;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK)
    error = path + ": " + sqlite3_errmsg(db);
  exec("BEGIN");
  decompress_all("event_blocks");
  decompress_all("memory_lod");
  // The v4 tables and indexes, as profiler/store/schema.h had them.
  exec(R"sql(
CREATE TABLE storages_v4 (id INTEGER PRIMARY KEY, storage_id INTEGER NOT NULL, device INTEGER NOT NULL,
  addr INTEGER NOT NULL, nbytes INTEGER NOT NULL, create_ts INTEGER NOT NULL, release_ts INTEGER,
  thread INTEGER NOT NULL, stack INTEGER NOT NULL);
INSERT INTO storages_v4 (storage_id, device, addr, nbytes, create_ts, release_ts, thread, stack)
  SELECT storage_id, device, addr, nbytes, create_ts, release_ts, thread, stack FROM storages;
DROP TABLE storages;
ALTER TABLE storages_v4 RENAME TO storages;
CREATE TABLE tensors_v4 (id INTEGER PRIMARY KEY, tensor_id INTEGER NOT NULL, storage_id INTEGER NOT NULL,
  base_id INTEGER NOT NULL, device INTEGER NOT NULL, sizes TEXT NOT NULL, strides TEXT NOT NULL,
  storage_offset INTEGER NOT NULL, dtype INTEGER NOT NULL, op INTEGER NOT NULL,
  create_ts INTEGER NOT NULL, release_ts INTEGER, thread INTEGER NOT NULL,
  stack INTEGER NOT NULL);
INSERT INTO tensors_v4 (tensor_id, storage_id, base_id, device, sizes, strides, storage_offset, dtype,
  op, create_ts, release_ts, thread, stack)
  SELECT tensor_id, storage_id, base_id, device, sizes, strides, storage_offset, dtype, op, create_ts,
  release_ts, thread, stack FROM tensors;
DROP TABLE tensors;
ALTER TABLE tensors_v4 RENAME TO tensors;
CREATE INDEX tensors_by_id ON tensors (tensor_id);
CREATE INDEX storages_by_id ON storages (storage_id);
CREATE INDEX tensors_by_storage ON tensors (storage_id);
CREATE INDEX storages_by_create_ts ON storages (create_ts);
DROP INDEX allocations_unfreed;
CREATE INDEX allocations_by_free_requested_ts ON allocations (device, free_requested_ts);
CREATE INDEX allocations_by_free_completed_ts ON allocations (device, free_completed_ts);
CREATE INDEX allocations_by_addr ON allocations (device, addr);
UPDATE meta SET value = 4 WHERE key = 'schema_version';
PRAGMA user_version = 4;
)sql");
  if (error.empty())
    exec("COMMIT");
  else
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  return error;
}

}  // namespace tl_test
