// Stack capture (libunwind), the stacks prefix tree, and the module list of /proc/self/maps.
// Symbolization lives in symbolizer.cpp.
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "profiler/record/stacks.h"

namespace tidemark::record {

namespace {

// Frames unw_backtrace may report above our caller: its own and capture_stack's (the count
// differs between libunwind versions, so capture_stack finds its caller's frame by address).
constexpr int kOwnFrames = 4;
// Callers skip their own few frames (recorder, sink, dispatch); more is clamped.
constexpr int kMaxSkip = 32;

}  // namespace

// Note [Capture under a lock]
// The allocator calls the recorder, and so this function, with its mutex held, from any
// thread. unw_backtrace walks with libunwind's per-thread trace cache (created with mmap on a
// thread's first capture, never malloc) and falls back to unw_step for frames the cache cannot
// describe; neither calls back into the allocator or takes a lock a caller could hold.
// unw_backtrace gives no way to skip frames, so it fills a buffer on our stack, deep enough
// for the skipped frames, and we copy the wanted part.
[[gnu::noinline]] int capture_stack(uint64_t* ips, int max_depth, int skip) noexcept {
  if (ips == nullptr || max_depth <= 0) return 0;
  max_depth = std::min(max_depth, kMaxStackDepth);
  skip = std::clamp(skip, 0, kMaxSkip);
  void* buf[kOwnFrames + kMaxSkip + kMaxStackDepth];
  int n = unw_backtrace(buf, kOwnFrames + skip + max_depth);
  // The first entry that is our return address is our caller's frame.
  void* caller = __builtin_extract_return_addr(__builtin_return_address(0));
  int first = 0;
  while (first < std::min(n, kOwnFrames) && buf[first] != caller) ++first;
  if (first == std::min(n, kOwnFrames)) first = 1;  // not found: assume only our own frame
  first += skip;
  int count = std::clamp(n - first, 0, max_depth);
  for (int i = 0; i < count; ++i) ips[i] = reinterpret_cast<uintptr_t>(buf[first + i]);
  return count;
}

struct StackTable::Impl {
  struct Key {
    uint64_t parent, ip;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const noexcept {
      // Return addresses differ in their low bits, parents are small: mix both (splitmix64).
      uint64_t x = k.ip ^ (k.parent * 0x9e3779b97f4a7c15ull);
      x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
      x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
      return static_cast<size_t>(x ^ (x >> 31));
    }
  };
  std::unordered_map<Key, uint64_t, KeyHash> ids;
  uint64_t next_id = 1;
};

uint64_t StackTable::intern(const uint64_t* ips, int n, std::vector<Node>& created) {
  if (!impl_) impl_ = std::make_shared<Impl>();
  uint64_t parent = 0;
  // From the outermost frame inwards, so a new node's parent always exists already.
  for (int i = n - 1; i >= 0; --i) {
    auto [it, inserted] = impl_->ids.try_emplace(Impl::Key{parent, ips[i]}, impl_->next_id);
    if (inserted) {
      ++impl_->next_id;
      created.push_back(Node{it->second, parent, ips[i]});
    }
    parent = it->second;
  }
  return parent;
}

size_t StackTable::size() const {
  return impl_ ? impl_->ids.size() : 0;
}

std::vector<store::ModuleInfo> read_modules() {
  std::vector<store::ModuleInfo> modules;
  FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return modules;
  // "start-end perms offset dev inode path": the path (which may hold spaces) starts at the
  // first non-blank after the inode; anonymous mappings have none, [vdso] and the like are not
  // files.
  char* line = nullptr;
  size_t cap = 0;
  while (getline(&line, &cap, maps) > 0) {
    unsigned long long start, end, offset;
    char perms[8];
    int path_at = 0;
    if (std::sscanf(line, "%llx-%llx %7s %llx %*s %*u %n", &start, &end, perms, &offset, &path_at) <
            4 ||
        path_at == 0)
      continue;
    if (std::strlen(perms) < 3 || perms[2] != 'x' || line[path_at] != '/') continue;
    std::string path(line + path_at);
    while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) path.pop_back();
    modules.push_back(store::ModuleInfo{std::move(path), start, end, offset});
  }
  std::free(line);
  std::fclose(maps);
  return modules;
}

}  // namespace tidemark::record
