// A trace as schema version 6 left it, made from a current finalized one, for the tests of the
// upgrade (store and CLI). Version 7 sealed each event block with a copy of its row and gave
// every zstd frame (`event_blocks.data`, `memory_lod.data`) its content checksum. So a
// finalized v6 file is a v7 file whose blobs are frames of the bare content, without a
// checksum, with user_version and meta schema_version 6.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "profiler/store/compress.h"
#include "profiler/store/event_codec.h"
#include "profiler/store/trace_format.h"

namespace tl_test {

// Rewrites the `data` of every row of `table` by `convert(row, data)`, the row selected as
// "id, <columns>" with `data` the last of `columns`; sets `error` (path: message) on failure.
template <class Convert>
void rewrite_blobs(sqlite3* db, const std::string& path, const char* table, const char* columns,
                   Convert convert, std::string& error) {
  if (!error.empty()) return;
  std::vector<std::pair<int64_t, std::vector<uint8_t>>> rows;
  sqlite3_stmt* read = nullptr;
  sqlite3_prepare_v2(db, (std::string("SELECT id, ") + columns + " FROM " + table).c_str(), -1,
                     &read, nullptr);
  try {
    while (sqlite3_step(read) == SQLITE_ROW) {
      const int blob = sqlite3_column_count(read) - 1;
      const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(read, blob));
      const std::span<const uint8_t> stored{p,
                                            static_cast<size_t>(sqlite3_column_bytes(read, blob))};
      rows.emplace_back(sqlite3_column_int64(read, 0), convert(read, stored));
    }
  } catch (const tidemark::store::StoreError& e) {
    error = e.what();
  }
  sqlite3_finalize(read);
  sqlite3_stmt* write = nullptr;
  sqlite3_prepare_v2(db, (std::string("UPDATE ") + table + " SET data = ? WHERE id = ?").c_str(),
                     -1, &write, nullptr);
  for (const auto& [id, data] : rows) {
    sqlite3_bind_blob(write, 1, data.data(), static_cast<int>(data.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(write, 2, id);
    if (sqlite3_step(write) != SQLITE_DONE && error.empty())
      error = path + ": " + sqlite3_errmsg(db);
    sqlite3_reset(write);
  }
  sqlite3_finalize(write);
}

// Rewrites the finalized trace at `path` as version 6 wrote it. Returns "" or the error.
inline std::string make_schema_v6(const std::string& path) {
  namespace st = tidemark::store;
  sqlite3* db = nullptr;
  std::string error;
  auto exec = [&](const char* sql) {
    if (error.empty() && sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK)
      error = path + ": " + sqlite3_errmsg(db);
  };
  auto rewrite = [&](const char* table, const char* columns, auto convert) {
    rewrite_blobs(db, path, table, columns, convert, error);
  };
  auto u64 = [](sqlite3_stmt* s, int c) {
    return static_cast<uint64_t>(sqlite3_column_int64(s, c));
  };
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK)
    error = path + ": " + sqlite3_errmsg(db);
  exec("BEGIN");
  rewrite("event_blocks", "thread, count, first_seq, last_seq, first_ts, last_ts, data",
          [&](sqlite3_stmt* s, std::span<const uint8_t> stored) {
            const st::BlockHeader header{u64(s, 1), static_cast<uint32_t>(u64(s, 2)),
                                         u64(s, 3), u64(s, 4),
                                         u64(s, 5), u64(s, 6)};
            std::vector<uint8_t> encoding;
            st::block_encoding(stored, header, st::BlockForm::sealed, encoding, path);
            return st::detail::compress(encoding, st::detail::Checksum::none);
          });
  rewrite("memory_lod", "data", [&](sqlite3_stmt*, std::span<const uint8_t> stored) {
    std::vector<uint8_t> content;
    st::detail::decompress(stored, content, path, "memory_lod", st::detail::Checksum::required);
    return st::detail::compress(content, st::detail::Checksum::none);
  });
  exec("UPDATE meta SET value = 6 WHERE key = 'schema_version'; PRAGMA user_version = 6;");
  exec("COMMIT");
  sqlite3_close(db);
  return error;
}

}  // namespace tl_test
