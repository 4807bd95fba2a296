// GoogleTest helpers for a project's own tests: fail a test when memory allocated inside a
// scope outlives it, or when the memory a scope allocates peaks above a limit. They watch the
// event contract (profiler/events/events.h), so they work with tensorlib and with any
// allocator that emits alloc / free_requested events; no recording or trace file is involved.
// docs/testing-helpers.md shows how to use them.
//
//   TEST(Model, ForwardFreesItsTemporaries) {
//     tidemark::testing::ExpectNoLeaks no_leaks;
//     tidemark::testing::ExpectPeakBelow peak(64 << 20);
//     run_forward();
//   }  // fails here, naming the allocation sites, if forward leaked or went over 64 MiB
#pragma once

#include <cstdint>
#include <memory>
#include <source_location>
#include <string>

#include "profiler/events/events.h"

namespace tidemark::testing {

/// Whose allocations a helper counts.
enum class Threads {
  all,          ///< every thread of the process (the default)
  this_thread,  ///< only the thread that created the helper; frees count from any thread
};

struct NoLeaksOptions {
  Threads threads = Threads::all;
  /// Native frames captured per allocation to name its site (0: none; at most 64).
  int stack_depth = 48;
  /// Frames printed per leak, from the allocation site outwards.
  int frames_shown = 4;
};

/// Fails the current test (a non-fatal failure, reported at the line that created the helper)
/// when tensors or allocator blocks allocated while it was alive are still alive when it is
/// destroyed. The message lists each one, oldest first, with its size, device and allocation
/// site: the innermost frame outside Tidemark, tensorlib and the C++ standard library, and a
/// few of its callers. A block that backs a listed tensor is not listed again.
///
/// Counts what is allocated inside the scope only: tensors and blocks that existed before it
/// may be freed or kept freely. Allocator caching is not a leak: a block counts as freed at
/// free_requested, when the caller gives it back. Thread-safe; guards may nest.
class ExpectNoLeaks {
 public:
  explicit ExpectNoLeaks(NoLeaksOptions options = {},
                         std::source_location where = std::source_location::current());
  ~ExpectNoLeaks();
  ExpectNoLeaks(const ExpectNoLeaks&) = delete;
  ExpectNoLeaks& operator=(const ExpectNoLeaks&) = delete;

  /// Tensors created inside the scope and alive now.
  size_t live_tensors() const;
  /// Blocks allocated inside the scope and not freed now, and their bytes (rounded sizes).
  size_t live_blocks() const;
  uint64_t live_bytes() const;
  /// The failure message the destructor would report now; empty when nothing is alive.
  /// Symbolizes stacks, so it is not cheap.
  std::string report() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::source_location where_;
};

struct PeakOptions {
  Threads threads = Threads::all;
};

/// Fails the current test (non-fatally, at the line that created the helper) when the
/// allocated bytes of any device rise more than `limit_bytes` above their level at the start
/// of the scope. Allocated bytes rise at alloc and drop at free_requested by the block's
/// rounded size, as tl::memory_allocated() counts them; frees of blocks allocated before the
/// scope count too, so this is the scope's peak "above where it started", like
/// max_memory_allocated() after reset_peak_memory_stats(), minus the level at the start.
/// With Threads::this_thread only blocks allocated by the creating thread count.
/// Thread-safe; guards may nest.
class ExpectPeakBelow {
 public:
  explicit ExpectPeakBelow(uint64_t limit_bytes, PeakOptions options = {},
                           std::source_location where = std::source_location::current());
  ~ExpectPeakBelow();
  ExpectPeakBelow(const ExpectPeakBelow&) = delete;
  ExpectPeakBelow& operator=(const ExpectPeakBelow&) = delete;

  uint64_t limit_bytes() const { return limit_; }
  /// The highest rise so far on `device` (0 when it saw no allocation).
  int64_t peak_bytes(events::DeviceId device) const;
  /// The highest rise so far over all devices.
  int64_t peak_bytes() const;
  /// The rise now (allocated minus the level at the start; negative when the scope freed more
  /// than it allocated).
  int64_t current_bytes(events::DeviceId device) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
  uint64_t limit_;
  std::source_location where_;
};

}  // namespace tidemark::testing

/// Runs the statements under an ExpectNoLeaks: TIDEMARK_EXPECT_NO_LEAKS({ auto t = f(); });
/// Everything declared inside is destroyed before the check.
#define TIDEMARK_EXPECT_NO_LEAKS(...)                                  \
  do {                                                                 \
    ::tidemark::testing::ExpectNoLeaks tidemark_expect_no_leaks_guard; \
    __VA_ARGS__                                                        \
  } while (false)
