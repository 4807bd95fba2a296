// `tidemark record -- python ...` (cli/record_python.h): Python programs recorded through the
// startup hook, on a stand-in torch (tests/data/fake_torch) whose caching allocator counts what
// it did, so the imported trace is held against the program's own figures: every allocation,
// the requested and reserved peaks, a step where each optimizer step ended, the OOM, the ranks.
// The hook chains to the environment's own sitecustomize; a program without torch or without
// CUDA is told apart and records nothing (exit 1); --no-python-hook and --dry-run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <unordered_map>
#include <vector>

#include "profiler/store/trace_reader.h"
#include "run_program.h"

namespace {

namespace ev = tidemark::events;

const std::string kFake = std::string(TIDEMARK_TEST_DATA) + "/fake_torch";
const std::string kTrain = kFake + "/programs/train.py";

struct Figures {
  uint64_t allocations = 0, peak_requested = 0, peak_reserved = 0;
};

// What the program printed its allocator counted.
Figures printed(const std::string& out) {
  std::smatch m;
  Figures f;
  if (std::regex_search(
          out, m, std::regex(R"(allocations (\d+) peak_requested (\d+) peak_reserved (\d+))"))) {
    f.allocations = std::stoull(m[1]);
    f.peak_requested = std::stoull(m[2]);
    f.peak_reserved = std::stoull(m[3]);
  }
  return f;
}

struct Trace {
  std::map<std::string, Figures> devices;  // by device name
  uint64_t steps = 0, ooms = 0;
};

// The trace's figures per device, folded from its events here: allocs counted, live requested
// bytes (up at alloc, down at free_requested), reserved bytes (segment events).
Trace read(const std::string& path) {
  Trace t;
  auto reader = tidemark::store::TraceReader::open(path);
  std::map<std::pair<int, int>, std::string> names;
  for (const auto& d : reader.devices())
    names[{static_cast<int>(d.info.id.type), d.info.id.index}] = d.info.name;
  struct Live {
    uint64_t requested = 0, reserved = 0;
    std::unordered_map<uint64_t, uint64_t> blocks;
  };
  std::map<std::string, Live> live;
  reader.for_each_event([&](const ev::Event& e, uint64_t) {
    const std::string& name = names[{static_cast<int>(e.device.type), e.device.index}];
    Figures& f = t.devices[name];
    Live& l = live[name];
    switch (e.kind) {
      case ev::Kind::alloc:
        ++f.allocations;
        l.blocks[e.block.addr] = e.block.requested_size;
        l.requested += e.block.requested_size;
        f.peak_requested = std::max(f.peak_requested, l.requested);
        break;
      case ev::Kind::free_requested: {
        auto it = l.blocks.find(e.block.addr);
        if (it != l.blocks.end()) l.requested -= it->second, l.blocks.erase(it);
        break;
      }
      case ev::Kind::segment_alloc:
        l.reserved += e.block.size;
        f.peak_reserved = std::max(f.peak_reserved, l.reserved);
        break;
      case ev::Kind::segment_free:
        l.reserved -= e.block.size;
        break;
      case ev::Kind::step:
        ++t.steps;
        break;
      case ev::Kind::oom:
        ++t.ooms;
        break;
      default:
        break;
    }
  });
  return t;
}

std::string dir() {
  return tl_test::temp_dir("tidemark_record_python").string();
}

tl_test::Result record(const std::vector<std::string>& args,
                       const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {TIDEMARK_CLI, "record"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> e = {"PYTHONPATH=" + kFake + ":" + kFake + "/programs"};
  e.insert(e.end(), env.begin(), env.end());
  return tl_test::run(argv, e);
}

// The figures the program printed are the trace's: an import exact to the allocation.
void expect_same(const Figures& program, const Figures& trace) {
  EXPECT_GT(program.allocations, 0u);
  EXPECT_EQ(trace.allocations, program.allocations);
  EXPECT_EQ(trace.peak_requested, program.peak_requested);
  EXPECT_EQ(trace.peak_reserved, program.peak_reserved);
}

TEST(RecordPython, ATrainingLoopIsRecordedWithAStepWhereEachOptimizerStepEnded) {
  const std::string out = dir() + "/train.db";
  tl_test::Result r = record({"-o", out, "--", "python3", kTrain, "train", "5"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const Trace t = read(out);
  ASSERT_EQ(t.devices.count("cuda:0"), 1u) << r.err;
  expect_same(printed(r.out), t.devices.at("cuda:0"));
  EXPECT_EQ(t.steps, 5u);
  EXPECT_NE(r.err.find("peak reserved"), std::string::npos) << r.err;  // the summary
}

TEST(RecordPython, StepOnMarksAStepWhereTheFunctionReturns) {
  const std::string out = dir() + "/loop.db";
  tl_test::Result r = record(
      {"-o", out, "--step-on", "programs_steps:train_step", "--", "python3", kTrain, "loop", "4"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const Trace t = read(out);
  expect_same(printed(r.out), t.devices.at("cuda:0"));
  EXPECT_EQ(t.steps, 4u);
}

// The script's own step function: `train.py train` calls its `train_step` (defined in the
// script, run as __main__) once a step; with --step-on the optimizer's hook is not used, so the
// five steps are the five returns, the first one included.
TEST(RecordPython, StepOnTheScriptsOwnFunctionMarksEachReturn) {
  const std::string out = dir() + "/main_step.db";
  tl_test::Result r = record(
      {"-o", out, "--step-on", "__main__:train_step", "--", "python3", kTrain, "train", "5"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const Trace t = read(out);
  expect_same(printed(r.out), t.devices.at("cuda:0"));
  EXPECT_EQ(t.steps, 5u);
}

TEST(RecordPython, TheEnvironmentsOwnSitecustomizeStillRuns) {
  const std::string user = dir() + "/user_site";
  std::filesystem::create_directories(user);
  const std::string marker = dir() + "/user_sitecustomize_ran";
  std::filesystem::remove(marker);
  std::ofstream(user + "/sitecustomize.py")
      << "import os\nopen(os.environ['MARKER'], 'w').close()\n";
  const std::string out = dir() + "/chained.db";
  std::vector<std::string> argv = {TIDEMARK_CLI, "record", "-o",    out, "--",
                                   "python3",    kTrain,   "train", "2"};
  tl_test::Result r = tl_test::run(argv, {"PYTHONPATH=" + user + ":" + kFake, "MARKER=" + marker});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(marker)) << "the user's sitecustomize did not run";
  expect_same(printed(r.out), read(out).devices.at("cuda:0"));
}

TEST(RecordPython, ASigtermStillLeavesTheTrace) {
  const std::string out = dir() + "/term.db", ready = dir() + "/term_ready";
  std::filesystem::remove_all(ready);
  std::filesystem::create_directories(ready);
  // tidemark forwards SIGTERM to the program; the hook writes the snapshot, then the program
  // dies of the signal as it would have.
  const std::string script = "PYTHONPATH=" + tl_test::quote(kFake) + " " +
                             tl_test::quote(TIDEMARK_CLI) + " record -o " + tl_test::quote(out) +
                             " -- python3 " + tl_test::quote(kTrain) + " sleep " +
                             tl_test::quote(ready) + " & pid=$!; for i in $(seq 1 300); do [ -e " +
                             tl_test::quote(ready + "/ready") +
                             " ] && break; sleep 0.05; done; kill -TERM $pid; wait $pid";
  tl_test::Result r = tl_test::run({"/bin/sh", "-c", script});
  EXPECT_EQ(r.rc, 128 + 15) << r.err;
  const Trace t = read(out);
  ASSERT_EQ(t.devices.count("cuda:0"), 1u) << r.err;
  expect_same(printed(r.out), t.devices.at("cuda:0"));
}

TEST(RecordPython, TheSnapshotIsWrittenAtTheFirstOutOfMemoryError) {
  const std::string out = dir() + "/oom.db";
  // 64 MiB of device; the program exits at once on the OOM, without exit handlers.
  tl_test::Result r =
      record({"-o", out, "--", "python3", kTrain, "oom"}, {"FAKE_TORCH_CAPACITY=67108864"});
  EXPECT_EQ(r.rc, 3) << r.err;
  const Trace t = read(out);
  EXPECT_EQ(t.ooms, 1u);
  expect_same(printed(r.out), t.devices.at("cuda:0"));
  EXPECT_NE(r.err.find("ran out of CUDA memory"), std::string::npos) << r.err;
}

TEST(RecordPython, RanksAreMergedIntoOneTrace) {
  const std::string out = dir() + "/ranks.db";
  tl_test::Result r = record({"-o", out, "--", "python3", kTrain, "ranks", "3"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const Trace t = read(out);
  ASSERT_EQ(t.devices.count("rank0/cuda:0"), 1u) << r.err;
  ASSERT_EQ(t.devices.count("rank1/cuda:0"), 1u) << r.err;
  // Both ranks ran the same loop: each prints the same figures.
  const Figures f = printed(r.out);
  expect_same(f, t.devices.at("rank0/cuda:0"));
  expect_same(f, t.devices.at("rank1/cuda:0"));
  EXPECT_EQ(t.steps, 6u);  // three per rank
}

TEST(RecordPython, WithoutTorchOrCudaNothingIsRecordedAndTheRunSaysWhy) {
  const std::string out = dir() + "/none.db";
  std::filesystem::remove(out);
  tl_test::Result r = record({"-o", out, "--", "python3", "-c", "print('no torch here')"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("without importing torch"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("autostart"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  r = record({"-o", out, "--", "python3", kTrain, "train", "1"}, {"FAKE_TORCH_CUDA=0"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("without CUDA"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no CUDA memory was used"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  // The program's own failure is its exit status, not ours.
  r = record({"-o", out, "--", "python3", "-c", "raise SystemExit(7)"});
  EXPECT_EQ(r.rc, 7);
}

// Bug: every run that left no status was said to be a Python run with -S or -I, also one that
// ended by os._exit or was killed.
TEST(RecordPython, NoWordFromTheHookIsExplainedByHowTheProgramEnded) {
  const std::string out = dir() + "/noword.db";
  tl_test::Result r = record({"-o", out, "--", "python3", "-c", "import os; os._exit(0)"});
  EXPECT_NE(r.err.find("os._exit"), std::string::npos) << r.err;
  r = record({"-o", out, "--", "python3", "-c",
              "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"});
  EXPECT_NE(r.err.find("ended by signal 9"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("-S or -I"), std::string::npos) << r.err;
}

TEST(RecordPython, NoPythonHookAndDryRun) {
  const std::string out = dir() + "/nohook.db";
  std::filesystem::remove(out);
  tl_test::Result r =
      record({"-o", out, "--no-python-hook", "--no-cuda", "--", "python3", kTrain, "train", "1"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_NE(r.err.find("which --no-python-hook turned off"), std::string::npos) << r.err;
  r = record({"-o", out, "--dry-run", "--max-entries", "5000", "--python-stacks", "all", "--",
              "python3", kTrain, "train", "1"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("would run: python3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TIDEMARK_PYTHON_MAX_ENTRIES=5000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TIDEMARK_PYTHON_STACKS=all"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sitecustomize.py"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("allocations"), std::string::npos) << "the program ran";
  EXPECT_FALSE(std::filesystem::exists(out));
}

// Bug: a Python process that outlived `record` wrote its status into the hook's folder after
// record had removed it: a folder re-created there by another user, with a link inside,
// received it (or the process printed a traceback). The hook writes only into a folder of the
// user's that no one else may enter, never through a link, and says nothing when it is gone.
TEST(RecordPython, TheHookNeverWritesIntoAFolderThatIsNotRecordsOwn) {
  namespace fs = std::filesystem;
  const std::string hook = fs::path(TIDEMARK_CLI).parent_path() / "python";
  ASSERT_TRUE(fs::exists(hook + "/sitecustomize.py")) << hook;
  const fs::path base = dir() + "/hook_folder";
  fs::remove_all(base);
  fs::create_directories(base);
  const std::string victim = (base / "victim.txt").string();
  std::ofstream(victim) << "precious\n";
  // The shell's pid is the Python process's (exec): the names the hook would write are known.
  auto run_in = [&](const fs::path& folder) {
    const std::string plant = "for n in status-pid$$.json status-pid$$.json.part-$$; do ln -s " +
                              tl_test::quote(victim) + " " + tl_test::quote(folder.string()) +
                              "/$n 2>/dev/null; done; exec python3 -c 'print(1)'";
    return tl_test::run({"/bin/sh", "-c", plant},
                        {"PYTHONPATH=" + hook, "TIDEMARK_PYTHON_DIR=" + folder.string()});
  };
  // Gone: nothing written, nothing said.
  tl_test::Result r = run_in(base / "gone");
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_FALSE(fs::exists(base / "gone"));
  // Re-created by another user (nobody), links inside.
  const fs::path theirs = base / "theirs";
  fs::create_directories(theirs);
  fs::permissions(theirs, fs::perms::owner_all);
  if (::chown(theirs.c_str(), 65534, 65534) == 0 && ::geteuid() != 65534) {
    r = run_in(theirs);
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err, "");
  }
  // The user's own folder, with links planted in it: not written through.
  const fs::path mine = base / "mine";
  fs::create_directories(mine);
  fs::permissions(mine, fs::perms::owner_all);
  r = run_in(mine);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(tl_test::slurp(victim), "precious\n");
  // And in a folder that is record's own, the status is written.
  const fs::path fresh = base / "fresh";
  fs::create_directories(fresh);
  fs::permissions(fresh, fs::perms::owner_all);
  r = tl_test::run({"python3", "-c", "print(1)"},
                   {"PYTHONPATH=" + hook, "TIDEMARK_PYTHON_DIR=" + fresh.string()});
  EXPECT_EQ(r.rc, 0) << r.err;
  size_t statuses = 0;
  for (const auto& e : fs::directory_iterator(fresh))
    statuses += e.path().filename().string().starts_with("status-pid");
  EXPECT_EQ(statuses, 1u);
}

// A real PyTorch, where one is installed: on the CPU it is told apart as PyTorch without CUDA.
TEST(RecordPython, RealPyTorchWithoutAGpuSaysNoCudaMemoryWasUsed) {
  if (tl_test::run({"python3", "-c", "import torch"}).rc != 0)
    GTEST_SKIP() << "PyTorch is not installed for python3";
  if (tl_test::run(
          {"python3", "-c", "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"})
          .rc == 0)
    GTEST_SKIP() << "this machine has a GPU: the no-CUDA message is not what happens";
  const std::string out = dir() + "/real_cpu.db";
  tl_test::Result r = tl_test::run({TIDEMARK_CLI, "record", "-o", out, "--", "python3", "-c",
                                    "import torch; x = torch.ones(1000); print(float(x.sum()))"});
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.out.find("1000.0"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("without CUDA"), std::string::npos) << r.err;
}

}  // namespace
