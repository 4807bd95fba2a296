// The peak resident memory of this process, for a benchmark's child started afresh (exec), which
// reports its own: the kernel's count for a forked child (wait4's ru_maxrss) starts at what its
// parent had resident.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace tidemark::bench {

// VmHWM, in bytes (0 when /proc/self/status cannot be read).
inline uint64_t own_peak_rss() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

}  // namespace tidemark::bench
