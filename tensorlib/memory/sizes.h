// The sizes of PyTorch's CUDA caching allocator policy (docs/allocator.md; the policy itself is
// stated at the top of caching_allocator.cpp). Dependency-free, so that what reads the
// allocator's traces (the snapshot importer, the diagnoses) uses the allocator's own numbers
// rather than restate them.
#pragma once

#include <cstddef>

namespace tl::memory {

inline constexpr size_t kMinBlockSize = 512;                // bytes: smallest block, rounding unit
inline constexpr size_t kSmallSize = size_t{1} << 20;       // 1 MiB: largest small-pool request
inline constexpr size_t kSmallBuffer = size_t{2} << 20;     // 2 MiB: small-pool segment
inline constexpr size_t kLargeBuffer = size_t{20} << 20;    // 20 MiB: segment for requests < 10 MiB
inline constexpr size_t kMinLargeAlloc = size_t{10} << 20;  // 10 MiB: from here segments fit
inline constexpr size_t kRoundLarge = size_t{2} << 20;      // 2 MiB: rounding of large segments

}  // namespace tl::memory
