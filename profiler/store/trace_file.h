// Opening an existing trace: the checks every reader of the file shares (finalize, the
// reader), with messages that name the file and what was expected and seen.
#pragma once

#include <memory>
#include <string>

#include "profiler/store/sqlite_db.h"

namespace tidemark::store::detail {

enum class Need { raw, finalized };

// Opens `path` and checks it is a Tidemark trace of this schema version (and finalized, when
// asked). Throws StoreError otherwise.
std::unique_ptr<Db> open_trace(const std::string& path, Db::Mode mode, Need need);

}  // namespace tidemark::store::detail
