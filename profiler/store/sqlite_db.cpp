#include "profiler/store/sqlite_db.h"

#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "profiler/store/meta_keys.h"

namespace tidemark::store::detail {

namespace {

// "file:" URI of a path: characters a URI gives meaning to are %-escaped.
std::string file_uri(const std::string& path) {
  std::string uri = "file:";
  for (unsigned char c : path) {
    if (c == '%' || c == '?' || c == '#' || c < 0x20 || c >= 0x7f) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      uri += buf;
    } else {
      uri += static_cast<char>(c);
    }
  }
  return uri;
}

// Opens and reads the schema, which is when SQLite needs the WAL index: SQLITE_OK, or the
// error with its message.
int open_and_probe(const std::string& name, int flags, sqlite3** db, std::string* message) {
  int rc = sqlite3_open_v2(name.c_str(), db, flags, nullptr);
  if (rc == SQLITE_OK) {
    sqlite3_extended_result_codes(*db, 1);
    sqlite3_busy_timeout(*db, 5000);
    rc = sqlite3_exec(*db, "SELECT 1 FROM sqlite_master LIMIT 1", nullptr, nullptr, nullptr);
    // Not a database: left to the caller, which names it (open_trace).
    if ((rc & 0xff) == SQLITE_NOTADB) rc = SQLITE_OK;
  }
  if (rc != SQLITE_OK) {
    *message = *db ? sqlite3_errmsg(*db) : sqlite3_errstr(rc);
    sqlite3_close(*db);
    *db = nullptr;
  }
  return rc;
}

// Whether the file at `path` is a SQLite database in WAL mode: its header's write and read
// versions (bytes 18 and 19) are 2.
bool wal_mode_header(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  unsigned char header[20] = {};
  const bool whole = std::fread(header, 1, sizeof header, f) == sizeof header;
  std::fclose(f);
  return whole && std::memcmp(header, "SQLite format 3", 16) == 0 && header[18] == 2 &&
         header[19] == 2;
}

}  // namespace

bool finalized(sqlite3* db) {
  sqlite3_stmt* st = nullptr;
  bool yes =
      sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = ?", -1, &st, nullptr) == SQLITE_OK;
  yes = yes && sqlite3_bind_text(st, 1, meta_keys::kFinalized, -1, SQLITE_STATIC) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) == 1;
  sqlite3_finalize(st);
  return yes;
}

void write_without_journal(Db& db) {
  db.exec("PRAGMA journal_mode = OFF");
  db.exec("PRAGMA synchronous = OFF");
}

sqlite3* open_read_only(const std::string& path, bool follow) {
  const int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX;
  const std::string immutable = file_uri(path) + "?immutable=1";
  sqlite3* db = nullptr;
  std::string message;
  struct stat wal {};
  const bool has_wal = ::stat((path + "-wal").c_str(), &wal) == 0;
  if (!has_wal && open_and_probe(immutable, flags | SQLITE_OPEN_URI, &db, &message) == SQLITE_OK) {
    // A WAL-mode file without its -wal has no writer, and opening it as usual would create
    // the -wal and -shm and leave them (a damaged trace a reader refuses included).
    if (finalized(db) || (!follow && wal_mode_header(path))) return db;
    sqlite3_close(db);
    db = nullptr;
  }
  const int rc = open_and_probe(path, flags, &db, &message);
  if (rc == SQLITE_OK) return db;
  const int primary = rc & 0xff;
  if (primary == SQLITE_CANTOPEN || primary == SQLITE_READONLY) {
    // Note [Read-only traces]: no WAL index could be made beside the file.
    if (::stat((path + "-wal").c_str(), &wal) == 0 && wal.st_size > 0) {
      throw StoreError(path + ": cannot read: its write-ahead log " + path +
                       "-wal holds transactions, and SQLite cannot create " + path +
                       "-shm beside it (" + message +
                       "); copy the trace and its -wal "
                       "somewhere writable");
    }
    if (open_and_probe(immutable, flags | SQLITE_OPEN_URI, &db, &message) == SQLITE_OK) return db;
  }
  throw StoreError(path + ": cannot open: " + message);
}

Db::Db(const std::string& path, Mode mode) : path_(path) {
  if (mode == Mode::read_only || mode == Mode::follow) {
    db_ = open_read_only(path, mode == Mode::follow);
    return;
  }
  int flags = SQLITE_OPEN_NOMUTEX;
  switch (mode) {
    case Mode::create:
      flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
      break;
    case Mode::read_write:
      flags |= SQLITE_OPEN_READWRITE;
      break;
    case Mode::read_only:
    case Mode::follow:
      break;  // above
  }
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw StoreError(path + ": cannot open: " + msg);
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, 5000);
}

Db::~Db() {
  sqlite3_close_v2(db_);
}

namespace {
StoreError::Cause cause_of(sqlite3* db) {
  switch (sqlite3_errcode(db) & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return StoreError::Cause::busy;
    case SQLITE_FULL:
      return StoreError::Cause::disk_full;
    case SQLITE_IOERR: {
      // A write refused for want of room: no space, a quota, a file size limit. Growing the
      // -shm (the WAL index) that fails is one too, whatever errno SQLite kept.
      if (sqlite3_extended_errcode(db) == SQLITE_IOERR_SHMSIZE) return StoreError::Cause::disk_full;
      const int err = sqlite3_system_errno(db);
      if (err == ENOSPC || err == EDQUOT || err == EFBIG) return StoreError::Cause::disk_full;
      // A write that stopped at a file size limit can reach us with its errno gone (SQLite's
      // rollback after it made other calls): under a finite RLIMIT_FSIZE, a failed write with
      // no errno is that limit.
      struct rlimit fsize {};
      if (sqlite3_extended_errcode(db) == SQLITE_IOERR_WRITE && err == 0 &&
          ::getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY)
        return StoreError::Cause::disk_full;
      return StoreError::Cause::other;
    }
    default:
      return StoreError::Cause::other;
  }
}

// What a write refused for want of room ran into, as a user would free it: SQLite's own words
// for it are "disk I/O error" (a file size limit) or "database or disk is full".
std::string no_room_reason(sqlite3* db) {
  switch (sqlite3_system_errno(db)) {
    case ENOSPC:
      return "no room to write: no space left on the device";
    case EDQUOT:
      return "no room to write: the disk quota is exceeded";
    case EFBIG:
      return "no room to write: the file size limit (ulimit -f) is reached";
    default:
      break;
  }
  struct rlimit fsize {};
  if ((sqlite3_errcode(db) & 0xff) == SQLITE_IOERR && ::getrlimit(RLIMIT_FSIZE, &fsize) == 0 &&
      fsize.rlim_cur != RLIM_INFINITY)
    return "no room to write: the file size limit (ulimit -f) is reached";
  return "no room to write: the disk is full";
}
}  // namespace

// Note [Store messages]: what a user reads is the file and SQLite's reason ("database disk
// image is malformed", "no such table: allocations"), never the statement: SQL says nothing to
// them (TIDEMARK_DEBUG_SQL=1 appends it, for whoever debugs the store). Out of memory is
// std::bad_alloc, as from the rest of the program, not a damaged trace.
static bool out_of_memory(sqlite3* db) {
  // SQLite's own allocations, and mapping the -shm (the WAL index) under an address-space
  // limit.
  const int code = sqlite3_extended_errcode(db);
  return (code & 0xff) == SQLITE_NOMEM || code == SQLITE_IOERR_SHMMAP ||
         ((code & 0xff) == SQLITE_IOERR && sqlite3_system_errno(db) == ENOMEM);
}

void Db::fail(std::string_view what) const {
  if (out_of_memory(db_)) throw std::bad_alloc();
  const StoreError::Cause cause = cause_of(db_);
  std::string msg =
      path_ + ": " +
      (cause == StoreError::Cause::disk_full ? no_room_reason(db_) : sqlite3_errmsg(db_));
  if (const char* debug = std::getenv("TIDEMARK_DEBUG_SQL"); debug && *debug == '1')
    msg += " (in " + std::string(what) + ": " + sqlite3_errmsg(db_) + ")";
  throw StoreError(msg, cause);
}

void Db::exec(const char* sql) {
  if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK)
    fail("`" + std::string(sql, std::min<size_t>(std::char_traits<char>::length(sql), 60)) + "`");
}

int64_t Db::pragma_int(const char* name) {
  Stmt s(*this, (std::string("PRAGMA ") + name).c_str());
  return s.step() ? s.i64(0) : 0;
}

bool Db::table_exists(const char* name) {
  Stmt s(*this, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
  s.bind(1, name);
  return s.step();
}

Stmt::Stmt(Db& db, const char* sql) : db_(&db) {
  if (sqlite3_prepare_v3(db.handle(), sql, -1, SQLITE_PREPARE_PERSISTENT, &st_, nullptr) !=
      SQLITE_OK) {
    db.fail(std::string("preparing `") + sql + "`");
  }
}

Stmt::~Stmt() {
  sqlite3_finalize(st_);
}

Stmt& Stmt::operator=(Stmt&& o) noexcept {
  if (this != &o) {
    sqlite3_finalize(st_);
    db_ = o.db_;
    st_ = o.st_;
    o.st_ = nullptr;
  }
  return *this;
}

Stmt& Stmt::bind(int i, int64_t v) {
  if (sqlite3_bind_int64(st_, i, v) != SQLITE_OK) db_->fail("bind");
  return *this;
}
Stmt& Stmt::bind(int i, double v) {
  if (sqlite3_bind_double(st_, i, v) != SQLITE_OK) db_->fail("bind");
  return *this;
}
Stmt& Stmt::bind(int i, std::string_view v) {
  if (sqlite3_bind_text64(st_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8) != SQLITE_OK)
    db_->fail("bind");
  return *this;
}
Stmt& Stmt::bind_blob(int i, std::span<const uint8_t> v) {
  // SQLITE_STATIC: callers keep the bytes alive until the statement has stepped.
  if (sqlite3_bind_blob64(st_, i, v.empty() ? "" : static_cast<const void*>(v.data()), v.size(),
                          SQLITE_STATIC) != SQLITE_OK)
    db_->fail("bind");
  return *this;
}
Stmt& Stmt::bind_null(int i) {
  if (sqlite3_bind_null(st_, i) != SQLITE_OK) db_->fail("bind");
  return *this;
}

bool Stmt::step() {
  int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  std::string sql = sqlite3_sql(st_) ? sqlite3_sql(st_) : "";
  sqlite3_reset(st_);
  db_->fail("`" + sql.substr(0, 60) + "`");
}

void Stmt::run() {
  while (step()) {
  }
  reset();
}

void Stmt::reset() {
  sqlite3_reset(st_);
  sqlite3_clear_bindings(st_);
}

bool Stmt::is_null(int col) const {
  return sqlite3_column_type(st_, col) == SQLITE_NULL;
}
int64_t Stmt::i64(int col) const {
  return sqlite3_column_int64(st_, col);
}
double Stmt::f64(int col) const {
  return sqlite3_column_double(st_, col);
}
std::string Stmt::text(int col) const {
  const unsigned char* p = sqlite3_column_text(st_, col);
  int n = sqlite3_column_bytes(st_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}
std::span<const uint8_t> Stmt::blob(int col) const {
  const void* p = sqlite3_column_blob(st_, col);
  int n = sqlite3_column_bytes(st_, col);
  return {static_cast<const uint8_t*>(p), p ? static_cast<size_t>(n) : 0};
}

Transaction::Transaction(Db& db, const char* begin) : db_(db) {
  db_.exec(begin);
}
Transaction::~Transaction() {
  if (open_) {
    try {
      db_.exec("ROLLBACK");
    } catch (...) {  // nothing to do: the connection is closing or already rolled back
    }
  }
}
void Transaction::commit() {
  db_.exec("COMMIT");
  open_ = false;
}

}  // namespace tidemark::store::detail
