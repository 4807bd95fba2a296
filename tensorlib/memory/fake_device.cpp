#include "tensorlib/memory/fake_device.h"

#include <cstdint>
#include <iterator>
#include <utility>

#include "tensorlib/base/error.h"

namespace tl::memory {

FakeDevice::FakeDevice(size_t capacity, Device device)
    : device_(device.resolved()), capacity_(capacity) {}

uintptr_t FakeDevice::next_address(uintptr_t previous, size_t previous_size) {
  if (previous == 0) return kFirstAddress;
  uintptr_t end = previous + previous_size;
  return (end + kAddressGap - 1) / kAddressGap * kAddressGap + kAddressGap;
}

bool FakeDevice::take(size_t nbytes) {
  if (fail_next_ > 0) {
    --fail_next_;
    ++counters_.failed_alloc;
    return false;
  }
  if (nbytes > capacity_ || in_use_ > capacity_ - nbytes) {
    ++counters_.failed_alloc;
    return false;
  }
  in_use_ += nbytes;
  return true;
}

uintptr_t FakeDevice::place(size_t nbytes) {
  uintptr_t want = std::exchange(preferred_, 0);
  if (want != 0 && want <= UINTPTR_MAX - nbytes) {
    auto overlaps = [&](const std::map<uintptr_t, size_t>& live) {
      auto it = live.lower_bound(want + nbytes);  // first starting at or after the end
      return it != live.begin() && std::prev(it)->first + std::prev(it)->second > want;
    };
    if (!overlaps(segments_) && !overlaps(ranges_)) return want;
  }
  // A new address after the highest one handed out, so it never meets a live one.
  uintptr_t top = last_address_;
  size_t top_size = last_size_;
  for (const auto* live : {&segments_, &ranges_}) {
    if (!live->empty() && live->rbegin()->first > top) {
      top = live->rbegin()->first;
      top_size = live->rbegin()->second;
    }
  }
  last_address_ = next_address(top, top_size);
  last_size_ = nbytes;
  return last_address_;
}

void* FakeDevice::raw_alloc(size_t nbytes) {
  std::lock_guard<std::mutex> guard(mu_);
  if (nbytes == 0 || !take(nbytes)) {
    preferred_ = 0;
    return nullptr;
  }
  uintptr_t addr = place(nbytes);
  segments_[addr] = nbytes;
  ++counters_.raw_alloc;
  return reinterpret_cast<void*>(addr);
}

void FakeDevice::raw_free(void* ptr, size_t nbytes) {
  std::lock_guard<std::mutex> guard(mu_);
  auto it = segments_.find(reinterpret_cast<uintptr_t>(ptr));
  TL_INTERNAL_ASSERT(it != segments_.end() && it->second == nbytes,
                     "raw_free of an address FakeDevice did not hand out");
  segments_.erase(it);
  in_use_ -= nbytes;
  ++counters_.raw_free;
}

MemoryInfo FakeDevice::memory_info() {
  std::lock_guard<std::mutex> guard(mu_);
  return {capacity_ > in_use_ ? capacity_ - in_use_ : 0, capacity_};
}

EventId FakeDevice::record_event(StreamId stream) {
  std::lock_guard<std::mutex> guard(mu_);
  EventId id = next_event_++;
  events_[id] = {stream, false};
  ++counters_.events_recorded;
  return id;
}

bool FakeDevice::query_event(EventId event) {
  std::lock_guard<std::mutex> guard(mu_);
  auto it = events_.find(event);
  TL_INTERNAL_ASSERT(it != events_.end(), "query of an unknown event");
  return it->second.second;
}

void FakeDevice::synchronize_event(EventId event) {
  std::lock_guard<std::mutex> guard(mu_);
  auto it = events_.find(event);
  TL_INTERNAL_ASSERT(it != events_.end(), "synchronize of an unknown event");
  it->second.second = true;
  ++counters_.event_syncs;
}

void FakeDevice::destroy_event(EventId event) {
  std::lock_guard<std::mutex> guard(mu_);
  TL_INTERNAL_ASSERT(events_.erase(event) == 1, "destroy of an unknown event");
}

void FakeDevice::synchronize_device() {
  std::lock_guard<std::mutex> guard(mu_);
  for (auto& [id, ev] : events_) ev.second = true;
  ++counters_.device_syncs;
}

void* FakeDevice::reserve_range(size_t nbytes) {
  std::lock_guard<std::mutex> guard(mu_);
  if (!expandable_ || nbytes == 0) {
    preferred_ = 0;
    return nullptr;
  }
  uintptr_t addr = place(nbytes);
  ranges_[addr] = nbytes;
  return reinterpret_cast<void*>(addr);
}

bool FakeDevice::map(void* base, size_t offset, size_t nbytes) {
  std::lock_guard<std::mutex> guard(mu_);
  auto it = ranges_.find(reinterpret_cast<uintptr_t>(base));
  TL_INTERNAL_ASSERT(it != ranges_.end() && offset + nbytes <= it->second,
                     "map outside a reserved range");
  if (!take(nbytes)) return false;
  ++counters_.map;
  return true;
}

void FakeDevice::unmap(void* base, size_t offset, size_t nbytes) {
  std::lock_guard<std::mutex> guard(mu_);
  // The allocator may unmap a range that spans several chunks it mapped, or part of one; the
  // fake only checks the bytes add up.
  TL_INTERNAL_ASSERT(ranges_.count(reinterpret_cast<uintptr_t>(base)) == 1,
                     "unmap outside a reserved range");
  TL_INTERNAL_ASSERT(in_use_ >= nbytes);
  in_use_ -= nbytes;
  ++counters_.unmap;
  (void)offset;
}

void FakeDevice::release_range(void* base, size_t nbytes) {
  std::lock_guard<std::mutex> guard(mu_);
  auto it = ranges_.find(reinterpret_cast<uintptr_t>(base));
  TL_INTERNAL_ASSERT(it != ranges_.end() && it->second == nbytes, "release of an unknown range");
  ranges_.erase(it);
}

void FakeDevice::set_capacity(size_t bytes) {
  std::lock_guard<std::mutex> guard(mu_);
  capacity_ = bytes;
}

void FakeDevice::fail_next_allocs(int n) {
  std::lock_guard<std::mutex> guard(mu_);
  fail_next_ = n;
}

void FakeDevice::complete_event(EventId event) {
  std::lock_guard<std::mutex> guard(mu_);
  auto it = events_.find(event);
  if (it != events_.end()) it->second.second = true;
}

void FakeDevice::prefer_address(uintptr_t addr) {
  std::lock_guard<std::mutex> guard(mu_);
  preferred_ = addr;
}

EventId FakeDevice::next_event_id() const {
  std::lock_guard<std::mutex> guard(mu_);
  return next_event_;
}

void FakeDevice::complete_all() {
  std::lock_guard<std::mutex> guard(mu_);
  for (auto& [id, ev] : events_) ev.second = true;
}

FakeDevice::Counters FakeDevice::counters() const {
  std::lock_guard<std::mutex> guard(mu_);
  return counters_;
}

size_t FakeDevice::bytes_in_use() const {
  std::lock_guard<std::mutex> guard(mu_);
  return in_use_;
}

std::vector<std::pair<EventId, StreamId>> FakeDevice::pending_events() const {
  std::lock_guard<std::mutex> guard(mu_);
  std::vector<std::pair<EventId, StreamId>> out;
  for (const auto& [id, ev] : events_)
    if (!ev.second) out.push_back({id, ev.first});
  return out;
}

size_t FakeDevice::live_events() const {
  std::lock_guard<std::mutex> guard(mu_);
  return events_.size();
}

}  // namespace tl::memory
