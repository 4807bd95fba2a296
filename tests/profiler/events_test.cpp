// The event contract's dispatch: sinks in and out, the disabled fast path, and the event
// clock staying on steady_clock's time line.
#include <gtest/gtest.h>

#include <thread>
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

TEST(Events, NamesCoverTheVocabulary) {
  EXPECT_EQ(ev::kind_name(ev::Kind::free_completed), "free_completed");
  EXPECT_EQ(ev::kind_name(ev::Kind::mark), "mark");
  EXPECT_EQ(ev::category_name(ev::Category::optimizer_state), "optimizer_state");
  EXPECT_EQ(ev::sync_kind_name(ev::SyncKind::copy_to_host), "copy_to_host");
}

}  // namespace
