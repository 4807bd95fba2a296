// tl::OutOfMemoryError: what the caching allocator throws when a request cannot be met even
// after freeing its cache. The message follows PyTorch's "CUDA out of memory" text; the
// numbers and a snapshot of the allocator travel with it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "tensorlib/base/error.h"
#include "tensorlib/memory/snapshot.h"

namespace tl {

class OutOfMemoryError : public Error {
 public:
  struct Details {
    std::string device;           // "cpu", "cuda:0"
    size_t requested_bytes = 0;   // what the caller asked for
    size_t allocation_bytes = 0;  // what the allocator tried to get (segment size)
    size_t device_free = 0;
    size_t device_total = 0;
    size_t allocated = 0;  // allocated_bytes.all.current
    size_t reserved = 0;   // reserved_bytes.all.current
    size_t allowed = 0;    // set_memory_fraction's limit; 0 = none
  };

  OutOfMemoryError(Details details, memory::Snapshot snapshot);

  const Details& details() const { return details_; }
  size_t requested_bytes() const { return details_.requested_bytes; }
  size_t allocation_bytes() const { return details_.allocation_bytes; }
  size_t device_free() const { return details_.device_free; }
  size_t device_total() const { return details_.device_total; }
  size_t allocated() const { return details_.allocated; }
  size_t reserved() const { return details_.reserved; }
  /// The allocator's segments at the moment of the failure.
  const memory::Snapshot& snapshot() const { return *snapshot_; }

 private:
  Details details_;
  std::shared_ptr<const memory::Snapshot> snapshot_;  // shared: exceptions are copied
};

namespace memory {
/// PyTorch's format_size: "512 bytes", "1.50 KiB", "2.00 MiB", "3.25 GiB".
std::string format_size(uint64_t bytes);
}  // namespace memory

}  // namespace tl
