#include "profiler/importers/temporary_import.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string_view>

#include "profiler/importers/import_error.h"
#include "profiler/importers/pytorch_snapshot.h"

namespace tidemark::importers {

namespace {
namespace fs = std::filesystem;

// The snapshots this process imported, removed with it.
class Imports {
 public:
  ~Imports() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  std::string trace_for(const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = traces_.find(path); it != traces_.end()) return it->second;
    if (dir_.empty()) {
      std::string templ = (fs::temp_directory_path() / "tidemark-import-XXXXXX").string();
      if (::mkdtemp(templ.data()) == nullptr)
        throw ImportError(path + ": cannot make a directory to import the snapshot into in " +
                          fs::temp_directory_path().string() + ": " + std::strerror(errno));
      dir_ = templ;
    }
    // Named after the snapshot, so a message about the trace names the file the user gave; cut
    // so that the longest name SQLite makes beside it ("N-NAME.db-journal") still fits a file
    // name (255 bytes), at a UTF-8 character's start.
    std::string name = fs::path(path).filename().string();
    constexpr size_t kMaxName = 255 - std::string_view("-journal").size() - 3 - 21;
    if (name.size() > kMaxName) {
      size_t cut = kMaxName;
      while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
      name.resize(cut);
    }
    const fs::path out = traces_.empty()
                             ? dir_ / (name + ".db")
                             : dir_ / (std::to_string(traces_.size()) + "-" + name + ".db");
    import_pytorch_snapshot(path, out.string());
    return traces_[path] = out.string();
  }

 private:
  std::mutex mutex_;
  fs::path dir_;
  std::map<std::string, std::string> traces_;
};

Imports& imports() {
  static Imports i;
  return i;
}
}  // namespace

bool starts_as_pickle(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char c = 0;
  return in.get(c) && static_cast<unsigned char>(c) == 0x80;
}

std::string imported_trace(const std::string& path) {
  return imports().trace_for(path);
}

std::string trace_file_for(const std::string& path) {
  return starts_as_pickle(path) ? imported_trace(path) : path;
}

}  // namespace tidemark::importers
