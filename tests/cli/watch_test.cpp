// `tidemark watch` following a trace while it is written: the test writes events with
// TraceWriter as the recorder does (WAL, a commit per step) while the real binary watches, then
// closes and finalizes the file. Expected numbers come from the events the test wrote.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "profiler/store/trace_writer.h"
#include "run_program.h"

namespace {

namespace fs = std::filesystem;
namespace ev = tidemark::events;
namespace st = tidemark::store;
using nlohmann::json;

constexpr int64_t kMiB = 1 << 20;
constexpr uint64_t kStepNs = 10'000'000;  // 10 ms per step
constexpr uint64_t kStart = 1'000'000'000;

using tl_test::tidemark;

std::vector<json> json_lines(const std::string& out) {
  std::vector<json> v;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) v.push_back(json::parse(line));
  return v;
}

// A training loop on cpu:0 whose every step keeps 1 MiB alive (the accumulated-loss pitfall)
// and frees a 4 MiB temporary: at the start of step k (k = 1..steps) 2 MiB of parameters and
// (k - 1) MiB of kept blocks are live; inside it the temporary adds 4 MiB.
class Loop {
 public:
  // `blocks` false: no parameters and no first segment (for segment_step only).
  Loop(const std::string& path, int64_t pid, int64_t finalizer_pid = 0, bool blocks = true) {
    st::TraceMeta meta;
    meta.start_ts_ns = kStart;
    meta.pid = pid;
    meta.finalizer_pid = finalizer_pid;
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    meta.host = host;
    meta.devices.push_back({ev::DeviceId{ev::DeviceType::cpu, 0}, "cpu", 0});
    w_ = st::TraceWriter::create(path, meta);
    if (!blocks) return;
    block(ev::Kind::segment_alloc, kStart, 0x10000000, 256 * kMiB);
    block(ev::Kind::alloc, kStart, 0x10000000, 2 * kMiB);
  }
  // Step k of an injected PyTorch run that leaks: its own caching allocator reserves one more
  // 2 MiB segment per step (no blocks are recorded).
  void segment_step(int64_t k) {
    const uint64_t t = step_event(k);
    block(ev::Kind::segment_alloc, t + 1000, 0x40000000 + static_cast<uint64_t>(k) * 2 * kMiB,
          2 * kMiB);
    w_->commit();
    end_ = t + 5000;
  }
  // Step k: the step event, the temporary, the kept block, the temporary's free.
  void step(int64_t k) {
    const uint64_t t = step_event(k);
    const uint64_t temp = 0x18000000, kept = 0x10000000 + static_cast<uint64_t>(k + 1) * kMiB;
    block(ev::Kind::alloc, t + 1000, temp, 4 * kMiB);
    block(ev::Kind::alloc, t + 2000, kept, kMiB);
    block(ev::Kind::free_requested, t + 3000, temp, 4 * kMiB);
    block(ev::Kind::free_completed, t + 3000, temp, 4 * kMiB);
    w_->commit();
    end_ = t + 5000;
  }
  void close() { w_->close(end_); }

 private:
  // Step k's event; returns its time.
  uint64_t step_event(int64_t k) {
    ev::Event e;
    e.kind = ev::Kind::step;
    e.ts_ns = kStart + static_cast<uint64_t>(k) * kStepNs;
    e.thread_id = 1;
    e.seq = ++seq_;
    e.name = {"step", static_cast<uint64_t>(k)};
    w_->append(e, 0);
    return e.ts_ns;
  }
  void block(ev::Kind kind, uint64_t ts, uint64_t addr, int64_t size) {
    ev::Event e;
    e.kind = kind;
    e.ts_ns = ts;
    e.thread_id = 1;
    e.seq = ++seq_;
    e.block.addr = addr;
    e.block.size = e.block.requested_size = static_cast<uint64_t>(size);
    e.block.segment = 0x10000000;
    w_->append(e, 0);
  }
  std::unique_ptr<st::TraceWriter> w_;
  uint64_t seq_ = 0, end_ = kStart;
};

fs::path dir() {
  return tl_test::temp_dir("tidemark_watch");
}

// The pid of a child that has exited (free, or reused much later): a recording process gone.
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

TEST(Watch, FollowsARecordingUntilItIsFinalized) {
  const std::string path = (dir() / "live.db").string();
  fs::remove(path);
  const std::string out = (dir() / "watch.out").string(), err = (dir() / "watch.err").string();
  fs::remove(out);
  int status = -1;
  // Started before the file exists: watch waits for it.
  std::thread watcher([&] {
    status = std::system((tl_test::quote(TIDEMARK_CLI) + " watch " + tl_test::quote(path) +
                          " --interval 50ms --json >" + tl_test::quote(out) + " 2>" +
                          tl_test::quote(err) + " </dev/null")
                             .c_str());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Loop loop(path, ::getpid());
  // Half the steps, then wait until watch has reported some (however slowly it started).
  for (int64_t k = 1; k <= 6; ++k) loop.step(k);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (tl_test::slurp(out).find("\"update\"") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int64_t k = 7; k <= 12; ++k) {
    loop.step(k);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  loop.close();
  st::finalize(path);
  watcher.join();
  tl_test::Result r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, tl_test::slurp(out),
                    tl_test::slurp(err)};
  ASSERT_EQ(r.rc, 0) << r.err << r.out;

  const std::vector<json> lines = json_lines(r.out);
  ASSERT_GE(lines.size(), 3u) << r.out;
  std::vector<json> updates;
  const json* growing = nullptr;
  for (const json& j : lines) {
    if (j["event"] == "update") updates.push_back(j);
    if (j["event"] == "growing") growing = &j;
  }
  // Several updates while the loop ran, covering steps 1..12 in order without gaps.
  ASSERT_GE(updates.size(), 2u) << r.out;
  int64_t next = 1;
  for (const json& u : updates) {
    EXPECT_EQ(u["device"], "cpu");
    EXPECT_EQ(u["first_step"], next) << u.dump();
    const int64_t last = u["last_step"];
    // At the end of step `last`: 2 MiB of parameters and `last` kept blocks; the peak inside
    // the steps reported is the last step's temporary on top of what it began with.
    EXPECT_EQ(u["allocated_bytes"], (2 + last) * kMiB) << u.dump();
    EXPECT_EQ(u["peak_allocated_bytes"], (2 + last - 1 + 4 + 1) * kMiB) << u.dump();
    EXPECT_EQ(u["reserved_bytes"], 256 * kMiB);
    next = last + 1;
  }
  EXPECT_EQ(next, 13);
  // 1 MiB more live at the start of every step.
  ASSERT_NE(growing, nullptr) << r.out;
  EXPECT_EQ((*growing)["bytes_per_step"], kMiB);
  EXPECT_DOUBLE_EQ((*growing)["r2"].get<double>(), 1.0);
  const json& end = lines.back();
  EXPECT_EQ(end["event"], "end");
  EXPECT_EQ(end["finalized"], true);
  EXPECT_EQ(end["steps"], 12);
  EXPECT_EQ(end["peak_allocated_bytes"], (2 + 11 + 4 + 1) * kMiB);
  EXPECT_EQ(end["peak_allocated_time_ns"], 12 * kStepNs + 2000);
  EXPECT_EQ(end["allocated_bytes"], 14 * kMiB);
}

TEST(Watch, OnceOnAFinishedTraceInText) {
  const std::string path = (dir() / "done.db").string();
  {
    Loop loop(path, ::getpid());
    for (int64_t k = 1; k <= 6; ++k) loop.step(k);
    loop.close();
  }
  st::finalize(path);
  const tl_test::Result r = tidemark({"watch", path, "--once"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("(cpu)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1-6"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("8.00 MiB"), std::string::npos) << r.out;   // allocated at the end
  EXPECT_NE(r.out.find("12.00 MiB"), std::string::npos) << r.out;  // peak: step 6's temporary
  EXPECT_NE(r.out.find("! live memory at the start of a step grows by about 1.00 MiB per step"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("finalized: peak allocated 12.00 MiB"), std::string::npos) << r.out;
}

TEST(Watch, ARecordingWhoseProcessIsGoneEndsWithExit1) {
  const pid_t child = dead_pid();
  const std::string path = (dir() / "crashed.db").string();
  {
    Loop loop(path, child);
    for (int64_t k = 1; k <= 3; ++k) loop.step(k);
  }  // never closed nor finalized, as after a SIGKILL
  const tl_test::Result r = tidemark({"watch", path, "--interval", "20ms"});
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("ended without finalizing the trace; `tidemark finalize " + path),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("stopped: peak allocated"), std::string::npos) << r.out;
}

// Under `tidemark record` the program exits first and record finalizes afterwards: while that
// process is there, watch waits for the finalize instead of reporting a crash.
TEST(Watch, WaitsForTheFinalizerAfterTheProgramExits) {
  const pid_t child = dead_pid();
  const std::string path = (dir() / "finalizing.db").string();
  {
    Loop loop(path, child, /*finalizer_pid=*/::getpid());
    for (int64_t k = 1; k <= 3; ++k) loop.step(k);
    loop.close();
  }
  tl_test::Result r;
  std::thread watcher([&] { r = tidemark({"watch", path, "--interval", "20ms"}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // 20 idle polls
  st::finalize(path);
  watcher.join();
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("finalized: peak allocated 9.00 MiB"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("without finalizing"), std::string::npos) << r.err;
}

// A trace of segments only (an injected PyTorch run): the growth check follows reserved memory.
TEST(Watch, ReservedGrowthOfASegmentsOnlyTrace) {
  const std::string path = (dir() / "segments.db").string();
  {
    Loop loop(path, ::getpid(), 0, /*blocks=*/false);
    for (int64_t k = 1; k <= 8; ++k) loop.segment_step(k);
    loop.close();
  }
  st::finalize(path);
  const tl_test::Result r = tidemark({"watch", path, "--once", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const json* growing = nullptr;
  const std::vector<json> lines = json_lines(r.out);
  for (const json& j : lines)
    if (j["event"] == "growing") growing = &j;
  ASSERT_NE(growing, nullptr) << r.out;
  EXPECT_EQ((*growing)["curve"], "reserved");
  EXPECT_EQ((*growing)["bytes_per_step"], 2 * kMiB);
}

// `tidemark record --watch`: the watch's lines on stderr while the program runs, its last line
// (the peaks) before record's own summary; a program that writes no trace ends it at once.
TEST(Watch, RecordWatchPrintsWhileTheProgramRuns) {
  const std::string path = (dir() / "record_watch.db").string();
  const tl_test::Result r =
      tidemark({"record", "--watch", "-o", path, "--",
                std::string(TIDEMARK_SAMPLES_BIN) + "/pitfall_accumulated_loss", "--steps", "20"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const size_t header = r.err.find("steps    allocated"), growing = r.err.find("! live memory");
  const size_t peaks = r.err.find("finalized: peak allocated"),
               recorded = r.err.find("tidemark: recorded");
  EXPECT_NE(header, std::string::npos) << r.err;
  EXPECT_NE(growing, std::string::npos) << r.err;  // 20 steps of an accumulated loss
  ASSERT_NE(peaks, std::string::npos) << r.err;
  ASSERT_NE(recorded, std::string::npos) << r.err;
  EXPECT_LT(peaks, recorded) << r.err;
  EXPECT_EQ(r.out.find("finalized:"), std::string::npos) << "the watch writes to stderr only";

  // Again into the same file: the watch waits for this run's trace instead of reporting the
  // one left by the first run.
  const tl_test::Result again =
      tidemark({"record", "--watch", "-o", path, "--",
                std::string(TIDEMARK_SAMPLES_BIN) + "/pitfall_accumulated_loss", "--steps", "5"});
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_NE(again.err.find(", 5 steps; tidemark summary"), std::string::npos) << again.err;
  EXPECT_EQ(again.err.find("20 steps"), std::string::npos) << again.err;

  // A program that records nothing leaves an earlier trace at the path as it was.
  const auto size_before = std::filesystem::file_size(path);

  const auto start = std::chrono::steady_clock::now();
  const tl_test::Result none =
      tidemark({"record", "--watch", "-o", path, "--no-cuda", "--", "/bin/true"});
  EXPECT_EQ(none.rc, 0) << none.err;
  EXPECT_NE(none.err.find("wrote no trace to " + path + " (the trace there is an earlier run's"),
            std::string::npos)
      << none.err;
  EXPECT_EQ(none.err.find("finalized:"), std::string::npos) << none.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(std::filesystem::file_size(path), size_before);
  const tl_test::Result kept = tidemark({"watch", path, "--once"});
  EXPECT_NE(kept.out.find(", 5 steps; tidemark summary"), std::string::npos) << kept.out;
}

TEST(Watch, BadArgumentsExit2WithOneLine) {
  const tl_test::Result missing =
      tidemark({"watch", (dir() / "none.db").string(), "--wait", "100ms"});
  EXPECT_EQ(missing.rc, 2);
  EXPECT_NE(missing.err.find("none.db: no such file (waited 100ms"), std::string::npos)
      << missing.err;
  const tl_test::Result interval =
      tidemark({"watch", (dir() / "none.db").string(), "--interval", "fast"});
  EXPECT_EQ(interval.rc, 2);
  EXPECT_NE(interval.err.find("--interval: expected a duration"), std::string::npos)
      << interval.err;
  std::ofstream((dir() / "text.db").string()) << "not a trace\n";
  const tl_test::Result text = tidemark({"watch", (dir() / "text.db").string(), "--once"});
  EXPECT_EQ(text.rc, 2);
  EXPECT_NE(text.err.find("text.db"), std::string::npos) << text.err;
  const std::string cpu_only = (dir() / "cpu_only.db").string();
  {
    Loop loop(cpu_only, ::getpid());
    loop.step(1);
    loop.close();
  }
  st::finalize(cpu_only);
  const tl_test::Result device = tidemark({"watch", cpu_only, "--device", "cuda", "--once"});
  EXPECT_EQ(device.rc, 2) << device.out;
  EXPECT_NE(device.err.find("--device cuda: the trace has no such device (it has cpu)"),
            std::string::npos)
      << device.err;
}

}  // namespace
