#include "profiler/analysis/sql.h"

#include <sqlite3.h>

#include "profiler/store/sqlite_db.h"
#include "profiler/store/trace_format.h"

namespace tidemark::analysis::detail {

SqlDb::SqlDb(const std::string& path) : path_(path), db_(store::detail::open_read_only(path)) {}

SqlDb::~SqlDb() {
  sqlite3_close(db_);
}

bool SqlDb::table_exists(const char* name) const {
  Query q(*this, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
  q.bind(1, std::string_view(name));
  return q.step();
}

void SqlDb::fail(std::string_view what) const {
  throw store::StoreError(path_ + ": " + std::string(what) + ": " + sqlite3_errmsg(db_));
}

Query::Query(const SqlDb& db, const char* sql) : db_(&db) {
  if (sqlite3_prepare_v2(db.handle(), sql, -1, &st_, nullptr) != SQLITE_OK)
    db.fail(std::string("cannot query the trace (") + sql + ")");
}

Query::~Query() {
  sqlite3_finalize(st_);
}

Query& Query::bind(int i, int64_t v) {
  sqlite3_bind_int64(st_, i, v);
  return *this;
}

Query& Query::bind(int i, std::string_view v) {
  sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}

bool Query::step() {
  int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_->fail("query failed");
}

void Query::reset() {
  sqlite3_reset(st_);
  sqlite3_clear_bindings(st_);
}

bool Query::is_null(int col) const {
  return sqlite3_column_type(st_, col) == SQLITE_NULL;
}
int64_t Query::i64(int col) const {
  return sqlite3_column_int64(st_, col);
}
double Query::f64(int col) const {
  return sqlite3_column_double(st_, col);
}
std::string Query::text(int col) const {
  const unsigned char* p = sqlite3_column_text(st_, col);
  return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
}

std::span<const uint8_t> Query::blob(int col) const {
  const void* p = sqlite3_column_blob(st_, col);
  const int n = sqlite3_column_bytes(st_, col);
  return {static_cast<const uint8_t*>(p), p ? static_cast<size_t>(n) : 0};
}

}  // namespace tidemark::analysis::detail
