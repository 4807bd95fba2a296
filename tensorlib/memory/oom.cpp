#include "tensorlib/memory/oom.h"

#include <sstream>

namespace tl {

namespace {
std::string oom_message(const OutOfMemoryError::Details& d) {
  using memory::format_size;
  std::ostringstream os;
  os << "Out of memory on device " << d.device << ". Tried to allocate "
     << format_size(d.allocation_bytes) << ". Device " << d.device << " has a total capacity of "
     << format_size(d.device_total) << " of which " << format_size(d.device_free) << " is free. ";
  if (d.allowed != 0) os << format_size(d.allowed) << " allowed; ";
  os << "Of the allocated memory " << format_size(d.allocated) << " is allocated by tensorlib, and "
     << format_size(d.reserved > d.allocated ? d.reserved - d.allocated : 0)
     << " is reserved by tensorlib but unallocated. If reserved but unallocated memory is large "
        "try setting TL_ALLOC_CONF=expandable_segments:True to avoid fragmentation.";
  return os.str();
}
}  // namespace

OutOfMemoryError::OutOfMemoryError(Details details, memory::Snapshot snapshot)
    : Error(oom_message(details)),
      details_(std::move(details)),
      snapshot_(std::make_shared<const memory::Snapshot>(std::move(snapshot))) {}

namespace memory {
std::string format_size(uint64_t bytes) {
  std::ostringstream os;
  os.precision(2);
  os << std::fixed;
  if (bytes <= 1024) {
    os << bytes << " bytes";
  } else if (bytes <= (uint64_t{1} << 20)) {
    os << static_cast<double>(bytes) / 1024.0 << " KiB";
  } else if (bytes <= (uint64_t{1} << 30)) {
    os << static_cast<double>(bytes) / 1048576.0 << " MiB";
  } else {
    os << static_cast<double>(bytes) / 1073741824.0 << " GiB";
  }
  return os.str();
}
}  // namespace memory

}  // namespace tl
