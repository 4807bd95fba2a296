// The caching allocator's size policy (PyTorch's): how a request is rounded into a block, and
// how large a segment is reserved for a block that fits no cached one (docs/allocator.md).
#include <bit>

#include "tensorlib/memory/caching_allocator.h"
#include "tensorlib/memory/caching_allocator_blocks.h"

namespace tl::memory {

using allocator_detail::align_up;

size_t CachingAllocator::round_size(size_t nbytes, const AllocatorConfig& config) {
  if (nbytes < kMinBlockSize) return kMinBlockSize;
  size_t divisions = config.divisions_for(nbytes);
  if (divisions > 1 && nbytes > kMinBlockSize * divisions) {
    // nbytes > 512 x divisions, so each step (floor power of two / divisions) is a power of
    // two of at least 512 bytes and blocks stay multiples of kMinBlockSize.
    size_t floor = std::bit_floor(nbytes);
    if (floor == nbytes) return nbytes;
    return align_up(nbytes, floor / divisions);
  }
  return align_up(nbytes, kMinBlockSize);
}

size_t CachingAllocator::allocation_size(size_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return align_up(rounded, kRoundLarge);
}

}  // namespace tl::memory
