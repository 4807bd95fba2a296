// Opening an existing trace: the checks every reader of the file shares (finalize, the
// reader), with messages that name the file and what was expected and seen.
#pragma once

#include <memory>
#include <string>

#include "profiler/store/sqlite_db.h"

namespace tidemark::store::detail {

// raw: the raw tables of this schema version; finalized: the derived ones too; upgradable:
// the raw tables of this version or of one finalize() upgrades (kOldestUpgradableSchemaVersion
// and later).
enum class Need { raw, finalized, upgradable };

// Opens `path` and checks it is a Tidemark trace of a schema version `need` accepts (and
// finalized, when asked). Throws StoreError otherwise. `version`, when given, receives the
// file's schema version.
std::unique_ptr<Db> open_trace(const std::string& path, Db::Mode mode, Need need,
                               int* version = nullptr);

}  // namespace tidemark::store::detail
