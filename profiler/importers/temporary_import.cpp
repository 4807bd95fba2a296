#include "profiler/importers/temporary_import.h"

#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
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

// The directory and traces to remove when a signal ends the process (Note [Snapshots as
// traces]), kept where a signal handler may read them: fixed buffers, made on the first import
// (not static storage: the executable's own size matters under `ulimit -v`), filled before the
// handler can see them (the count is published last).
constexpr int kMaxRemoved = 64;
struct Removed {
  char dir[PATH_MAX];
  char traces[kMaxRemoved][PATH_MAX];
  std::atomic<int> count{0};
};
std::atomic<Removed*> g_removed{nullptr};

// `path` + `suffix` into `out` (async-signal-safe: no library call).
void join(char* out, const char* path, const char* suffix) {
  size_t n = 0;
  for (; path[n] && n < PATH_MAX - 16; ++n) out[n] = path[n];
  for (size_t i = 0; suffix[i]; ++i) out[n++] = suffix[i];
  out[n] = '\0';
}

void remove_on_signal(int sig) {
  if (Removed* r = g_removed.load()) {
    char name[PATH_MAX];
    const int count = r->count.load();
    for (int i = 0; i < count; ++i)
      for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
        join(name, r->traces[i], suffix);
        ::unlink(name);
      }
    if (r->dir[0]) ::rmdir(r->dir);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// Installs remove_on_signal where the signal's action is still the default one.
void remove_on_signals() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;
    struct sigaction sa {};
    sa.sa_handler = remove_on_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

void remember_on_signal(const std::string& trace) {
  Removed* r = g_removed.load();
  const int n = r->count.load();
  if (n >= kMaxRemoved || trace.size() >= PATH_MAX - 16) return;
  std::memcpy(r->traces[n], trace.c_str(), trace.size() + 1);
  r->count.store(n + 1);
}

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
      const std::string templ = (fs::temp_directory_path() / "tidemark-import-XXXXXX").string();
      if (templ.size() >= PATH_MAX)
        throw ImportError(path + ": the temporary directory's name is too long: " + templ);
      // Made in place in the handler's buffer, the handlers installed first: from the moment
      // the directory exists, a signal removes it.
      auto* removed = new Removed();  // lives as long as the process
      removed->dir[0] = '\0';
      g_removed.store(removed);
      remove_on_signals();
      std::memcpy(removed->dir, templ.c_str(), templ.size() + 1);
      if (::mkdtemp(removed->dir) == nullptr) {
        removed->dir[0] = '\0';
        throw ImportError(path + ": cannot make a directory to import the snapshot into in " +
                          fs::temp_directory_path().string() + ": " + std::strerror(errno));
      }
      dir_ = removed->dir;
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
    remember_on_signal(out.string());
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
