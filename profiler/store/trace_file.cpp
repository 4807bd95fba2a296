#include "profiler/store/trace_file.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "profiler/store/meta_keys.h"

namespace tidemark::store::detail {

namespace {
std::string hex32(int64_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", static_cast<uint32_t>(v));
  return buf;
}

// The meta values that are integers (docs/trace-format.md, "meta") must read as integers: a
// damaged value is named when the trace is opened, before any command (finalize included)
// reads or writes anything else.
void check_meta(Db& db) {
  namespace k = meta_keys;
  Stmt s(db,
         "SELECT key, CAST(value AS TEXT) FROM meta WHERE key IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
         "?, ?, ?, ?, ?, ?) AND typeof(value) <> 'integer' AND NOT (typeof(value) = 'text' AND "
         "CAST(CAST(value AS INTEGER) AS TEXT) = value) LIMIT 1");
  int i = 0;
  for (const char* key :
       {k::kSchemaVersion, k::kPid, k::kFinalizerPid, k::kStartUnixNs, k::kStartTsNs,
        k::kStackDepth, k::kEndTsNs, k::kEndUnixNs, k::kCleanEnd, k::kEventCount, k::kDroppedCount,
        k::kFinalized, k::kFinalizedUnixNs, k::kFirstTsNs, k::kLastTsNs, k::kSyntheticTimes})
    s.bind(++i, key);
  if (s.step()) {
    throw StoreError(db.path() + ": damaged trace: meta " + s.text(0) + " is '" +
                     s.text(1).substr(0, 40) + "', not an integer");
  }
  // Counts, flags and depths are never negative (a negative count would print as 2^64 - 5).
  Stmt n(db,
         "SELECT key, value FROM meta WHERE key IN (?, ?, ?, ?, ?, ?, ?) AND CAST(value AS "
         "INTEGER) < 0 LIMIT 1");
  i = 0;
  for (const char* key : {k::kEventCount, k::kDroppedCount, k::kStackDepth, k::kCleanEnd,
                          k::kFinalized, k::kSchemaVersion, k::kSyntheticTimes})
    n.bind(++i, key);
  if (n.step())
    throw StoreError(db.path() + ": damaged trace: meta " + n.text(0) + " is " + n.text(1) +
                     ", expected 0 or more");
}
}  // namespace

std::unique_ptr<Db> open_trace(const std::string& path, Db::Mode mode, Need need,
                               int* version_out) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    // "no such file" only when there is none: a directory we may not search is another matter.
    throw StoreError(path + ": cannot open: " +
                     (errno == ENOENT ? std::string("no such file") : std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) throw StoreError(path + ": cannot open: not a regular file");
  if (::access(path.c_str(), mode == Db::Mode::read_only ? R_OK : R_OK | W_OK) != 0) {
    throw StoreError(
        path + (mode == Db::Mode::read_only ? ": cannot open: " : ": cannot open for writing: ") +
        std::strerror(errno));
  }
  auto db = std::make_unique<Db>(path, mode);
  int64_t app_id = 0, version = 0;
  try {
    app_id = db->pragma_int("application_id");
    version = db->pragma_int("user_version");
  } catch (const StoreError&) {
    if (sqlite3_errcode(db->handle()) == SQLITE_NOTADB)
      throw StoreError(path + ": not a Tidemark trace: not a SQLite database");
    throw;
  }
  if (app_id != kApplicationId) {
    throw StoreError(path + ": not a Tidemark trace: SQLite application_id is " + hex32(app_id) +
                     ", expected " + hex32(kApplicationId) + " (\"TDMK\")");
  }
  const std::string seen = path + ": trace schema version " + std::to_string(version);
  const std::string reads =
      " this build of Tidemark reads (version " + std::to_string(kSchemaVersion) + ")";
  if (version > kSchemaVersion)
    throw StoreError(seen + " is newer than" + reads + "; use a newer Tidemark");
  const bool upgradable = version >= kOldestUpgradableSchemaVersion;
  if (version < kSchemaVersion && !(upgradable && need == Need::upgradable)) {
    throw StoreError(seen + " is older than" + reads + "; " +
                     (upgradable ? "`tidemark finalize " + path + "` upgrades it"
                                 : std::string("record it again")));
  }
  check_meta(*db);
  if (version_out) *version_out = static_cast<int>(version);
  if (need == Need::finalized) {
    Stmt s(*db, "SELECT value FROM meta WHERE key = ?");
    s.bind(1, meta_keys::kFinalized);
    bool finalized = s.step() && s.i64(0) != 0;
    if (!finalized || !db->table_exists("memory_lod")) {
      throw StoreError(path +
                       ": trace is not finalized (meta finalized = 0, expected 1): finalize it "
                       "first to build the allocation, tensor and timeline tables");
    }
  }
  return db;
}

}  // namespace tidemark::store::detail
