// Sizes, times and devices as people write and read them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "profiler/events/events.h"

namespace tidemark::analysis {

// "512MiB", "2GiB", "1.5GB", "64k", "1e9", "4096" -> bytes. Binary suffixes (KiB, MiB, GiB,
// TiB; K, M, G, T alone) are powers of 1024, decimal ones (kB, MB, GB, TB) powers of 1000; a
// trailing "B" is optional. Empty on anything else (negative, overflow, junk).
std::optional<uint64_t> parse_size(std::string_view s);
// "1.5s", "200ms", "10us", "123456ns", "2m" (minutes), "3h"; a bare number is nanoseconds.
std::optional<uint64_t> parse_duration_ns(std::string_view s);

// 1536 -> "1.50 KiB", 512 -> "512 B".
std::string format_bytes(int64_t bytes);
// 1234567 -> "1,234,567", -1000 -> "-1,000".
std::string with_commas(int64_t v);
// 1500000 -> "1.50 ms".
std::string format_duration(uint64_t ns);
// A time since the trace's origin as people read it: "2.053 s"; in a trace whose times are
// the order of a snapshot's entries (Trace::synthetic_times), "event 5553".
std::string format_time_point(uint64_t rel_ns, bool synthetic_times, int decimals = 3);

// A trace's lost events as every report says them (Note [Counted losses] in
// profiler/store/trace_writer.h): "3 dropped"; when the count is not every loss (`counted`
// false), "at least 3 dropped, more uncounted", or "an uncounted number dropped" for none.
std::string format_dropped(uint64_t dropped, bool counted);

// "cpu" (cpu:0), "cpu:1", "cuda:0": a device as every report and export names it.
std::string device_name(events::DeviceId id);

}  // namespace tidemark::analysis
