#include "tensorlib/memory/stats.h"

namespace tl::memory {

namespace {

template <typename F>
void for_each_array(DeviceStats& s, F&& f) {
  for (StatArray* a :
       {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
        &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes})
    for (Stat& stat : *a) f(stat);
  f(s.oversize_allocations);
  f(s.oversize_segments);
}

void add_stat(std::map<std::string, int64_t>& out, const std::string& prefix, const Stat& s) {
  out[prefix + ".current"] = s.current;
  out[prefix + ".peak"] = s.peak;
  out[prefix + ".allocated"] = s.allocated;
  out[prefix + ".freed"] = s.freed;
}

}  // namespace

void DeviceStats::reset_peak() {
  for_each_array(*this, [](Stat& s) { s.reset_peak(); });
}

void DeviceStats::reset_accumulated() {
  for_each_array(*this, [](Stat& s) { s.reset_accumulated(); });
  num_alloc_retries = 0;
  num_ooms = 0;
  num_sync_all_streams = 0;
  num_device_alloc = 0;
  num_device_free = 0;
}

std::map<std::string, int64_t> flat_stats(const DeviceStats& s) {
  std::map<std::string, int64_t> out;
  const std::pair<const char*, const StatArray*> arrays[] = {
      {"allocation", &s.allocation},
      {"segment", &s.segment},
      {"active", &s.active},
      {"inactive_split", &s.inactive_split},
      {"allocated_bytes", &s.allocated_bytes},
      {"reserved_bytes", &s.reserved_bytes},
      {"active_bytes", &s.active_bytes},
      {"inactive_split_bytes", &s.inactive_split_bytes},
      {"requested_bytes", &s.requested_bytes},
  };
  const char* types[] = {"all", "small_pool", "large_pool"};
  for (const auto& [name, array] : arrays)
    for (size_t t = 0; t < kNumStatTypes; ++t)
      add_stat(out, std::string(name) + "." + types[t], (*array)[t]);
  add_stat(out, "oversize_allocations", s.oversize_allocations);
  add_stat(out, "oversize_segments", s.oversize_segments);
  out["num_alloc_retries"] = s.num_alloc_retries;
  out["num_ooms"] = s.num_ooms;
  out["num_sync_all_streams"] = s.num_sync_all_streams;
  out["num_device_alloc"] = s.num_device_alloc;
  out["num_device_free"] = s.num_device_free;
  out["max_split_size"] = s.max_split_size;
  return out;
}

}  // namespace tl::memory
