// A trace file path in the temporary directory, unique to the test process, removed (with
// its -wal and -shm companions) before use and at the end. Shared by the profiler and
// analysis tests.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace tl_test {

class TempTrace {
 public:
  explicit TempTrace(const std::string& name)
      : path_((std::filesystem::temp_directory_path() /
               ("tidemark-test-" + name + "-" + std::to_string(::getpid()) + ".db"))
                  .string()) {
    remove();
  }
  ~TempTrace() { remove(); }
  TempTrace(const TempTrace&) = delete;
  TempTrace& operator=(const TempTrace&) = delete;
  const std::string& path() const { return path_; }

 private:
  void remove() {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path_ + suffix);
  }
  std::string path_;
};

}  // namespace tl_test
