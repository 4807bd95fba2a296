// A hand-built trace for the analysis tests: Builder writes events with TraceWriter and
// finalizes them; make_trace writes the base trace whose values the tests work out by hand.
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/store/trace_writer.h"

namespace analysis_test {

namespace ev = tidemark::events;
namespace st = tidemark::store;

inline std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("tidemark_analysis_" + name + "_" + std::to_string(::getpid()) + ".db"))
      .string();
}

inline void remove_trace(const std::string& path) {
  for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(path + s);
}

class Builder {
 public:
  // `rank`, `world_size`: meta keys of one rank's trace of a distributed run.
  explicit Builder(const std::string& path, const std::string& command_line = "",
                   std::optional<int64_t> rank = std::nullopt,
                   std::optional<int64_t> world_size = std::nullopt, int64_t start_unix_ns = 0)
      : path_(path) {
    remove_trace(path);
    st::TraceMeta meta;
    meta.command_line = command_line;
    meta.rank = rank;
    meta.world_size = world_size;
    meta.start_unix_ns = start_unix_ns;
    meta.start_ts_ns = 1000;
    meta.devices.push_back({ev::DeviceId{ev::DeviceType::cpu, 0}, "cpu", 0});
    w_ = st::TraceWriter::create(path, meta);
    // Stacks 1, 2, 3: single frames at 0xa1, 0xb1, 0xe1.
    w_->add_stack_node(1, 0, 0xa1);
    w_->add_stack_node(2, 0, 0xb1);
    w_->add_stack_node(3, 0, 0xe1);
  }
  ev::Event& next(ev::Kind kind, uint64_t ts) {
    e_ = ev::Event{};
    e_.kind = kind;
    e_.ts_ns = ts;
    e_.thread_id = 1;
    e_.seq = ++seq_;
    e_.device = device_;
    return e_;
  }
  // The device of the events that follow (cpu until set).
  void device(ev::DeviceId d) { device_ = d; }
  void block(ev::Kind kind, uint64_t ts, uint64_t addr, uint64_t size, uint64_t stack = 0) {
    ev::Event& e = next(kind, ts);
    e.block.addr = addr;
    e.block.size = size;
    e.block.requested_size = size;
    e.block.segment = 0x10000;
    w_->append(e, stack);
  }
  void alloc(uint64_t ts, uint64_t addr, uint64_t size, uint64_t stack,
             ev::Category category = ev::Category::unknown) {
    ev::Event& e = next(ev::Kind::alloc, ts);
    e.block.addr = addr;
    e.block.size = size;
    e.block.requested_size = size;
    e.block.segment = 0x10000;
    e.block.category = category;
    w_->append(e, stack);
  }
  void free(uint64_t ts, uint64_t addr, uint64_t size) {
    block(ev::Kind::free_requested, ts, addr, size);
    block(ev::Kind::free_completed, ts, addr, size);
  }
  // An empty_cache, alloc_retry or oom of the allocator, for a request of `requested` bytes.
  void allocator(ev::Kind kind, uint64_t ts, uint64_t requested) {
    ev::Event& e = next(kind, ts);
    e.allocator.requested_size = requested;
    w_->append(e, 0);
  }
  void step(uint64_t ts, uint64_t n) {
    ev::Event& e = next(ev::Kind::step, ts);
    e.name.value = n;
    w_->append(e, 0);
  }
  void sync(uint64_t ts, uint64_t stack) {
    ev::Event& e = next(ev::Kind::sync, ts);
    e.sync.kind = ev::SyncKind::item;
    e.sync.duration_ns = 100;
    w_->append(e, stack);
  }
  void tensor(ev::Kind kind, uint64_t ts, uint64_t id, uint64_t base) {
    ev::Event& e = next(kind, ts);
    e.tensor.tensor_id = id;
    e.tensor.storage_id = 1;
    e.tensor.base_id = base;
    e.tensor.sizes = sizes_;
    e.tensor.strides = strides_;
    e.tensor.dtype = "float32";
    e.tensor.op = base ? "view" : "empty";
    w_->append(e, 0);
  }
  // A scope_push, scope_pop or mark named `name` (any bytes).
  void named(ev::Kind kind, uint64_t ts, std::string_view name) {
    ev::Event& e = next(kind, ts);
    e.name.name = name;
    w_->append(e, 0);
  }
  void stack_node(uint64_t id, uint64_t parent, uint64_t ip) { w_->add_stack_node(id, parent, ip); }
  void commit() { w_->commit(); }  // what was appended becomes visible to readers
  void finish(uint64_t end, const st::FinalizeOptions& options = {}) {
    w_->close(end);
    w_.reset();
    st::finalize(path_, options);
  }

 private:
  std::string path_;
  std::unique_ptr<st::TraceWriter> w_;
  ev::Event e_;
  ev::DeviceId device_{};
  uint64_t seq_ = 0;
  int64_t sizes_[2] = {2, 3}, strides_[2] = {3, 1};
};

// The base trace (times in ns; the origin is the first event, t = 1000):
//   t=1000 segment_alloc 1 MiB                     reserved 1 MiB
//   t=1500 step 0
//   t=2000 alloc A 1024 @stack1 (0xa1)             allocated 1024
//   t=2100 tensor 1, t=2200 view 2 of 1, t=2300 view 2 released
//   t=2500, 2600 sync @stack2
//   t=3000 alloc B 2048 @stack2 (0xb1)             3072
//   t=4000 alloc C  512 @stack1                    3584
//   t=5000 free B                                  1536
//   t=6000 step 1
//   t=6500 sync @stack1
//   t=7000 alloc D 4096 (8192 in `bigger`) @stack2 5632 (9728): the peak
//   [bigger only: t=7100 alloc E 1024 @stack3 (10752: the peak), freed at 7200]
//   t=8000 free A                                  4608
//   t=9000 free D                                  512: C leaks (made in step 0)
// At the peak A, C (site 0xa1, 1536 bytes) and D (site 0xb1, 4096 bytes) are live.
inline void make_trace(const std::string& path, bool bigger) {
  Builder b(path);
  b.block(ev::Kind::segment_alloc, 1000, 0x10000, 1 << 20);
  b.step(1500, 0);
  b.alloc(2000, 0x10000, 1024, 1);
  b.tensor(ev::Kind::tensor_create, 2100, 1, 0);
  b.tensor(ev::Kind::tensor_create, 2200, 2, 1);
  b.tensor(ev::Kind::tensor_release, 2300, 2, 1);
  b.sync(2500, 2);
  b.sync(2600, 2);
  b.alloc(3000, 0x10400, 2048, 2);
  b.alloc(4000, 0x10c00, 512, 1);
  b.free(5000, 0x10400, 2048);
  b.step(6000, 1);
  b.sync(6500, 1);
  const uint64_t d = bigger ? 8192 : 4096;
  b.alloc(7000, 0x11000, d, 2);
  if (bigger) {
    b.alloc(7100, 0x20000, 1024, 3);
    b.free(7200, 0x20000, 1024);
  }
  b.free(8000, 0x10000, 1024);
  b.free(9000, 0x11000, d);
  b.finish(9000);
}

// A trace of reserved memory only, as CUDA injection records PyTorch (segments, no blocks), on
// cuda:0 (the meta names only the cpu). Stacks: 1 (0xa1) and 4 (0xa2) are two lines of one
// function, load_model (train.py:10 and :14); 2 (0xb1) is warmup (train.py:30). Times in ns:
//   t=1000 segment_alloc 0x100000     2 MiB @1           reserved  2 MiB
//   t=2000 segment_alloc 0x10000000  20 MiB @2 (warmup)           22 MiB
//   t=3000 segment_free  0x10000000  [kept: no free]               2 MiB [22]
//   t=4000 segment_alloc 0x200000     2 MiB, no stack              4 MiB [24]
//   t=5000 segment_map   0x40000000  24 MiB @4                    28 MiB [48]: the peak
//   t=6000 segment_unmap 0x40800000   8 MiB (the middle third)    20 MiB [40]
//   t=7000 segment_free  0x100000     2 MiB                       18 MiB [38]
// At the reserved peak (t=5000, 4000 ns after the origin): load_model 26 MiB in 2 segments
// (labelled by its line holding the most bytes, train.py:14), (no stack) 2 MiB in 1; warmup's
// segment was freed before [with keep_warmup: warmup 20 MiB in 1 too].
constexpr uint64_t kMiB = 1 << 20;
inline void make_segments_trace(const std::string& path, bool keep_warmup = false) {
  Builder b(path);
  b.stack_node(4, 0, 0xa2);
  b.device({ev::DeviceType::cuda, 0});
  b.block(ev::Kind::segment_alloc, 1000, 0x100000, 2 * kMiB, 1);
  b.block(ev::Kind::segment_alloc, 2000, 0x10000000, 20 * kMiB, 2);
  if (!keep_warmup) b.block(ev::Kind::segment_free, 3000, 0x10000000, 20 * kMiB);
  b.block(ev::Kind::segment_alloc, 4000, 0x200000, 2 * kMiB, 0);
  b.block(ev::Kind::segment_map, 5000, 0x40000000, 24 * kMiB, 4);
  b.block(ev::Kind::segment_unmap, 6000, 0x40800000, 8 * kMiB);
  b.block(ev::Kind::segment_free, 7000, 0x100000, 2 * kMiB);
  st::FinalizeOptions options;
  options.symbolize = [](uint64_t ip) -> std::vector<st::ResolvedFrame> {
    switch (ip) {
      case 0xa1:
        return {{"load_model", "/src/train.py", 10, false, ""}};
      case 0xa2:
        return {{"load_model", "/src/train.py", 14, false, ""}};
      case 0xb1:
        return {{"warmup", "/src/train.py", 30, false, ""}};
      default:
        return {};
    }
  };
  b.finish(7000, options);
}

// A test on the base trace (make_trace), written before and removed after each test.
class BaseTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = temp_path(::testing::UnitTest::GetInstance()->current_test_info()->name());
    make_trace(path_, false);
  }
  void TearDown() override { remove_trace(path_); }
  std::string path_;
};

}  // namespace analysis_test
