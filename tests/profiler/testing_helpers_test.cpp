// tidemark/testing.h (profiler/testing/testing.cpp): ExpectNoLeaks fails a test on tensors and
// blocks that outlive the scope, naming where they were allocated, and passes on a clean scope;
// ExpectPeakBelow fails above its limit with the numbers and passes under it; both watch every
// thread (or one), nest, and remove their sink at the end.
#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <tensorlib/core/memory.h>
#include <tensorlib/memory/allocator.h>
#include <tensorlib/tensorlib.h>
#include <tidemark/testing.h>

#include <string>
#include <thread>
#include <vector>

namespace {

namespace ev = tidemark::events;
using ::testing::HasSubstr;
using ::testing::Not;
using tidemark::testing::ExpectNoLeaks;
using tidemark::testing::ExpectPeakBelow;
using tidemark::testing::NoLeaksOptions;
using tidemark::testing::PeakOptions;
using tidemark::testing::Threads;

// Tensors a test leaks on purpose: outside the statements EXPECT_NONFATAL_FAILURE runs
// (it accepts no locals), cleared after the check.
std::vector<tl::Tensor> g_kept;

[[gnu::noinline]] tl::Tensor make_leaky_tensor() {
  return tl::ones({32, 32});
}
[[gnu::noinline]] void allocate_and_free_temporaries() {
  tl::Tensor a = tl::ones({64, 64});
  tl::Tensor b = a * 2 + 1;
  tl::Tensor v = b.t();  // a view, gone with b
  (void)v.sum().item<float>();
}

// The failures `fn` reports, intercepted: their messages and lines.
template <class Fn>
std::vector<::testing::TestPartResult> failures_of(Fn&& fn) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ALL_THREADS, &results);
    fn();
  }
  std::vector<::testing::TestPartResult> out;
  for (int i = 0; i < results.size(); ++i) out.push_back(results.GetTestPartResult(i));
  return out;
}

TEST(ExpectNoLeaks, ALeakedTensorFailsTheTestNamingItsAllocationSite) {
  EXPECT_NONFATAL_FAILURE(
      {
        ExpectNoLeaks guard;
        g_kept.push_back(make_leaky_tensor());
      },
      "make_leaky_tensor");
  g_kept.clear();
}

TEST(ExpectNoLeaks, TheMessageDescribesTheTensorAndPointsAtTheGuard) {
  int guard_line = 0;
  auto failures = failures_of([&] {
    guard_line = __LINE__ + 1;
    ExpectNoLeaks guard;
    g_kept.push_back(make_leaky_tensor());
    EXPECT_EQ(guard.live_tensors(), 1u);
    EXPECT_EQ(guard.live_blocks(), 1u);
    EXPECT_EQ(guard.live_bytes(), 32u * 32 * 4);
  });
  g_kept.clear();
  ASSERT_EQ(failures.size(), 1u);
  const auto& f = failures[0];
  EXPECT_TRUE(f.nonfatally_failed());
  EXPECT_EQ(f.line_number(), guard_line);
  EXPECT_THAT(f.file_name(), HasSubstr("testing_helpers_test.cpp"));
  std::string m = f.message();
  EXPECT_THAT(m, HasSubstr("1 tensor and 1 block allocated inside this scope are still alive"))
      << m;
  EXPECT_THAT(m, HasSubstr("float32 [32, 32]")) << m;
  EXPECT_THAT(m, HasSubstr("4096 bytes")) << m;
  EXPECT_THAT(m, HasSubstr("make_leaky_tensor()")) << m;
  EXPECT_THAT(m, HasSubstr("testing_helpers_test.cpp:")) << m;
  // The caller is shown below the site; tensorlib's and the helper's own frames are not.
  EXPECT_THAT(m, HasSubstr("TestBody")) << m;
  EXPECT_THAT(m, Not(HasSubstr("tl::ones"))) << m;
  EXPECT_THAT(m, Not(HasSubstr("tidemark::"))) << m;
}

TEST(ExpectNoLeaks, ACleanScopePasses) {
  tl::Tensor before = tl::ones({128});  // existed before: may be freed inside
  auto failures = failures_of([&] {
    ExpectNoLeaks guard;
    allocate_and_free_temporaries();
    before = tl::Tensor();
    {
      tl::Tensor x = tl::ones({8, 8});
      tl::Tensor row = x[0];
    }
    EXPECT_EQ(guard.live_tensors(), 0u);
    EXPECT_TRUE(guard.report().empty()) << guard.report();
  });
  EXPECT_TRUE(failures.empty()) << failures[0].message();
  // And the same with the helper left to fail this very test if it is wrong.
  ExpectNoLeaks guard;
  allocate_and_free_temporaries();
}

TEST(ExpectNoLeaks, AViewOfAnOlderTensorThatEscapesIsALeak) {
  tl::Tensor base = tl::ones({16, 16});
  auto failures = failures_of([&] {
    ExpectNoLeaks guard;
    g_kept.push_back(base.t());
  });
  g_kept.clear();
  ASSERT_EQ(failures.size(), 1u);
  std::string m = failures[0].message();
  EXPECT_THAT(m, HasSubstr("1 tensor allocated inside this scope is still alive")) << m;
  EXPECT_THAT(m, HasSubstr("a view of tensor #")) << m;
}

TEST(ExpectNoLeaks, ARawBlockFromTheAllocatorIsALeakUntilFreed) {
  tl::memory::Allocator* alloc = tl::memory::get_allocator(tl::Device("cpu"));
  tl::memory::DataPtr leaked;
  auto failures = failures_of([&] {
    ExpectNoLeaks guard;
    leaked = alloc->allocate(1000);
    tl::memory::DataPtr freed = alloc->allocate(3000);
    alloc->deallocate(freed);
  });
  alloc->deallocate(leaked);
  ASSERT_EQ(failures.size(), 1u);
  std::string m = failures[0].message();
  EXPECT_THAT(m, HasSubstr("1 block allocated inside this scope is still alive")) << m;
  EXPECT_THAT(m, HasSubstr("of 1024 bytes (1000 requested) on cpu")) << m;
  EXPECT_THAT(m, HasSubstr("TestBody")) << m;  // the allocate() call's caller
}

TEST(ExpectNoLeaks, TheMacroChecksItsStatements) {
  EXPECT_NONFATAL_FAILURE(TIDEMARK_EXPECT_NO_LEAKS({ g_kept.push_back(make_leaky_tensor()); }),
                          "make_leaky_tensor");
  g_kept.clear();
  TIDEMARK_EXPECT_NO_LEAKS({
    tl::Tensor t = make_leaky_tensor();  // freed at the end of the block: no failure
    (void)t;
  });
}

TEST(ExpectNoLeaks, WatchesOtherThreadsUnlessToldToWatchOnlyItsOwn) {
  auto leak_on_another_thread = [] {
    std::thread([] { g_kept.push_back(make_leaky_tensor()); }).join();
  };
  auto all = failures_of([&] {
    ExpectNoLeaks guard;
    leak_on_another_thread();
  });
  g_kept.clear();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_THAT(all[0].message(), HasSubstr("make_leaky_tensor")) << all[0].message();

  auto own = failures_of([&] {
    NoLeaksOptions o;
    o.threads = Threads::this_thread;
    ExpectNoLeaks guard(o);
    leak_on_another_thread();
  });
  g_kept.clear();
  EXPECT_TRUE(own.empty()) << own[0].message();
}

TEST(ExpectNoLeaks, NestedGuardsEachCheckTheirOwnScope) {
  int outer_line = 0;
  auto failures = failures_of([&] {
    outer_line = __LINE__ + 1;
    ExpectNoLeaks outer;
    {
      ExpectNoLeaks inner;
      allocate_and_free_temporaries();
    }
    g_kept.push_back(make_leaky_tensor());
  });
  g_kept.clear();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].line_number(), outer_line);
}

TEST(ExpectNoLeaks, TheSinkIsRemovedAtTheEndOfTheScope) {
  ASSERT_FALSE(ev::enabled()) << "another sink is installed; this test needs none";
  {
    ExpectNoLeaks a;
    EXPECT_TRUE(ev::enabled());
    {
      ExpectPeakBelow b(1 << 30);
      EXPECT_TRUE(ev::enabled());
    }
    EXPECT_TRUE(ev::enabled());
  }
  EXPECT_FALSE(ev::enabled());
  // Nothing is watched afterwards: a leak after the scope is no failure of it.
  g_kept.push_back(make_leaky_tensor());
  g_kept.clear();
}

// ---- ExpectPeakBelow ----------------------------------------------------------------------

constexpr int64_t k128KiB = 128 << 10;  // a float32 tensor of 32768 elements, 512-aligned

TEST(ExpectPeakBelow, OverTheLimitFailsWithTheNumbers) {
  int guard_line = 0;
  auto failures = failures_of([&] {
    guard_line = __LINE__ + 1;
    ExpectPeakBelow guard(64 << 10);
    tl::Tensor a = tl::empty({32768});
    tl::Tensor b = tl::empty({32768});
    EXPECT_EQ(guard.peak_bytes(), 2 * k128KiB);
    EXPECT_EQ(guard.peak_bytes({ev::DeviceType::cpu, 0}), 2 * k128KiB);
  });
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].line_number(), guard_line);
  std::string m = failures[0].message();
  EXPECT_THAT(m, HasSubstr("on cpu peaked at 262144 bytes (256.00 KiB)")) << m;
  EXPECT_THAT(m, HasSubstr("over the limit of 65536 bytes (64.00 KiB) by 196608 bytes")) << m;
  EXPECT_THAT(m, HasSubstr("reached the peak was 131072 bytes")) << m;
}

TEST(ExpectPeakBelow, UnderTheLimitPassesAndMatchesTheAllocatorsOwnPeak) {
  tl::reset_peak_memory_stats();
  int64_t start = tl::memory_allocated();
  int64_t peak = 0;
  {
    ExpectPeakBelow guard(1 << 20);
    for (int i = 0; i < 3; ++i) {
      tl::Tensor a = tl::empty({32768});  // freed each time round: the peak stays two tensors
      tl::Tensor b = tl::zeros_like(a);
    }
    peak = guard.peak_bytes();
    EXPECT_EQ(guard.current_bytes({ev::DeviceType::cpu, 0}), 0);
  }
  EXPECT_EQ(peak, 2 * k128KiB);
  EXPECT_EQ(peak, tl::max_memory_allocated() - start);
}

TEST(ExpectPeakBelow, FreeingOlderMemoryMakesRoom) {
  tl::Tensor old = tl::empty({32768});
  ExpectPeakBelow guard(1024);  // fails this test if the freed room is not counted
  old = tl::Tensor();
  tl::Tensor replacement = tl::empty({32768});
  EXPECT_EQ(guard.peak_bytes(), 0);
  EXPECT_EQ(guard.current_bytes({ev::DeviceType::cpu, 0}), 0);
}

// Any allocator that emits the contract's events is measured, per device: here events as the
// interpose library would send them for a CUDA device.
void emit_block(ev::Kind kind, ev::DeviceId device, uint64_t addr, uint64_t size) {
  ev::Event e;
  e.kind = kind;
  e.device = device;
  e.block = {addr, size, size, 0, addr, ev::Pool::large, ev::Category::unknown};
  ev::dispatch(e);
}

TEST(ExpectPeakBelow, CountsEveryDeviceSeparatelyFromTheEventsAlone) {
  const ev::DeviceId cuda0{ev::DeviceType::cuda, 0}, cuda1{ev::DeviceType::cuda, 1};
  auto failures = failures_of([&] {
    ExpectPeakBelow guard(3 << 20);
    emit_block(ev::Kind::alloc, cuda0, 0x1000000, 2 << 20);
    emit_block(ev::Kind::alloc, cuda1, 0x1000000, 2 << 20);  // same address, other device
    emit_block(ev::Kind::free_requested, cuda0, 0x1000000, 2 << 20);
    emit_block(ev::Kind::alloc, cuda0, 0x2000000, 2 << 20);
    emit_block(ev::Kind::alloc, cuda1, 0x2000000, 2 << 20);  // cuda:1 reaches 4 MiB
    EXPECT_EQ(guard.peak_bytes(cuda0), 2 << 20);
    EXPECT_EQ(guard.peak_bytes(cuda1), 4 << 20);
    emit_block(ev::Kind::free_requested, cuda0, 0x2000000, 2 << 20);
    emit_block(ev::Kind::free_requested, cuda1, 0x1000000, 2 << 20);
    emit_block(ev::Kind::free_requested, cuda1, 0x2000000, 2 << 20);
  });
  ASSERT_EQ(failures.size(), 1u);
  std::string m = failures[0].message();
  EXPECT_THAT(m, HasSubstr("on cuda:1 peaked at 4194304 bytes (4.00 MiB)")) << m;
  EXPECT_THAT(m, Not(HasSubstr("cuda:0"))) << m;
}

TEST(TestingHelpers, AreThreadSafe) {
  constexpr int kThreads = 4, kRounds = 200;
  auto failures = failures_of([&] {
    ExpectNoLeaks all_threads;  // sees every worker's allocations, all freed
    std::vector<std::thread> workers;
    for (int w = 0; w < kThreads; ++w) {
      workers.emplace_back([] {
        NoLeaksOptions lo;
        lo.threads = Threads::this_thread;
        PeakOptions po;
        po.threads = Threads::this_thread;
        for (int r = 0; r < kRounds / 10; ++r) {
          ExpectNoLeaks no_leaks(lo);
          ExpectPeakBelow peak(1 << 20, po);
          for (int i = 0; i < 10; ++i) {
            tl::Tensor t = tl::ones({256});
            tl::Tensor u = tl::empty_like(t);
          }
          // Only this thread's two live tensors at a time count, whatever the others do.
          EXPECT_EQ(peak.peak_bytes(), 2 * 1024);
        }
      });
    }
    for (auto& w : workers) w.join();
  });
  for (const auto& f : failures) ADD_FAILURE() << f.message();
  EXPECT_FALSE(ev::enabled());
}

}  // namespace
