#include "profiler/store/trace_file.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <cstdio>

#include "profiler/store/meta_keys.h"

namespace tidemark::store::detail {

namespace {
std::string hex32(int64_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", static_cast<uint32_t>(v));
  return buf;
}
}  // namespace

std::unique_ptr<Db> open_trace(const std::string& path, Db::Mode mode, Need need,
                               int* version_out) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw StoreError(path + ": cannot open: no such file");
  if (!S_ISREG(st.st_mode)) throw StoreError(path + ": cannot open: not a regular file");
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
  const std::string reads = " this build of Tidemark reads (version " +
                            std::to_string(kSchemaVersion) + ")";
  if (version > kSchemaVersion)
    throw StoreError(seen + " is newer than" + reads + "; use a newer Tidemark");
  const bool upgradable = version >= kOldestUpgradableSchemaVersion;
  if (version < kSchemaVersion && !(upgradable && need == Need::upgradable)) {
    throw StoreError(seen + " is older than" + reads + "; " +
                     (upgradable ? "`tidemark finalize " + path + "` upgrades it"
                                 : std::string("record it again")));
  }
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
