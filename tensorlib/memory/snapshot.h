// Snapshot: the allocator's segments and blocks at one moment, in the shape of PyTorch's
// torch.cuda.memory_snapshot() (docs/allocator.md, "Snapshot").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "profiler/events/events.h"

namespace tl::memory {

enum class BlockState : uint8_t {
  active_allocated,     // handed to a caller
  active_pending_free,  // freed by the caller, still in use by another stream (Note [Deferred
                        // frees])
  inactive,             // cached, reusable
};

constexpr std::string_view block_state_name(BlockState s) {
  constexpr std::string_view names[] = {"active_allocated", "active_pending_free", "inactive"};
  return names[static_cast<int>(s)];
}

struct BlockSnapshot {
  uint64_t address = 0;
  size_t size = 0;            // rounded size
  size_t requested_size = 0;  // 0 for inactive blocks
  BlockState state = BlockState::inactive;
};

struct SegmentSnapshot {
  uint64_t address = 0;
  size_t total_size = 0;
  size_t allocated_size = 0;  // blocks in state active_allocated
  size_t active_size = 0;     // active_allocated + active_pending_free
  size_t requested_size = 0;  // requested sizes of the active blocks
  uint64_t stream = 0;
  tidemark::events::Pool pool = tidemark::events::Pool::small;
  bool is_expandable = false;         // one mapped run of an expandable segment
  std::vector<BlockSnapshot> blocks;  // by address; they tile [address, address + total_size)

  std::string_view segment_type() const {
    return pool == tidemark::events::Pool::small ? "small" : "large";
  }
};

struct Snapshot {
  tidemark::events::DeviceId device;
  std::vector<SegmentSnapshot> segments;  // by address
};

}  // namespace tl::memory
