// A small read-only SQLite helper for the analysis library's own queries on the derived tables
// (docs/trace-format.md). Internal: not part of the installed interface.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace tidemark::analysis::detail {

class SqlDb {
 public:
  // Opens `path` read-only. Throws store::StoreError naming the file.
  explicit SqlDb(const std::string& path);
  ~SqlDb();
  SqlDb(const SqlDb&) = delete;
  SqlDb& operator=(const SqlDb&) = delete;

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }
  bool table_exists(const char* name) const;
  [[noreturn]] void fail(std::string_view what) const;

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

class Query {
 public:
  Query(const SqlDb& db, const char* sql);
  ~Query();
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

  Query& bind(int i, int64_t v);
  Query& bind(int i, uint64_t v) { return bind(i, static_cast<int64_t>(v)); }
  Query& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Query& bind(int i, std::string_view v);
  bool step();  // true: a row is available
  void reset();

  bool is_null(int col) const;
  int64_t i64(int col) const;
  uint64_t u64(int col) const { return static_cast<uint64_t>(i64(col)); }
  double f64(int col) const;
  std::string text(int col) const;
  std::span<const uint8_t> blob(int col) const;  // valid until the next step()

 private:
  const SqlDb* db_;
  sqlite3_stmt* st_ = nullptr;
};

}  // namespace tidemark::analysis::detail
