// SQL functions for tests that damage or craft a trace's blobs with SQL: `zstd(x)` compresses
// a blob into the frame the store writes, `unzstd(x)` returns a stored blob's content (NULL
// when it is not a frame). So `UPDATE memory_lod SET data = zstd(substr(unzstd(data), 2))`
// damages the encoding inside an intact frame, as a hostile file can.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <span>
#include <vector>

#include "profiler/store/compress.h"
#include "profiler/store/trace_format.h"

namespace tl_test {

namespace zstd_sql_detail {
inline std::span<const uint8_t> arg(sqlite3_value* v) {
  const auto* p = static_cast<const uint8_t*>(sqlite3_value_blob(v));
  return {p, static_cast<size_t>(sqlite3_value_bytes(v))};
}
inline void result(sqlite3_context* ctx, const std::vector<uint8_t>& b) {
  sqlite3_result_blob(ctx, b.data(), static_cast<int>(b.size()), SQLITE_TRANSIENT);
}
inline void zstd(sqlite3_context* ctx, int, sqlite3_value** v) {
  result(ctx, tidemark::store::detail::compress(arg(v[0])));
}
inline void unzstd(sqlite3_context* ctx, int, sqlite3_value** v) {
  std::vector<uint8_t> out;
  try {
    tidemark::store::detail::decompress(arg(v[0]), out, "unzstd", "blob",
                                        tidemark::store::detail::Checksum::none);
  } catch (const tidemark::store::StoreError&) {
    sqlite3_result_null(ctx);
    return;
  }
  result(ctx, out);
}
}  // namespace zstd_sql_detail

inline void add_zstd_functions(sqlite3* db) {
  const int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC;
  sqlite3_create_function(db, "zstd", 1, flags, nullptr, zstd_sql_detail::zstd, nullptr, nullptr);
  sqlite3_create_function(db, "unzstd", 1, flags, nullptr, zstd_sql_detail::unzstd, nullptr,
                          nullptr);
}

}  // namespace tl_test
