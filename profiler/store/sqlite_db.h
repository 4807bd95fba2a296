// Thin RAII wrappers over the SQLite C API for the store's own use (not installed API):
// errors become StoreError naming the file and SQLite's reason, never the statement
// (Note [Store messages] in sqlite_db.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/store/trace_format.h"

struct sqlite3;
struct sqlite3_stmt;

namespace tidemark::store::detail {

class Stmt;

// Note [Read-only traces]
// Readers never write to a trace, so they open it SQLITE_OPEN_READONLY, and work on read-only
// media: a read-only file, or one in a directory they may not write. A WAL-mode database needs
// its `-wal` and `-shm` files, which SQLite creates beside it (and a read-only connection
// leaves behind). So:
// * a finalized trace with no `-wal`, or any WAL-mode file with no `-wal` (a finished
//   recording not finalized yet, a damaged trace) -- nobody writes it: a writer keeps its
//   `-wal` while it has the file open, and a new recording replaces the file rather than
//   writing into it -- is opened `immutable=1`: nothing is created, nothing locked, so a
//   reader that refuses the file leaves nothing beside it (but for a follower, `follow`,
//   which must see the finalize that may come: it opens an unfinalized file as usual);
// * otherwise (a trace being recorded, or a crashed one) it is opened read-only as usual; where
//   the `-shm` cannot be created (a read-only directory) and no `-wal` holds transactions, it
//   is opened `immutable=1` too, as the complete database it then is; a non-empty `-wal` that
//   cannot be indexed is an error that says so (its transactions would be missed).
// Opens `path` so; throws StoreError naming the file and the problem. (Also used by the
// analysis library's own connection.)
sqlite3* open_read_only(const std::string& path, bool follow = false);

class Db {
 public:
  enum class Mode { create, read_write, read_only, follow };
  // Opens `path`. `create` truncates nothing by itself: the writer removes old files first.
  // `read_only`, and `follow` for a reader that must see the file change under it (`tidemark
  // watch`): Note [Read-only traces].
  Db(const std::string& path, Mode mode);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  void exec(const char* sql);
  int64_t pragma_int(const char* name);  // PRAGMA name, first column of the first row
  bool table_exists(const char* name);
  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }
  // Throws StoreError: "<path>: <what>: <sqlite message>".
  [[noreturn]] void fail(std::string_view what) const;

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

// A part file's writes (Note [Part files] in trace_writer.cpp): no journal, no syncs.
void write_without_journal(Db& db);

// A time bound as a query binds it. Times are unsigned nanoseconds and SQLite integers
// signed: an open bound (UINT64_MAX, "until the end") becomes INT64_MAX, which every stored
// time is below, rather than the negative number its bit pattern would be.
constexpr int64_t time_bound(uint64_t ts) {
  return ts > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(ts);
}

class Stmt {
 public:
  Stmt() = default;
  Stmt(Db& db, const char* sql);
  ~Stmt();
  Stmt(Stmt&& o) noexcept : db_(o.db_), st_(o.st_) { o.st_ = nullptr; }
  Stmt& operator=(Stmt&& o) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  // Binds are 1-based, as in SQLite. Unsigned values are stored as their int64 bit pattern.
  Stmt& bind(int i, int64_t v);
  Stmt& bind(int i, uint64_t v) { return bind(i, static_cast<int64_t>(v)); }
  Stmt& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Stmt& bind(int i, double v);
  Stmt& bind(int i, std::string_view v);
  Stmt& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  Stmt& bind_blob(int i, std::span<const uint8_t> v);
  Stmt& bind_null(int i);
  template <class T>
  Stmt& bind(int i, const std::optional<T>& v) {
    return v ? bind(i, *v) : bind_null(i);
  }

  bool step();  // true: a row is available
  void run();   // step to completion, then reset
  void reset();

  bool is_null(int col) const;
  int64_t i64(int col) const;
  uint64_t u64(int col) const { return static_cast<uint64_t>(i64(col)); }
  double f64(int col) const;
  std::string text(int col) const;
  std::span<const uint8_t> blob(int col) const;
  std::optional<int64_t> opt_i64(int col) const {
    return is_null(col) ? std::nullopt : std::optional<int64_t>(i64(col));
  }

 private:
  Db* db_ = nullptr;
  sqlite3_stmt* st_ = nullptr;
};

// Commits on commit(); rolls back when destroyed without it.
class Transaction {
 public:
  explicit Transaction(Db& db, const char* begin = "BEGIN IMMEDIATE");
  ~Transaction();
  void commit();

 private:
  Db& db_;
  bool open_ = true;
};

// A WHERE clause built from conditions joined by AND, and the integers it binds ?1, ?2, ...
// in order: a condition's `#` marks are its one parameter (several marks, the same one).
struct Where {
  std::string sql;
  std::vector<int64_t> params;

  void add(const std::string& condition) {
    sql += sql.empty() ? "WHERE " : " AND ";
    sql += condition;
  }
  void add(const std::string& condition, int64_t value) {
    params.push_back(value);
    std::string c = condition;
    for (size_t at; (at = c.find('#')) != std::string::npos;)
      c.replace(at, 1, "?" + std::to_string(params.size()));
    add(c);
  }
  // `head` (the SELECT), the clause, then `tail` (ORDER BY, LIMIT), prepared and bound.
  Stmt prepare(Db& db, const std::string& head, const std::string& tail = {}) const {
    Stmt q(db, (head + " " + sql + tail).c_str());
    for (size_t i = 0; i < params.size(); ++i) q.bind(static_cast<int>(i + 1), params[i]);
    return q;
  }
};

}  // namespace tidemark::store::detail
