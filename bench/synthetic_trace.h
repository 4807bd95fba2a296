// A synthetic training-like trace of any size, written and finalized: the input of
// bench/analysis_bench.cpp and gui/bench/gui_bench.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "profiler/store/trace_writer.h"

namespace tidemark::bench {

namespace ev = tidemark::events;
namespace st = tidemark::store;

// A training-like pattern: steps of ~1000 events, each allocating activations that live until
// the step's end and temporaries freed at once, from 64 sites; a sync per step; a new 20 MiB
// segment every 100k events; ~0.5 us between events.
inline void generate_synthetic_trace(const std::string& path, uint64_t n_events) {
  st::TraceMeta meta;
  meta.command_line = "analysis_bench synthetic";
  meta.start_ts_ns = 1'000'000'000;
  meta.devices.push_back(
      {ev::DeviceId{ev::DeviceType::cuda, 0}, "cuda:0 (synthetic)", 80ull << 30});
  auto w = st::TraceWriter::create(path, meta);
  for (uint64_t i = 1; i <= 64; ++i) w->add_stack_node(i, 0, 0x400000 + i * 16);
  ev::Event e;
  e.thread_id = 1;
  e.device = ev::DeviceId{ev::DeviceType::cuda, 0};
  uint64_t seq = 0, ts = meta.start_ts_ns, step = 0, next_addr = 0x7f0000000000;
  std::vector<std::pair<uint64_t, uint64_t>> step_live;  // (addr, size) freed at step end
  auto append_event = [&](ev::Kind kind, uint64_t stack) {
    e.kind = kind;
    e.seq = ++seq;
    e.ts_ns = (ts += 400 + (seq * 2654435761u) % 200);
    w->append(e, stack);
  };
  auto block = [&](ev::Kind kind, uint64_t addr, uint64_t size, uint64_t stack) {
    e.block = ev::BlockInfo{};
    e.block.addr = addr;
    e.block.size = size;
    e.block.requested_size = size;
    e.block.segment = addr & ~uint64_t{(20 << 20) - 1};
    e.block.pool = size > (1 << 20) ? ev::Pool::large : ev::Pool::small;
    append_event(kind, stack);
  };
  while (seq < n_events) {
    if (seq % 100000 < 300) block(ev::Kind::segment_alloc, next_addr + (1ull << 40), 20 << 20, 0);
    e.name = ev::NameInfo{};
    e.name.value = step++;
    append_event(ev::Kind::step, 0);
    for (int k = 0; k < 120 && seq < n_events; ++k) {
      uint64_t site = 1 + (seq * 7919) % 64;
      uint64_t size = 512 * (1 + (seq * 104729) % 4096);
      uint64_t addr = (next_addr += size);
      block(ev::Kind::alloc, addr, size, site);
      if (k % 3 == 0) {
        step_live.emplace_back(addr, size);  // an activation, freed at the step's end
      } else {
        block(ev::Kind::free_requested, addr, size, 0);
        block(ev::Kind::free_completed, addr, size, 0);
      }
    }
    e.sync = ev::SyncInfo{};
    e.sync.kind = ev::SyncKind::item;
    e.sync.duration_ns = 1000;
    append_event(ev::Kind::sync, 1);
    for (auto [addr, size] : step_live) {
      block(ev::Kind::free_requested, addr, size, 0);
      block(ev::Kind::free_completed, addr, size, 0);
    }
    step_live.clear();
    if (seq % 8192 < 400) w->commit();
  }
  w->close(ts);
  w.reset();
  st::finalize(path);
}

}  // namespace tidemark::bench
