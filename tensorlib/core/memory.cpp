#include "tensorlib/core/memory.h"

#include <array>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string_view>

#include "tensorlib/base/error.h"
#include "tensorlib/core/cuda_hooks.h"
#include "tensorlib/memory/allocator.h"
#include "tensorlib/memory/caching_allocator.h"
#include "tensorlib/memory/host_device.h"

namespace tl {

namespace memory {

namespace {

constexpr size_t kNumTypes = 2;    // cpu, cuda
constexpr size_t kMaxIndex = 128;  // Device::Index is int8_t

struct Registry {
  std::mutex mu;
  std::array<AllocatorFactory, kNumTypes> factories{};
  std::array<std::array<std::atomic<Allocator*>, kMaxIndex>, kNumTypes> allocators{};
};

// Never destroyed: allocators must outlive every static tensor (static destruction order).
Registry& registry() {
  static auto* r = new Registry;
  return *r;
}

std::optional<size_t> host_capacity_from_env() {
  const char* env = std::getenv("TL_HOST_CAPACITY");
  if (env == nullptr || *env == '\0') return std::nullopt;
  std::string_view s(env);
  size_t bytes = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), bytes);
  TL_CHECK(ec == std::errc() && p == s.data() + s.size() && bytes > 0,
           "TL_HOST_CAPACITY must be a positive number of bytes, got '", s, "'");
  return bytes;
}

Allocator* make_cpu_allocator(Device::Index /*index*/) {
  AllocatorConfig config = AllocatorConfig::from_env();
  auto device = std::make_unique<HostDevice>(host_capacity_from_env());
  return new CachingAllocator(std::move(device), config);  // leaked on purpose (see registry)
}

}  // namespace

Allocator* get_allocator(Device device) {
  Device d = device.resolved();
  auto type = static_cast<size_t>(d.type());
  auto index = static_cast<size_t>(d.index());
  Registry& r = registry();
  if (Allocator* a = r.allocators[type][index].load(std::memory_order_acquire)) return a;
  if (d.is_cuda()) tl::detail::cuda_hooks();  // the backend registers its factory (no lock held)
  std::lock_guard<std::mutex> guard(r.mu);
  if (Allocator* a = r.allocators[type][index].load(std::memory_order_relaxed)) return a;
  AllocatorFactory factory = r.factories[type];
  if (factory == nullptr && d.is_cpu()) factory = make_cpu_allocator;
  TL_CHECK(factory != nullptr, "CUDA backend not available in this build (no allocator for ",
           d.str(), ")");
  Allocator* a = factory(d.index());
  TL_CHECK(a != nullptr, "the allocator factory for ", d.str(), " returned nullptr");
  r.allocators[type][index].store(a, std::memory_order_release);
  return a;
}

void register_allocator_factory(DeviceType type, AllocatorFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> guard(r.mu);
  r.factories[static_cast<size_t>(type)] = factory;
}

CachingAllocator* caching_allocator(Device device) {
  auto* a = dynamic_cast<CachingAllocator*>(get_allocator(device));
  TL_CHECK(a != nullptr, "the allocator of ", device.resolved().str(),
           " is not a caching allocator");
  return a;
}

}  // namespace memory

namespace {
const memory::Stat& all(const memory::StatArray& a) {
  return a[static_cast<size_t>(memory::StatType::all)];
}
}  // namespace

int64_t memory_allocated(Device device) {
  return all(memory::caching_allocator(device)->stats().allocated_bytes).current;
}
int64_t max_memory_allocated(Device device) {
  return all(memory::caching_allocator(device)->stats().allocated_bytes).peak;
}
int64_t memory_reserved(Device device) {
  return all(memory::caching_allocator(device)->stats().reserved_bytes).current;
}
int64_t max_memory_reserved(Device device) {
  return all(memory::caching_allocator(device)->stats().reserved_bytes).peak;
}
void reset_peak_memory_stats(Device device) {
  memory::caching_allocator(device)->reset_peak_stats();
}
std::map<std::string, int64_t> memory_stats(Device device) {
  return memory::flat_stats(memory::caching_allocator(device)->stats());
}
memory::Snapshot memory_snapshot(Device device) {
  return memory::caching_allocator(device)->snapshot();
}
void empty_cache(Device device) {
  memory::caching_allocator(device)->empty_cache();
}
void synchronize(Device device) {
  memory::caching_allocator(device)->synchronize();
}
void set_per_process_memory_fraction(double fraction, Device device) {
  memory::caching_allocator(device)->set_memory_fraction(fraction);
}

}  // namespace tl
