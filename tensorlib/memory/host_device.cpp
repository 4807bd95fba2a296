#include "tensorlib/memory/host_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>

#include "tensorlib/base/error.h"

namespace tl::memory {

namespace {
size_t physical_memory() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
}
size_t available_memory() {
  long pages = sysconf(_SC_AVPHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
}
}  // namespace

HostDevice::HostDevice(std::optional<size_t> capacity) : capacity_(capacity) {}

bool HostDevice::take(size_t nbytes) {
  std::lock_guard<std::mutex> guard(mu_);
  if (capacity_ && (nbytes > *capacity_ || in_use_ > *capacity_ - nbytes)) return false;
  in_use_ += nbytes;
  return true;
}

void HostDevice::give_back(size_t nbytes) {
  std::lock_guard<std::mutex> guard(mu_);
  TL_INTERNAL_ASSERT(in_use_ >= nbytes);
  in_use_ -= nbytes;
}

size_t HostDevice::bytes_in_use() const {
  std::lock_guard<std::mutex> guard(mu_);
  return in_use_;
}

void* HostDevice::raw_alloc(size_t nbytes) {
  if (nbytes == 0 || !take(nbytes)) return nullptr;
  size_t padded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, padded);
  if (p == nullptr) give_back(nbytes);
  return p;
}

void HostDevice::raw_free(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  std::free(ptr);
  give_back(nbytes);
}

MemoryInfo HostDevice::memory_info() {
  if (capacity_) {
    std::lock_guard<std::mutex> guard(mu_);
    return {*capacity_ - in_use_, *capacity_};
  }
  return {available_memory(), physical_memory()};
}

// Note [Host expandable segments]
// The host mirrors cuMemAddressReserve/cuMemMap with mmap: reserve_range maps PROT_NONE with
// MAP_NORESERVE (address space only), map makes pages readable and writable (the kernel backs
// them on first touch), unmap drops the pages with MADV_DONTNEED and makes them inaccessible
// again, release_range munmaps the whole range.
void* HostDevice::reserve_range(size_t nbytes) {
  void* p = mmap(nullptr, nbytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

bool HostDevice::map(void* base, size_t offset, size_t nbytes) {
  if (!take(nbytes)) return false;
  if (mprotect(static_cast<char*>(base) + offset, nbytes, PROT_READ | PROT_WRITE) != 0) {
    give_back(nbytes);
    return false;
  }
  return true;
}

void HostDevice::unmap(void* base, size_t offset, size_t nbytes) {
  char* p = static_cast<char*>(base) + offset;
  madvise(p, nbytes, MADV_DONTNEED);
  mprotect(p, nbytes, PROT_NONE);
  give_back(nbytes);
}

void HostDevice::release_range(void* base, size_t nbytes) {
  munmap(base, nbytes);
}

}  // namespace tl::memory
