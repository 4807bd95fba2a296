// Synthetic CUPTI activity buffers (records of every kind the parser reads, laid out as CUPTI
// 13 writes them) go through the real buffer_requested / buffer_completed path, the parser
// thread and the recorder into a finalized trace, whose rows are checked exactly.
#include "interpose/activity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "interpose/tests/synthetic_cupti.h"
#include "interpose/tests/trace_rows.h"
#include "profiler/record/recorder.h"

namespace ia = tidemark::interpose::activity;
using ::testing::ElementsAre;
using namespace tidemark::interpose::testing;

namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kDev = 0x7f0000000000, kManaged = 0x7e0000000000, kPool = 0x7d0000000000;

void pool_op(Buffer& b, CUpti_ActivityMemoryPoolOperationType op, uint64_t size, uint64_t ts) {
  auto& r = b.add<CUpti_ActivityMemoryPool3>();
  r.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
  r.memoryPoolOperationType = op;
  r.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
  r.address = kPool;
  r.size = size;
  r.timestamp = ts;
}

std::string n(uint64_t v) {
  return std::to_string(static_cast<int64_t>(v));
}

TEST(InterposeActivity, BuffersBecomeSegmentsCopiesAndSyncs) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tidemark_activity_" + std::to_string(getpid()) + ".db"))
                               .string();
  tidemark::record::Options options;
  options.path = path;
  tidemark::record::start(options);
  ASSERT_TRUE(ia::start(/*with_cupti=*/false));
  const uint64_t t = tidemark::events::now_ns() + 1000;

  Buffer b1;
  memory(b1, true, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, kDev, 2 * kMiB, t + 100);
  memory(b1, true, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 0x10000, 65536, t + 200);
  memory(b1, true, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, kManaged, kMiB, t + 300);
  pool_op(b1, CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, 0, t + 400);
  for (bool alloc : {true, false}) {  // cudaMallocAsync / cudaFreeAsync from the pool
    auto& r = memory(b1, alloc, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, kPool, kMiB,
                     alloc ? t + 500 : t + 600);
    r.streamId = 7;
    r.isAsync = 1;
    r.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    r.memoryPoolConfig.address = kPool;
    r.memoryPoolConfig.pool.size = 2 * kMiB;
  }
  pool_op(b1, CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED, 0, t + 700);
  b1.complete();

  Buffer b2;
  memcpy_rec(b2, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
             CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, true, 4096, t + 800, t + 900, 0, 1, 7);
  // cudaMemcpy device -> pageable host: blocking, the host waits for it.
  memcpy_rec(b2, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
             CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, false, 8192, t + 1000, t + 1500, 0, 1,
             CUPTI_INVALID_STREAM_ID);
  // cudaMemcpyAsync device -> pinned host on device 1: no wait.
  memcpy_rec(b2, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
             CUPTI_ACTIVITY_MEMORY_KIND_PINNED, true, 16384, t + 1600, t + 1700, 1, 2, 3);
  auto& memset = b2.add<CUpti_ActivityMemset4>();
  memset.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  memset.start = t + 1750;
  sync_rec(b2, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, t + 1800, t + 2000, 1, 7);
  sync_rec(b2, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, t + 2100, t + 2400, 1,
           CUPTI_INVALID_STREAM_ID);
  sync_rec(b2, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, t + 2500, t + 2600, 2,
           CUPTI_INVALID_STREAM_ID);
  sync_rec(b2, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, t + 2650, t + 2660, 1, 7);
  memory(b2, false, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, kDev, 2 * kMiB, t + 2700);
  auto& marker = b2.add<CUpti_ActivityMarker2>();
  marker.kind = CUPTI_ACTIVITY_KIND_MARKER;
  marker.flags = CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS;
  marker.timestamp = t + 2800;
  marker.name = "checkpoint";
  b2.complete();

  ia::stop();
  tidemark::record::stop();

  auto ts = [&](uint64_t dt) { return n(t + dt); };
  EXPECT_THAT(rows(path,
                   "SELECT d.type, d.idx, s.kind, s.addr, s.size, s.segment, s.alloc_ts, "
                   "ifnull(s.free_ts, 'open') FROM segments s JOIN devices d ON d.id = s.device "
                   "ORDER BY s.seq"),
              ElementsAre("cuda|0|segment|" + n(kDev) + "|" + n(2 * kMiB) + "|" + n(kDev) + "|" +
                              ts(100) + "|" + ts(2700),
                          "cpu|0|segment|65536|65536|65536|" + ts(200) + "|open",
                          "cuda|0|segment|" + n(kManaged) + "|" + n(kMiB) + "|" + n(kManaged) +
                              "|" + ts(300) + "|open",
                          "cuda|0|mapped|" + n(kPool) + "|" + n(2 * kMiB) + "|" + n(kPool) + "|" +
                              ts(500) + "|" + ts(700)));
  EXPECT_THAT(rows(path,
                   "SELECT d.type, d.idx, a.addr, a.size, a.segment, a.stream, a.alloc_ts, "
                   "a.free_requested_ts, a.free_completed_ts FROM allocations a "
                   "JOIN devices d ON d.id = a.device ORDER BY a.seq"),
              ElementsAre("cuda|0|" + n(kPool) + "|" + n(kMiB) + "|" + n(kPool) + "|7|" + ts(500) +
                          "|" + ts(600) + "|" + ts(600)));
  EXPECT_THAT(rows(path,
                   "SELECT m.ts, d.type, d.idx, m.direction, m.bytes, m.stream, m.pinned, m.async "
                   "FROM memcpys m JOIN devices d ON d.id = m.device ORDER BY m.seq"),
              ElementsAre(ts(800) + "|cuda|0|host_to_device|4096|7|1|1",
                          ts(1000) + "|cuda|0|device_to_host|8192|0|0|0",
                          ts(1600) + "|cuda|1|device_to_host|16384|3|1|1"));
  EXPECT_THAT(
      rows(path,
           "SELECT s.ts, d.type, d.idx, s.kind, s.duration_ns, s.stream FROM syncs s "
           "JOIN devices d ON d.id = s.device ORDER BY s.seq"),
      ElementsAre(ts(1500) + "|cuda|0|copy_to_host|500|0", ts(2000) + "|cuda|0|stream|200|7",
                  ts(2400) + "|cuda|0|device|300|0", ts(2600) + "|cuda|1|event|100|0"));
  EXPECT_THAT(rows(path,
                   "SELECT m.ts, s.text, m.value FROM marks m JOIN strings s ON s.id = m.name "
                   "ORDER BY m.seq"),
              ElementsAre(ts(2800) + "|checkpoint|0"));
  std::filesystem::remove(path);
}

// A buffer CUPTI completes with no valid bytes (a flush with nothing recorded) is recycled.
TEST(InterposeActivity, EmptyBufferIsHarmless) {
  ASSERT_TRUE(ia::start(false));
  Buffer b;
  b.complete();
  ia::stop();
  EXPECT_EQ(ia::dropped_records(), 0u);
}

}  // namespace
