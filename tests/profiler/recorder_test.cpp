// The recorder end to end: a real training loop recorded into a trace whose replay gives the
// statistics the program saw; several threads; a SIGKILLed recording; stacks and scopes.
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <tensorlib/memory/stats_replayer.h>
#include <tensorlib/tensorlib.h>

#include "../../samples/mlp.h"
#include "profiler/record/recorder.h"
#include "profiler/store/meta_keys.h"
#include "profiler/store/trace_reader.h"
#include "temp_trace.h"

extern char** environ;

namespace {

namespace ev = tidemark::events;
namespace fs = std::filesystem;
using tidemark::store::TraceReader;

using tl_test::TempTrace;

tidemark::record::Options options(const std::string& path, int stacks = 0) {
  tidemark::record::Options o;
  o.path = path;
  o.stack_depth = stacks;
  return o;
}

// The statistics a replay can reproduce, current and peak, per pool.
std::map<std::string, int64_t> replayable(const std::map<std::string, int64_t>& flat) {
  std::map<std::string, int64_t> out;
  for (const auto& [k, v] : flat) {
    bool stat = k.starts_with("allocation.") || k.starts_with("allocated_bytes.") ||
                k.starts_with("requested_bytes.") || k.starts_with("active.") ||
                k.starts_with("active_bytes.") || k.starts_with("segment.") ||
                k.starts_with("reserved_bytes.") || k.starts_with("inactive_split");
    if (stat && (k.ends_with(".current") || k.ends_with(".peak"))) out[k] = v;
  }
  return out;
}

TEST(Recorder, ReplayOfARecordedTrainingRunGivesTheProgramsStatistics) {
  TempTrace trace("replay");
  const tl::Device cpu("cpu");
  // Start from an empty allocator so the replay (which starts at zero) sees everything.
  tl::empty_cache(cpu);
  ASSERT_EQ(tl::memory_allocated(cpu), 0);
  tl::reset_peak_memory_stats(cpu);
  auto before = tl::memory_stats(cpu);

  tidemark::record::start(options(trace.path()));
  samples::MlpConfig c;
  c.steps = 30;
  samples::MlpTrainer trainer(c);
  for (int i = 0; i < c.steps; ++i) trainer.step();
  tl::Tensor big = tl::zeros({3, 1024, 1024});  // a large-pool segment of its own
  tl::Tensor view = big.narrow(0, 1, 1);
  big = tl::Tensor();
  tl::empty_cache(cpu);  // releases the cached small segments, keeps the one the view holds
  auto seen = tl::memory_stats(cpu);
  int64_t peak_allocated = tl::max_memory_allocated(cpu);
  int64_t peak_reserved = tl::max_memory_reserved(cpu);
  auto rs = tidemark::record::stop();
  EXPECT_EQ(rs.dropped, 0u);

  TraceReader reader = TraceReader::open(trace.path(), TraceReader::Require::finalized);
  tl::memory::StatsReplayer replay;
  std::map<ev::Kind, int64_t> counts;
  reader.for_each_event([&](const ev::Event& e, uint64_t) {
    replay.on_event(e);
    counts[e.kind]++;
  });
  auto replayed = tl::memory::flat_stats(replay.stats({ev::DeviceType::cpu, 0}));
  ASSERT_EQ(replayable(seen).size(), 54u);  // 9 statistics x 3 pools x current/peak
  EXPECT_EQ(replayable(replayed), replayable(seen));
  EXPECT_GT(seen["allocated_bytes.all.current"], 0);  // the view keeps a block alive
  EXPECT_EQ(replayed["allocated_bytes.all.peak"], peak_allocated);
  EXPECT_EQ(replayed["reserved_bytes.all.peak"], peak_reserved);
  // Event counts equal the allocator's own counters over the recording.
  EXPECT_EQ(counts[ev::Kind::alloc],
            seen["allocation.all.allocated"] - before["allocation.all.allocated"]);
  EXPECT_EQ(counts[ev::Kind::free_requested],
            seen["allocation.all.freed"] - before["allocation.all.freed"]);
  EXPECT_EQ(counts[ev::Kind::segment_alloc], seen["num_device_alloc"] - before["num_device_alloc"]);
  EXPECT_EQ(counts[ev::Kind::segment_free], seen["num_device_free"] - before["num_device_free"]);
  EXPECT_EQ(counts[ev::Kind::step], c.steps);
  EXPECT_EQ(reader.event_count(), rs.events);
  // The finalized peak agrees with the program's.
  auto dev = reader.device_row_id({ev::DeviceType::cpu, 0});
  ASSERT_TRUE(dev.has_value());
  auto peak = reader.peak(*dev, tidemark::store::Curve::allocated);
  ASSERT_TRUE(peak.has_value());
  EXPECT_EQ(peak->bytes, peak_allocated);
}

TEST(Recorder, SeveralThreadsLoseNothing) {
  TempTrace trace("threads");
  constexpr int kThreads = 4, kIters = 3000;
  tidemark::record::Options o = options(trace.path());
  o.ring_bytes = 64 << 10;  // small rings: producers must wait for the writer at times
  tidemark::record::start(o);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < kIters; ++i) {
        tl::Tensor a = tl::empty({16, 16});
        tl::Tensor v = a.t();
      }
    });
  }
  for (auto& th : threads) th.join();
  auto rs = tidemark::record::stop();
  EXPECT_EQ(rs.dropped, 0u);

  TraceReader reader = TraceReader::open(trace.path());
  std::map<uint64_t, int64_t> creates_by_thread;
  int64_t allocs = 0, frees = 0;
  uint64_t last_seq = 0;
  bool ordered = true;
  reader.for_each_event([&](const ev::Event& e, uint64_t) {
    if (e.seq <= last_seq && last_seq != 0) ordered = false;
    last_seq = e.seq;
    if (e.kind == ev::Kind::tensor_create) creates_by_thread[e.thread_id]++;
    if (e.kind == ev::Kind::alloc) allocs++;
    if (e.kind == ev::Kind::free_completed) frees++;
  });
  EXPECT_TRUE(ordered);
  ASSERT_EQ(creates_by_thread.size(), static_cast<size_t>(kThreads));
  for (auto& [thread, n] : creates_by_thread) EXPECT_EQ(n, 2 * kIters) << "thread " << thread;
  EXPECT_EQ(allocs, kThreads * kIters);
  EXPECT_EQ(frees, kThreads * kIters);
}

TEST(Recorder, AKilledRecordingLeavesAFinalizablePrefix) {
  TempTrace trace("crash");
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  std::string child = TIDEMARK_CRASH_CHILD;
  char* argv[] = {child.data(), const_cast<char*>(trace.path().c_str()), nullptr};
  pid_t pid;
  ASSERT_EQ(posix_spawn(&pid, child.c_str(), &actions, nullptr, argv, environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  char buf[16] = {};
  ASSERT_GT(read(out[0], buf, sizeof buf - 1), 0) << "the child did not start recording";
  EXPECT_STREQ(buf, "ready\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // mid-run
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  close(out[0]);
  ASSERT_TRUE(WIFSIGNALED(status));

  tidemark::record::finalize_trace(trace.path());
  TraceReader reader = TraceReader::open(trace.path(), TraceReader::Require::finalized);
  EXPECT_FALSE(reader.clean_end());
  // What it emitted since its last commit is lost, uncounted: the count is a lower bound.
  EXPECT_FALSE(reader.loss_counted());
  // A prefix: the child has one producing thread, so the recovered sequence numbers are
  // consecutive, and so are its steps.
  uint64_t first_seq = 0, expected_seq = 0, gaps = 0, steps = 0, expected_step = 1;
  reader.for_each_event([&](const ev::Event& e, uint64_t) {
    if (expected_seq == 0) first_seq = expected_seq = e.seq;
    gaps += e.seq != expected_seq;
    expected_seq = e.seq + 1;
    if (e.kind == ev::Kind::step) {
      gaps += e.name.value != expected_step;
      expected_step = e.name.value + 1;
      ++steps;
    }
  });
  EXPECT_EQ(gaps, 0u);
  EXPECT_GE(steps, 50u);  // everything flushed before "ready" survived
  EXPECT_EQ(reader.event_count(), expected_seq - first_seq);
}

[[gnu::noinline]] tl::Tensor allocate_here(int* line) {
  *line = __LINE__ + 1;
  tl::Tensor t = tl::empty({1000});  // 4000 bytes: easy to find
  asm volatile("" ::: "memory");
  return t;
}

TEST(Recorder, StacksResolveToTheAllocatingFunctionAndLine) {
  TempTrace trace("stacks");
  tidemark::record::start(options(trace.path(), 64));  // unoptimised builds nest deeply
  int line = 0;
  tl::Tensor t = allocate_here(&line);
  t = tl::Tensor();
  tidemark::record::stop();

  TraceReader reader = TraceReader::open(trace.path(), TraceReader::Require::finalized);
  auto dev = reader.device_row_id({ev::DeviceType::cpu, 0});
  ASSERT_TRUE(dev.has_value());
  const tidemark::store::AllocationRow* row = nullptr;
  auto rows = reader.allocations(*dev);
  for (const auto& r : rows)
    if (r.requested_size == 4000) row = &r;
  ASSERT_NE(row, nullptr);
  ASSERT_NE(row->stack_id, 0u);
  bool found = false;
  std::string seen;
  for (uint64_t ip : reader.stack(row->stack_id)) {
    for (const auto& f : reader.frames(ip)) {
      seen += f.function + " " + f.file + ":" + std::to_string(f.line) + "\n";
      if (f.function.find("allocate_here") != std::string::npos &&
          f.file.ends_with("recorder_test.cpp") && f.line == line)
        found = true;
    }
  }
  EXPECT_TRUE(found) << "expected allocate_here at recorder_test.cpp:" << line << " in\n" << seen;
}

// Note [Stamped events]: the stack handed over with the event is recorded, not the delivering
// thread's, cut to the recording's depth.
TEST(Recorder, AStampedEventIsRecordedWithItsGivenStack) {
  TempTrace trace("stamped");
  tidemark::record::start(options(trace.path(), 2));
  const uint64_t thread = ev::current_thread_id();
  const uint64_t seq = ev::reserve_seq(1);
  const uint64_t ips[] = {0x1111, 0x2222, 0x3333};
  std::thread([&] {
    ev::Event e;
    e.kind = ev::Kind::mark;
    e.name = {"stamped", 0};
    ev::dispatch_stamped(e, thread, seq, ips);
  }).join();
  tidemark::record::stop();

  TraceReader reader = TraceReader::open(trace.path(), TraceReader::Require::finalized);
  bool found = false;
  for (const auto& r : reader.events()) {
    if (r.event.kind != ev::Kind::mark || r.event.name.name != "stamped") continue;
    found = true;
    EXPECT_EQ(r.event.thread_id, thread);
    EXPECT_EQ(r.event.seq, seq);
    EXPECT_EQ(reader.stack(r.stack_id), (std::vector<uint64_t>{0x1111, 0x2222}));
  }
  EXPECT_TRUE(found);
}

TEST(Recorder, AllocationsAreAttributedToTheOpenScopes) {
  TempTrace trace("scopes");
  tidemark::record::start(options(trace.path()));
  tl::Tensor kept;
  {
    tl::profiler::Scope outer("model");
    tl::profiler::Scope inner("layer1");
    kept = tl::empty({777});  // 3108 bytes
  }
  tl::Tensor outside = tl::empty({555});
  tidemark::record::stop();
  TraceReader reader = TraceReader::open(trace.path(), TraceReader::Require::finalized);
  auto dev = reader.device_row_id({ev::DeviceType::cpu, 0});
  ASSERT_TRUE(dev.has_value());
  std::map<uint64_t, std::string> scope_of;
  for (const auto& r : reader.allocations(*dev)) scope_of[r.requested_size] = r.scope;
  EXPECT_EQ(scope_of[777 * 4], "model/layer1");
  EXPECT_EQ(scope_of[555 * 4], "");
}

TEST(Recorder, ReportsBadOutputAndDoubleStart) {
  try {
    tidemark::record::start(options("/nonexistent-dir/x.db"));
    tidemark::record::stop();
    FAIL() << "recording into a missing directory must fail";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.db"), std::string::npos) << e.what();
  }
  TempTrace trace("twice");
  tidemark::record::start(options(trace.path()));
  EXPECT_THROW(tidemark::record::start(options(trace.path())), std::runtime_error);
  EXPECT_TRUE(tidemark::record::is_recording());
  tidemark::record::stop();
  EXPECT_FALSE(tidemark::record::is_recording());
}

TEST(Recorder, OptionsFromTheEnvironmentAreChecked) {
  setenv("TIDEMARK_OUTPUT", "run-%p.db", 1);
  setenv("TIDEMARK_STACKS", "24", 1);
  auto o = tidemark::record::options_from_env();
  EXPECT_EQ(o.path, "run-%p.db");
  EXPECT_EQ(o.stack_depth, 24);
  setenv("TIDEMARK_STACKS", "99", 1);
  try {
    tidemark::record::options_from_env();
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("TIDEMARK_STACKS='99'"), std::string::npos) << e.what();
  }
  unsetenv("TIDEMARK_STACKS");
  unsetenv("TIDEMARK_OUTPUT");
}

// The marks named `name` in a trace.
uint64_t marks(const std::string& path, const std::string& name) {
  uint64_t n = 0;
  TraceReader::open(path).for_each_event(
      [&](const ev::Event& e, uint64_t) { n += e.kind == ev::Kind::mark && e.name.name == name; });
  return n;
}

// Bug: a database locked by another process for 8 s stopped the recording for good, "0 dropped".
// Another process holding the trace's write lock for longer than SQLite's default busy timeout
// (5 s) delays the writer, which waits and goes on (Note [Writer failure]); meanwhile the
// program's small ring overflows, and every event that could not be kept is counted.
TEST(Recorder, ADatabaseLockedForSecondsDelaysTheWriterAndEveryLostEventIsCounted) {
  TempTrace trace("busy");
  tidemark::record::Options o = options(trace.path());
  o.finalize = false;
  o.ring_bytes = 64 << 10;
  tidemark::record::start(o);
  for (int i = 0; i < 100; ++i) ev::mark("before");
  tidemark::record::flush();

  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(trace.path().c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 10000);
  ASSERT_EQ(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  constexpr int kDuring = 20000;  // far more than a 64 KiB ring holds
  std::thread program([] {
    for (int i = 0; i < kDuring; ++i) ev::mark("during");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(6500));
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  program.join();
  for (int i = 0; i < 100; ++i) ev::mark("after");
  const tidemark::record::RecordingStats rs = tidemark::record::stop();

  TraceReader r = TraceReader::open(trace.path());
  EXPECT_FALSE(r.meta_value(tidemark::store::meta_keys::kWriterError).has_value());
  EXPECT_TRUE(r.clean_end());
  EXPECT_EQ(marks(trace.path(), "before"), 100u);
  EXPECT_EQ(marks(trace.path(), "after"), 100u);  // the writer went on
  EXPECT_GT(r.dropped_count(), 0u);
  EXPECT_EQ(marks(trace.path(), "during") + r.dropped_count(), uint64_t{kDuring});
  EXPECT_EQ(rs.dropped, r.dropped_count());
}

// Bug: on a full disk the recording stopped and the trace said "0 dropped"; under a file
// size limit, SIGXFSZ killed the program.
// A full disk (here: a file size limit) stops the recording and the program runs on; what was
// appended but never committed, what the rings held and every later event are counted as dropped,
// and the count and the reason are stored in the trace (Note [Writer failure]).
TEST(Recorder, AFullDiskStopsTheRecordingAndEveryLostEventIsCounted) {
  TempTrace trace("fsize");
  tidemark::record::Options o = options(trace.path());
  o.finalize = false;
  tidemark::record::start(o);
  for (int i = 0; i < 100; ++i) ev::mark("m");
  tidemark::record::flush();

  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  // SIGXFSZ at its default, which kills: the recorder's writes past the limit must fail
  // instead (Note [File size limit in the recorded process]).
  auto* old_handler = ::signal(SIGXFSZ, SIG_DFL);
  uintmax_t size = 0;
  for (const char* suffix : {"", "-wal"}) {
    std::error_code ec;
    size = std::max<uintmax_t>(size, fs::file_size(trace.path() + suffix, ec) * !ec);
  }
  struct rlimit limited = old;
  limited.rlim_cur = size + (64 << 10);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  constexpr uint64_t kMore = 200000;  // megabytes of events: far past the limit
  for (uint64_t i = 0; i < kMore; ++i) ev::mark("m");
  tidemark::record::flush();
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
  ::signal(SIGXFSZ, old_handler);
  const tidemark::record::RecordingStats rs = tidemark::record::stop();

  TraceReader r = TraceReader::open(trace.path());
  const std::optional<std::string> error = r.meta_value(tidemark::store::meta_keys::kWriterError);
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->find("no room to write: the file size limit (ulimit -f) is reached"),
            std::string::npos)
      << *error;
  EXPECT_FALSE(r.clean_end());
  // stop() stored the final count (the limit was lifted): every loss is in it.
  EXPECT_TRUE(r.loss_counted());
  EXPECT_GT(r.dropped_count(), 0u);
  EXPECT_EQ(marks(trace.path(), "m") + r.dropped_count(), 100 + kMore);
  EXPECT_EQ(rs.events + rs.dropped, 100 + kMore);
  EXPECT_EQ(r.event_count(), rs.events);
}

}  // namespace
