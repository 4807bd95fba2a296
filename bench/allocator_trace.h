// Traces recorded through the caching allocator itself, as the recorder would stamp them: the
// input of bench/replay_bench.cpp and bench/predict_bench.cpp. And their `--events N` option.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "profiler/events/events.h"
#include "profiler/store/trace_writer.h"

namespace tidemark::bench {

// Stamps what one allocator emits as the recorder would: one time per allocator call, thread 1,
// the stack of the site that made the call (tick(site)), else one of 64 stacks in turn.
class AllocatorTraceSink final : public events::Sink {
 public:
  explicit AllocatorTraceSink(store::TraceWriter& w) : w_(w) {}
  void on_event(const events::Event& e) noexcept override {
    events::Event c = e;
    c.ts_ns = now_;
    c.thread_id = 1;
    c.seq = ++seq_;
    w_.append(c, site_ ? site_ : 1 + seq_ % 64);
    ++events_;
  }
  void tick(uint64_t site = 0) {
    now_ += 500;
    site_ = site;
  }
  uint64_t now() const { return now_; }
  uint64_t events() const { return events_; }

 private:
  store::TraceWriter& w_;
  uint64_t now_ = 1'000'000'000, seq_ = 0, events_ = 0, site_ = 0;
};

// `--events N` (default `fallback`), taken out of argv; the rest stays for Google Benchmark.
inline uint64_t take_events_option(int& argc, char** argv, uint64_t fallback) {
  uint64_t n = fallback;
  int out = 0;
  for (int i = 0; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--events") && i + 1 < argc) {
      n = std::strtoull(argv[++i], nullptr, 10);
      continue;
    }
    argv[out++] = argv[i];
  }
  argc = out;
  return n;
}

}  // namespace tidemark::bench
