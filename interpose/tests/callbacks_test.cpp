// The Callback API half of interpose (Note [Call sites]): the callback is driven with
// constructed CUpti_CallbackData on a thread of the "program", then synthetic activity records
// with the same correlation ids go through the real buffer-completed path; the trace's events
// must carry the program thread, the stack captured at the call (the function that made it,
// innermost) and the call's place in seq order.
#include "interpose/callbacks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "interpose/activity.h"
#include "interpose/tests/synthetic_cupti.h"
#include "interpose/tests/trace_rows.h"
#include "profiler/events/annotate.h"
#include "profiler/record/recorder.h"
#include "profiler/store/trace_reader.h"

namespace ia = tidemark::interpose::activity;
namespace cb = tidemark::interpose::callbacks;
namespace ev = tidemark::events;
using ::testing::ElementsAre;
using namespace tidemark::interpose::testing;

namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kDev = 0x7f0000000000, kPool = 0x7d0000000000, kVa = 0x7c0000000000;
constexpr CUpti_CallbackDomain kRt = CUPTI_CB_DOMAIN_RUNTIME_API;
constexpr CUpti_CallbackDomain kDrv = CUPTI_CB_DOMAIN_DRIVER_API;

// The "program": each function makes one CUDA call, as CUPTI would report it. They call
// on_api themselves so that they are the innermost frame of the captured stack.
[[gnu::noinline]] void program_calls_cuda_malloc(uint32_t rt, uint32_t drv) {
  auto enter = callback_data(CUPTI_API_ENTER, rt), exit = callback_data(CUPTI_API_EXIT, rt);
  auto drv_enter = callback_data(CUPTI_API_ENTER, drv),
       drv_exit = callback_data(CUPTI_API_EXIT, drv);
  cb::on_api(nullptr, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, &enter);
  // cudaMalloc reaches the driver: a nested call with a correlation id of its own.
  cb::on_api(nullptr, kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &drv_enter);
  cb::on_api(nullptr, kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &drv_exit);
  cb::on_api(nullptr, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, &exit);
  asm volatile("" ::: "memory");  // no tail call: this frame stays on the stack
}

[[gnu::noinline]] void program_copies_to_host(uint32_t rt) {
  auto enter = callback_data(CUPTI_API_ENTER, rt), exit = callback_data(CUPTI_API_EXIT, rt);
  cb::on_api(nullptr, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, &enter);
  cb::on_api(nullptr, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, &exit);
  asm volatile("" ::: "memory");
}

[[gnu::noinline]] void program_allocates_from_pool(uint32_t rt) {
  auto enter = callback_data(CUPTI_API_ENTER, rt), exit = callback_data(CUPTI_API_EXIT, rt);
  cb::on_api(nullptr, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020, &enter);
  cb::on_api(nullptr, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020, &exit);
  asm volatile("" ::: "memory");
}

[[gnu::noinline]] void program_synchronizes(uint32_t rt) {
  auto enter = callback_data(CUPTI_API_ENTER, rt), exit = callback_data(CUPTI_API_EXIT, rt);
  cb::on_api(nullptr, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, &enter);
  cb::on_api(nullptr, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, &exit);
  asm volatile("" ::: "memory");
}

[[gnu::noinline]] void program_fails_cuda_malloc(uint32_t rt) {
  const int out_of_memory = 2;  // cudaErrorMemoryAllocation
  auto enter = callback_data(CUPTI_API_ENTER, rt),
       exit = callback_data(CUPTI_API_EXIT, rt, nullptr, &out_of_memory);
  cb::on_api(nullptr, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, &enter);
  cb::on_api(nullptr, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, &exit);
  asm volatile("" ::: "memory");
}

// PyTorch's expandable segments: reserve a range, create physical memory on device 1, map it.
[[gnu::noinline]] void program_maps_memory(uint32_t first) {
  CUdeviceptr va = 0;
  cuMemAddressReserve_params reserve{&va, 64 * kMiB, 0, 0, 0};
  auto r_enter = callback_data(CUPTI_API_ENTER, first, &reserve);
  cb::on_api(nullptr, kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, &r_enter);
  va = kVa;  // the driver's answer
  auto r_exit = callback_data(CUPTI_API_EXIT, first, &reserve);
  cb::on_api(nullptr, kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, &r_exit);

  CUmemGenericAllocationHandle handle = 0;
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 1;
  cuMemCreate_params create{&handle, 2 * kMiB, &prop, 0};
  auto c_enter = callback_data(CUPTI_API_ENTER, first + 1, &create);
  cb::on_api(nullptr, kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemCreate, &c_enter);
  handle = 0x1234;
  auto c_exit = callback_data(CUPTI_API_EXIT, first + 1, &create);
  cb::on_api(nullptr, kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemCreate, &c_exit);

  cuMemMap_params map{kVa + 2 * kMiB, 2 * kMiB, 0, handle, 0};
  auto m_enter = callback_data(CUPTI_API_ENTER, first + 2, &map),
       m_exit = callback_data(CUPTI_API_EXIT, first + 2, &map);
  cb::on_api(nullptr, kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemMap, &m_enter);
  cb::on_api(nullptr, kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemMap, &m_exit);
  asm volatile("" ::: "memory");
}

[[gnu::noinline]] void program_unmaps_memory(uint32_t rt) {
  cuMemUnmap_params unmap{kVa + 2 * kMiB, 2 * kMiB};
  auto enter = callback_data(CUPTI_API_ENTER, rt, &unmap),
       exit = callback_data(CUPTI_API_EXIT, rt, &unmap);
  cb::on_api(nullptr, kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, &enter);
  cb::on_api(nullptr, kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, &exit);
  asm volatile("" ::: "memory");
}

CUpti_ActivityMemory4& device_alloc(Buffer& b, uint32_t correlation, uint64_t addr, uint64_t bytes,
                                    uint64_t ts) {
  auto& r = memory(b, true, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, addr, bytes, ts);
  r.correlationId = correlation;
  return r;
}

// The functions of a stack, innermost first (inlined frames included).
std::vector<std::string> functions(const tidemark::store::TraceReader& trace, uint64_t stack_id) {
  std::vector<std::string> out;
  for (uint64_t ip : trace.stack(stack_id))
    for (const auto& f : trace.frames(ip)) out.push_back(f.function);
  return out;
}

struct Seen {
  ev::Kind kind;
  uint64_t addr_or_bytes;
  uint64_t thread, seq;
  std::string innermost;
};

TEST(InterposeCallbacks, ActivityEventsCarryTheCallersStackThreadAndOrder) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tidemark_callbacks_" + std::to_string(getpid()) + ".db"))
                               .string();
  tidemark::record::Options options;
  options.path = path;
  options.stack_depth = 8;
  tidemark::record::start(options);
  ASSERT_TRUE(ia::start(/*with_cupti=*/false));
  cb::configure(options.stack_depth, nullptr);

  // The program's thread makes the calls (inside an NVTX-like scope for the pool allocation),
  // then marks that it is done; the records are parsed afterwards, on the parser thread.
  uint64_t program_thread = 0;
  std::thread program([&] {
    program_thread = ev::current_thread_id();
    program_calls_cuda_malloc(101, 102);
    program_calls_cuda_malloc(201, 202);
    program_copies_to_host(301);
    {
      ev::Scope scope("train_step");
      program_allocates_from_pool(401);
    }
    program_synchronizes(501);
    program_fails_cuda_malloc(601);
    program_maps_memory(701);
    program_unmaps_memory(801);
    ev::mark("calls_made");
  });
  program.join();
  EXPECT_EQ(cb::stats().mappings, 2u);

  const uint64_t t = ev::now_ns() + 1000;
  Buffer b;
  device_alloc(b, 101, kDev, 2 * kMiB, t + 100);             // the runtime call's id
  device_alloc(b, 202, kDev + 2 * kMiB, 2 * kMiB, t + 200);  // the nested driver call's id
  // cudaMemcpy into pageable memory.
  memcpy_rec(b, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
             CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, false, 4096, t + 300, t + 350, 0, 1,
             CUPTI_INVALID_STREAM_ID)
      .correlationId = 301;
  auto& pooled = device_alloc(b, 401, kPool, kMiB, t + 400);
  pooled.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
  pooled.memoryPoolConfig.address = kPool;
  pooled.memoryPoolConfig.pool.size = 2 * kMiB;
  sync_rec(b, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, t + 500, t + 600, 1,
           CUPTI_INVALID_STREAM_ID)
      .correlationId = 501;
  device_alloc(b, 601, kDev + 8 * kMiB, kMiB, t + 650);  // a record for the failed call: no site
  device_alloc(b, 703, kVa + 2 * kMiB, 2 * kMiB,
               t + 700);  // cuMemMap's own record: not counted twice
  device_alloc(b, 999, kDev + 16 * kMiB, kMiB, t + 800);  // no call seen for it
  b.complete();
  ia::stop();
  tidemark::record::stop();

  auto trace = tidemark::store::TraceReader::open(path);
  std::vector<Seen> seen;
  uint64_t mark_seq = 0;
  for (const auto& r : trace.events()) {
    const ev::Event& e = r.event;
    if (e.kind == ev::Kind::mark && r.name == "calls_made") mark_seq = e.seq;
    if (e.kind == ev::Kind::mark || e.kind == ev::Kind::scope_push || e.kind == ev::Kind::scope_pop)
      continue;
    const auto fns = functions(trace, r.stack_id);
    uint64_t what = e.kind == ev::Kind::sync     ? e.sync.duration_ns
                    : e.kind == ev::Kind::memcpy ? e.memcpy.bytes
                                                 : e.block.addr;
    seen.push_back({e.kind, what, e.thread_id, e.seq, fns.empty() ? "" : fns.front()});
  }
  ASSERT_GT(mark_seq, 0u);
  auto from_program = [&](ev::Kind kind, uint64_t what, const std::string& function) {
    for (const Seen& s : seen)
      if (s.kind == kind && s.addr_or_bytes == what) {
        EXPECT_EQ(s.thread, program_thread) << function;
        // segment_unmap and the like carry no stack in any trace (the recorder's choice).
        if (kind != ev::Kind::segment_unmap) {
          EXPECT_EQ(s.innermost.substr(0, s.innermost.find('(', 1)),
                    "(anonymous namespace)::" + function);
        }
        EXPECT_LT(s.seq, mark_seq) << function << ": seq is the call's, not the parse's";
        return;
      }
    ADD_FAILURE() << "no " << ev::kind_name(kind) << " event for " << function;
  };
  from_program(ev::Kind::segment_alloc, kDev, "program_calls_cuda_malloc");
  from_program(ev::Kind::segment_alloc, kDev + 2 * kMiB, "program_calls_cuda_malloc");
  from_program(ev::Kind::memcpy, 4096, "program_copies_to_host");
  from_program(ev::Kind::sync, 50, "program_copies_to_host");  // the copy_to_host wait
  from_program(ev::Kind::segment_map, kPool, "program_allocates_from_pool");
  from_program(ev::Kind::alloc, kPool, "program_allocates_from_pool");
  from_program(ev::Kind::sync, 100, "program_synchronizes");
  from_program(ev::Kind::segment_map, kVa + 2 * kMiB, "program_maps_memory");
  from_program(ev::Kind::segment_unmap, kVa + 2 * kMiB, "program_unmaps_memory");
  // No call site (a failed call's, or never seen): the parser's thread, and no stack at all
  // rather than the parser's.
  for (uint64_t addr : {kDev + 8 * kMiB, kDev + 16 * kMiB}) {
    bool found = false;
    for (const Seen& s : seen)
      if (s.kind == ev::Kind::segment_alloc && s.addr_or_bytes == addr) {
        found = true;
        EXPECT_NE(s.thread, program_thread);
        EXPECT_EQ(s.innermost, "");
      }
    EXPECT_TRUE(found) << addr;
  }

  // The derived tables: the mapping from the callbacks once (its MEMORY2 record dropped), on
  // device 1 inside its reserved range; the pool allocation inside the scope open at the call.
  EXPECT_THAT(rows(path,
                   "SELECT d.type, d.idx, s.addr, s.size, s.segment, ifnull(s.free_ts, 0) > 0 "
                   "FROM segments s JOIN devices d ON d.id = s.device WHERE s.addr >= " +
                       std::to_string(kVa) + " AND s.addr < " + std::to_string(kPool)),
              ElementsAre("cuda|1|" + std::to_string(kVa + 2 * kMiB) + "|" +
                          std::to_string(2 * kMiB) + "|" + std::to_string(kVa) + "|1"));
  EXPECT_THAT(rows(path, "SELECT st.text FROM allocations a JOIN strings st ON st.id = a.scope"),
              ElementsAre("train_step"));
  std::filesystem::remove(path);
}

TEST(InterposeCallbacks, CallSitesAreBoundedAndAgeOut) {
  cb::CallSites sites(4, 2);
  cb::CallSite site;
  site.thread = 7;
  site.n_ips = 3;  // more than the depth: cut to 2
  site.ips[0] = 11, site.ips[1] = 12, site.ips[2] = 13;
  for (uint32_t c = 1; c <= 6; ++c) {
    site.seq = 100 * c;
    sites.put(c, site);
  }
  EXPECT_EQ(sites.size(), 4u);
  EXPECT_EQ(sites.aged_out(), 2u);  // 1 and 2: overwritten, never asked for
  cb::CallSite out;
  uint64_t seq = 0;
  EXPECT_FALSE(sites.find(1, &out, &seq));
  EXPECT_FALSE(sites.find(2, &out, &seq));
  ASSERT_TRUE(sites.find(3, &out, &seq));
  EXPECT_EQ(out.thread, 7u);
  EXPECT_EQ(out.n_ips, 2);
  EXPECT_EQ(out.ips[1], 12u);
  EXPECT_EQ(seq, 300u);
  // Each event of the call gets its own number, in order; past the reserved ones, fresh ones.
  for (uint64_t i = 1; i < cb::kSeqsPerCall; ++i) {
    ASSERT_TRUE(sites.find(3, &out, &seq));
    EXPECT_EQ(seq, 300 + i);
  }
  ASSERT_TRUE(sites.find(3, &out, &seq));
  EXPECT_NE(seq, 300 + cb::kSeqsPerCall);
  sites.drop(4);
  EXPECT_FALSE(sites.find(4, &out, &seq));
  EXPECT_EQ(sites.size(), 3u);
  site.seq = 700;
  sites.put(7, site);  // evicts 3, which was asked for: not aged out
  EXPECT_EQ(sites.aged_out(), 2u);
}

// Every CUDA call takes a correlation id, most of them calls nobody files (kernel launches), so
// filed ids are sparse: ids equal modulo the capacity must not evict each other, only the
// number of calls filed since.
TEST(InterposeCallbacks, SparseCorrelationIdsKeepTheirCallSites) {
  constexpr size_t kCap = 64;
  cb::CallSites sites(kCap, 1);
  cb::CallSite site;
  site.n_ips = 1;
  for (uint32_t k = 0; k < kCap; ++k) {
    site.seq = 1000 + k;
    site.ips[0] = k;
    sites.put(5 + k * 1024, site);  // all equal modulo 64 (and modulo every power of two < 1024)
  }
  EXPECT_EQ(sites.size(), kCap);
  EXPECT_EQ(sites.aged_out(), 0u);
  cb::CallSite out;
  uint64_t seq = 0;
  for (uint32_t k = 0; k < kCap; ++k) {
    ASSERT_TRUE(sites.find(5 + k * 1024, &out, &seq)) << k;
    EXPECT_EQ(out.ips[0], k);
    EXPECT_EQ(seq, 1000 + k);
  }
  // Dropping some in the middle keeps the others findable (the index closes its gaps).
  for (uint32_t k = 0; k < kCap; k += 3) sites.drop(5 + k * 1024);
  for (uint32_t k = 0; k < kCap; ++k)
    EXPECT_EQ(sites.find(5 + k * 1024, &out, &seq), k % 3 != 0) << k;
  // The next kCap filed calls replace the oldest ones in filing order, whatever their ids.
  for (uint32_t k = 0; k < kCap; ++k) sites.put(999'999 - k, site);
  EXPECT_EQ(sites.size(), kCap);
  for (uint32_t k = 0; k < kCap; ++k) EXPECT_FALSE(sites.find(5 + k * 1024, &out, &seq)) << k;
  for (uint32_t k = 0; k < kCap; ++k) EXPECT_TRUE(sites.find(999'999 - k, &out, &seq)) << k;
}

int g_resets = 0;

TEST(InterposeCallbacks, DeviceResetFlushesFirst) {
  cb::configure(0, [] { ++g_resets; });
  auto enter = callback_data(CUPTI_API_ENTER, 1), exit = callback_data(CUPTI_API_EXIT, 1);
  cb::on_api(nullptr, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020, &enter);
  cb::on_api(nullptr, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020, &exit);
  EXPECT_EQ(g_resets, 1);
  // Calls that are not traced, other domains and null data are ignored.
  cb::on_api(nullptr, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, &enter);
  cb::on_api(nullptr, CUPTI_CB_DOMAIN_RESOURCE, 1, &enter);
  cb::on_api(nullptr, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, nullptr);
  EXPECT_EQ(g_resets, 1);
}

}  // namespace
