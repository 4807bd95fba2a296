// The event contract's dispatch: sinks in and out, the disabled fast path, the event clock
// staying on steady_clock's time line, stamped events and each kind's payload.
#include <gtest/gtest.h>

#include <iterator>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "profiler/events/events.h"

namespace {

namespace ev = tidemark::events;

struct CountingSink final : ev::Sink {
  void on_event(const ev::Event&) noexcept override { ++count; }
  int count = 0;
};

ev::Event mark() {
  ev::Event e;
  e.kind = ev::Kind::mark;
  e.name = {"here", 0};
  return e;
}

TEST(Events, SinksReceiveUntilRemoved) {
  CountingSink a, b;
  EXPECT_FALSE(ev::enabled());
  ASSERT_TRUE(ev::add_sink(&a));
  ASSERT_TRUE(ev::add_sink(&b));
  EXPECT_TRUE(ev::enabled());
  auto e = mark();
  ev::dispatch(e);
  ev::remove_sink(&a);
  ev::dispatch(e);
  ev::remove_sink(&b);
  EXPECT_FALSE(ev::enabled());
  EXPECT_EQ(a.count, 1);
  EXPECT_EQ(b.count, 2);
}

TEST(Events, SlotsAreBoundedAndReusable) {
  std::vector<CountingSink> sinks(ev::kMaxSinks + 1);
  for (int i = 0; i < ev::kMaxSinks; ++i) ASSERT_TRUE(ev::add_sink(&sinks[i]));
  EXPECT_FALSE(ev::add_sink(&sinks.back()));
  ev::remove_sink(&sinks[3]);
  EXPECT_TRUE(ev::add_sink(&sinks.back()));
  for (auto& s : sinks) ev::remove_sink(&s);
  EXPECT_FALSE(ev::enabled());
}

TEST(Events, ClockFollowsSteadyClock) {
  CountingSink s;
  ev::add_sink(&s);  // calibrates the event clock
  for (int i = 0; i < 5; ++i) {
    uint64_t steady = ev::steady_ns();
    uint64_t fast = ev::now_ns();
    // Same time line: within 1 ms of each other, however long the process has run.
    EXPECT_LT(fast > steady ? fast - steady : steady - fast, 1'000'000u);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  uint64_t a = ev::now_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  uint64_t b = ev::now_ns();
  EXPECT_GE(b - a, 49'000'000u);
  EXPECT_LT(b - a, 500'000'000u);
  ev::remove_sink(&s);
}

TEST(Events, HeaderIsStampedAndThreadIdsDiffer) {
  struct Keep final : ev::Sink {
    void on_event(const ev::Event& e) noexcept override { seen.push_back(e.thread_id); }
    std::vector<uint64_t> seen;
  } keep;
  ev::add_sink(&keep);
  auto e = mark();
  ev::dispatch(e);
  std::thread([&] {
    auto f = mark();
    ev::dispatch(f);
  }).join();
  ev::remove_sink(&keep);
  ASSERT_EQ(keep.seen.size(), 2u);
  EXPECT_NE(keep.seen[0], keep.seen[1]);
}

TEST(Events, AStampedEventKeepsItsThreadSeqAndStack) {
  struct Plain final : ev::Sink {  // no on_stamped_event: sees an ordinary event
    void on_event(const ev::Event& e) noexcept override { seen.push_back({e.thread_id, e.seq}); }
    std::vector<std::pair<uint64_t, uint64_t>> seen;
  } plain;
  struct Stacks final : ev::Sink {
    void on_event(const ev::Event&) noexcept override { ++unstamped; }
    void on_stamped_event(const ev::Event& e, std::span<const uint64_t> stack) noexcept override {
      ts = e.ts_ns;
      ips.assign(stack.begin(), stack.end());
    }
    int unstamped = 0;
    uint64_t ts = 0;
    std::vector<uint64_t> ips;
  } stacks;
  ASSERT_TRUE(ev::add_sink(&plain));
  ASSERT_TRUE(ev::add_sink(&stacks));
  const uint64_t caller = ev::current_thread_id();
  const uint64_t seq = ev::reserve_seq(2);
  auto later = mark();
  ev::dispatch(later);  // emitted after the reservation: ordered after both reserved numbers
  const uint64_t ips[] = {0x1234, 0x5678};
  std::thread([&] {
    auto e = mark();
    ev::dispatch_stamped(e, caller, seq + 1, ips);
  }).join();
  ev::remove_sink(&plain);
  ev::remove_sink(&stacks);
  ASSERT_EQ(plain.seen.size(), 2u);
  EXPECT_GT(plain.seen[0].second, seq + 1);
  // The caller's thread and reserved number, not the delivering thread's.
  EXPECT_EQ(plain.seen[1], std::make_pair(caller, seq + 1));
  EXPECT_EQ(stacks.unstamped, 1);
  EXPECT_NE(stacks.ts, 0u);  // 0 means "now"
  EXPECT_EQ(stacks.ips, (std::vector<uint64_t>{0x1234, 0x5678}));
}

TEST(Events, EachKindNamesItsPayload) {
  using ev::Kind, ev::Payload;
  const std::pair<Kind, Payload> expected[] = {{Kind::segment_alloc, Payload::block},
                                               {Kind::segment_free, Payload::block},
                                               {Kind::segment_map, Payload::block},
                                               {Kind::segment_unmap, Payload::block},
                                               {Kind::alloc, Payload::block},
                                               {Kind::free_requested, Payload::block},
                                               {Kind::free_completed, Payload::block},
                                               {Kind::empty_cache, Payload::allocator},
                                               {Kind::alloc_retry, Payload::allocator},
                                               {Kind::oom, Payload::allocator},
                                               {Kind::storage_create, Payload::storage},
                                               {Kind::storage_release, Payload::storage},
                                               {Kind::tensor_create, Payload::tensor},
                                               {Kind::tensor_release, Payload::tensor},
                                               {Kind::category, Payload::category},
                                               {Kind::sync, Payload::sync},
                                               {Kind::memcpy, Payload::memcpy},
                                               {Kind::scope_push, Payload::name},
                                               {Kind::scope_pop, Payload::name},
                                               {Kind::step, Payload::name},
                                               {Kind::mark, Payload::name},
                                               {Kind::collective, Payload::collective}};
  ASSERT_EQ(std::size(expected), static_cast<size_t>(ev::kNumKinds));
  for (auto [kind, payload] : expected)
    EXPECT_EQ(ev::payload_of(kind), payload) << ev::kind_name(kind);
}

TEST(Events, NamesCoverTheVocabulary) {
  EXPECT_EQ(ev::kind_name(ev::Kind::free_completed), "free_completed");
  EXPECT_EQ(ev::kind_name(ev::Kind::mark), "mark");
  EXPECT_EQ(ev::category_name(ev::Category::optimizer_state), "optimizer_state");
  EXPECT_EQ(ev::sync_kind_name(ev::SyncKind::copy_to_host), "copy_to_host");
  EXPECT_EQ(ev::kind_name(ev::Kind::collective), "collective");
  EXPECT_EQ(ev::category_name(ev::Category::comm_buffer), "comm_buffer");
  EXPECT_EQ(ev::sync_kind_name(ev::SyncKind::collective), "collective");
  EXPECT_EQ(ev::collective_op_name(ev::CollectiveOp::reduce_scatter), "reduce_scatter");
}

}  // namespace
