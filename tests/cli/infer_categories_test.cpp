// Inferred categories and steps (Note [Inferred categories] in profiler/importers/infer.cpp),
// measured against the truth: tensorlib records each block's role (parameter, gradient, ...),
// a PyTorch snapshot does not. Each program is recorded, exported as a snapshot without its
// categories (`export --no-categories`, which also writes no annotations, scopes or steps, as
// PyTorch's snapshots of a program without record_function have none), imported, and the
// imported trace's inferred categories are held against the recorded ones, block by block, over
// the bytes live at the recorded allocated peak. docs/importers.md quotes the figures printed.
// Also: a real PyTorch snapshot's inferred iterations against its own annotations, and the
// marking of inferred categories in `summary`.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "profiler/analysis/steps.h"
#include "profiler/analysis/trace.h"
#include "profiler/store/trace_reader.h"
#include "run_program.h"

namespace {

namespace fs = std::filesystem;
namespace an = tidemark::analysis;
namespace ev = tidemark::events;
using tidemark::store::AllocationRow;
using tidemark::store::TraceReader;
using tl_test::Result;
using tl_test::tidemark;

fs::path dir() {
  return tl_test::temp_dir("tidemark_infer");
}

// tensorlib leaves a block it knows no role for `unknown` (an op's output no backward saved):
// a temporary, or unknown, is the right answer for it.
bool right(ev::Category truth, ev::Category inferred) {
  if (truth == ev::Category::unknown)
    return inferred == ev::Category::unknown || inferred == ev::Category::temporary;
  return truth == inferred;
}

struct Measured {
  uint64_t peak_bytes = 0, right_bytes = 0;
  uint64_t tagged_bytes = 0, tagged_right_bytes = 0;  // blocks tensorlib gave a role
  std::map<std::pair<ev::Category, ev::Category>, uint64_t>
      confusion;  // (truth, inferred) -> bytes
  size_t recorded_steps = 0, inferred_steps = 0, steps_in_place = 0;
  std::string basis;  // meta categories_inferred
};

std::string pct(uint64_t a, uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%",
                b ? 100.0 * static_cast<double>(a) / static_cast<double>(b) : 100.0);
  return buf;
}

// Records `program`, exports it without categories, imports it, and compares.
// One integer column of a query on a trace file, read directly (the trace's schema is a contract).
std::vector<uint64_t> column(const fs::path& trace, const char* sql) {
  std::vector<uint64_t> out;
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(trace.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK) << trace;
  sqlite3_stmt* q = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &q, nullptr), SQLITE_OK) << sql;
  while (q && sqlite3_step(q) == SQLITE_ROW)
    out.push_back(static_cast<uint64_t>(sqlite3_column_int64(q, 0)));
  sqlite3_finalize(q);
  sqlite3_close(db);
  return out;
}

Measured measure(const std::string& name, const std::vector<std::string>& program) {
  Measured m;
  const std::string recorded = (dir() / (name + ".db")).string();
  const std::string pickle = (dir() / (name + ".pickle")).string();
  const std::string imported = (dir() / (name + ".imported.db")).string();
  // Deep stacks: inference reads the frames up to the program's own (the training loop, the
  // autograd engine, the optimizer), and an unoptimised build (the sanitizers') has many more
  // tensorlib frames under them than the default 16 reach.
  std::vector<std::string> args{"record", "--stacks", "64", "-o", recorded, "--"};
  args.insert(args.end(), program.begin(), program.end());
  Result r = tidemark(args);
  EXPECT_EQ(r.rc, 0) << r.err;
  r = tidemark({"export", recorded, "--format", "snapshot", "--no-categories", "-o", pickle});
  EXPECT_EQ(r.rc, 0) << r.err;
  r = tidemark({"import", pickle, "-o", imported});
  EXPECT_EQ(r.rc, 0) << r.err;
  if (::testing::Test::HasFailure()) return m;

  an::Trace truth = an::Trace::open(recorded), guess = an::Trace::open(imported);
  m.basis = guess.categories_inferred();
  // The device with the highest allocated peak (the samples run on one).
  int64_t device = 0;
  int64_t peak = -1;
  uint64_t peak_ts = 0;
  for (const auto& d : truth.devices())
    if (auto p = truth.reader().peak(d.id); p && p->bytes > peak)
      peak = p->bytes, peak_ts = p->ts_ns, device = d.id;
  EXPECT_EQ(guess.devices().size(), 1u);
  if (peak < 0 || guess.devices().size() != 1) return m;
  const int64_t imported_device = guess.devices()[0].id;

  // The export writes every block's alloc in order and the import keeps it: the n-th
  // allocation of one is the n-th of the other.
  const std::vector<AllocationRow> a = truth.reader().allocations(device);
  const std::vector<AllocationRow> b = guess.reader().allocations(imported_device);
  EXPECT_EQ(a.size(), b.size());
  if (a.size() != b.size()) return m;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].addr, b[i].addr) << "allocation " << i;
    const bool live =
        a[i].alloc_ts <= peak_ts && (!a[i].free_requested_ts || *a[i].free_requested_ts > peak_ts);
    if (!live) continue;
    m.peak_bytes += a[i].size;
    m.confusion[{a[i].category, b[i].category}] += a[i].size;
    if (right(a[i].category, b[i].category)) m.right_bytes += a[i].size;
    if (a[i].category != ev::Category::unknown) {
      m.tagged_bytes += a[i].size;
      if (right(a[i].category, b[i].category)) m.tagged_right_bytes += a[i].size;
    }
  }
  EXPECT_EQ(static_cast<int64_t>(m.peak_bytes), peak) << "the live allocations add up to the peak";

  // Steps: the k-th inferred boundary falls in the k-th recorded step (the last allocation
  // before the boundary made by the thread that marked the steps -- the loop's -- is one the
  // recorded step made). Other threads' allocations are left out of the placing: a DataLoader
  // worker's next batch is ordered against the loop's step mark by the scheduler alone, so one
  // landing between the mark and the loop's first allocation of the step is no fault of the
  // boundary.
  const std::vector<an::StepStats> rs = an::step_stats(truth, device);
  const std::vector<an::StepStats> is = an::step_stats(guess, imported_device);
  m.recorded_steps = rs.size();
  m.inferred_steps = is.size();
  // A step is placed by order, not time (entries of a fast loop share microseconds): the
  // allocations before it are those of smaller seq.
  const std::vector<uint64_t> step_seqs =
      column(imported, "SELECT seq FROM steps ORDER BY ts, seq");
  EXPECT_EQ(step_seqs.size(), is.size());
  const std::vector<uint64_t> threads = column(recorded, "SELECT DISTINCT thread FROM steps");
  const std::set<uint64_t> loop_threads(threads.begin(), threads.end());
  EXPECT_EQ(loop_threads.size(), 1u) << "the samples mark their steps from one thread";
  for (size_t k = 0; k < is.size() && k < rs.size() && k < step_seqs.size(); ++k) {
    size_t before = 0;  // imported allocations made before the boundary
    while (before < b.size() && b[before].seq < step_seqs[k]) ++before;
    while (before > 0 && !loop_threads.count(a[before - 1].thread)) --before;
    if (before == 0) continue;
    const uint64_t t = a[before - 1].alloc_ts;  // that allocation in the recorded trace
    const uint64_t start = truth.origin_ns() + rs[k].start_ns;
    const uint64_t end = k + 1 < rs.size() ? truth.origin_ns() + rs[k + 1].start_ns : UINT64_MAX;
    if (t >= start && t < end) ++m.steps_in_place;
  }

  std::string confusion;
  for (auto& [k, bytes] : m.confusion)
    confusion += "\n    recorded " + std::string(ev::category_name(k.first)) + ", inferred " +
                 std::string(ev::category_name(k.second)) + ": " + std::to_string(bytes) + " B";
  std::printf(
      "%s: %s of %llu B live at the allocated peak right (%s of the %llu B tensorlib tagged); "
      "steps: %zu recorded, %zu inferred, %zu in place; inferred from %s%s\n",
      name.c_str(), pct(m.right_bytes, m.peak_bytes).c_str(),
      static_cast<unsigned long long>(m.peak_bytes),
      pct(m.tagged_right_bytes, m.tagged_bytes).c_str(),
      static_cast<unsigned long long>(m.tagged_bytes), m.recorded_steps, m.inferred_steps,
      m.steps_in_place, m.basis.c_str(), confusion.c_str());
  return m;
}

void expect_accurate(const Measured& m) {
  EXPECT_FALSE(m.basis.empty()) << "the imported trace says its categories are inferred";
  EXPECT_GE(static_cast<double>(m.right_bytes), 0.95 * static_cast<double>(m.peak_bytes))
      << pct(m.right_bytes, m.peak_bytes) << " of the bytes at the peak";
}

TEST(InferCategories, FashionMnistTraining) {
  Measured m = measure("fashion_mnist",
                       {std::string(TIDEMARK_SAMPLES_BIN) + "/train_fashion_mnist", "--model",
                        "mlp", "--epochs", "1", "--limit", "1000", "--batch-size", "100"});
  expect_accurate(m);
  // Steps from the optimizer's frames: one per training step, each where it was recorded.
  EXPECT_EQ(m.inferred_steps, m.recorded_steps);
  EXPECT_EQ(m.steps_in_place, m.recorded_steps);
}

class InferPitfall : public ::testing::TestWithParam<std::string> {};

// Steps from the repeated allocations (rule 5): the pitfalls train without an optimizer that
// allocates, so their iterations are found by repetition, each where it was recorded (the
// DataLoader's too, whose worker threads interleave their batches with the loop's
// allocations differently every iteration).
void expect_steps(const Measured& m) {
  EXPECT_EQ(m.inferred_steps, m.recorded_steps);
  EXPECT_EQ(m.steps_in_place, m.recorded_steps);
}

TEST_P(InferPitfall, Accurate) {
  const std::string sample = GetParam();
  Measured m = measure(sample, {std::string(TIDEMARK_SAMPLES_BIN) + "/pitfall_" + sample});
  expect_accurate(m);
  expect_steps(m);
}

// The fixed variants, which the rules were not written against: their steps.
TEST_P(InferPitfall, StepsOfTheFixedVariant) {
  const std::string sample = GetParam();
  Measured m = measure(sample + "_fixed",
                       {std::string(TIDEMARK_SAMPLES_BIN) + "/pitfall_" + sample, "--fixed"});
  expect_steps(m);
}

// A real PyTorch training snapshot: three iterations of zero_grad, forward, backward and an
// Adam step (tests/data/pytorch/README.md), each bracketed by record_function ranges the
// importer reads as steps. The phases inferred from the frames alone find the same three
// iterations, and `summary` labels the categories as inferred.
TEST(InferCategories, RealTrainingSnapshotHasItsIterations) {
  const std::string trace = (dir() / "niu.db").string();
  Result r = tidemark({"import",
                       std::string(TIDEMARK_TEST_DATA) +
                           "/pytorch/niu_forward_and_backward_memory_snapshot_200.pickle",
                       "-o", trace});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(r.out, m, std::regex("([0-9]+) steps inferred from the annotations")))
      << r.out;
  const std::string iterations = m[1];
  EXPECT_EQ(iterations, "3");
  ASSERT_TRUE(
      std::regex_search(r.out, m, std::regex("allocation categories inferred from ([^\n]*)")))
      << r.out;
  const std::string basis = m[1];
  EXPECT_NE(basis.find(iterations + " backward"), std::string::npos) << basis;
  EXPECT_NE(basis.find(iterations + " optimizer"), std::string::npos) << basis;

  nlohmann::json s = nlohmann::json::parse(tidemark({"summary", trace, "--json"}).out);
  EXPECT_EQ(s["categories_inferred"], basis);
  // After an Adam step, the moments are part of every later peak, at the end of a forward; the
  // gradients are not (zero_grad frees them before each forward), and cuBLAS's two workspaces
  // (the program's thread's and the autograd engine's, 8,519,680 bytes each: their frames are
  // at::cuda::getNewWorkspace) are no category of the program's.
  std::map<std::string, int64_t> at_peak;
  for (const auto& g : s["categories_at_peak"]["groups"]) at_peak[g["key"]] = g["bytes"];
  EXPECT_GT(at_peak["optimizer_state"], 0);
  EXPECT_EQ(at_peak["gradient"], 0);
  EXPECT_EQ(at_peak["unknown"], 2 * 8519680);
  EXPECT_GT(at_peak["activation"], 0);
  r = tidemark({"summary", trace});
  EXPECT_NE(r.out.find("(inferred, not recorded: from " + basis + ")"), std::string::npos) << r.out;
}

// A recorded trace's categories are not inferred: `categories_inferred` is null.
TEST(InferCategories, RecordedCategoriesAreNotMarkedInferred) {
  const std::string trace = (dir() / "recorded.db").string();
  Result r =
      tidemark({"record", "-o", trace, "--",
                std::string(TIDEMARK_SAMPLES_BIN) + "/pitfall_retain_graph", "--steps", "2"});
  ASSERT_EQ(r.rc, 0) << r.err;
  nlohmann::json s = nlohmann::json::parse(tidemark({"summary", trace, "--json"}).out);
  EXPECT_TRUE(s["categories_at_peak"].is_object());
  EXPECT_TRUE(s["categories_inferred"].is_null());
  // --no-categories is for snapshots only.
  r = tidemark(
      {"export", trace, "--format", "csv", "--no-categories", "-o", (dir() / "x.csv").string()});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--no-categories"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir() / "x.csv"));
}

INSTANTIATE_TEST_SUITE_P(Samples, InferPitfall,
                         ::testing::Values("accumulated_loss", "retain_graph",
                                           "eval_without_no_grad", "sync_in_loop",
                                           "empty_cache_referenced", "fragmentation",
                                           "checkpointing", "view_retention",
                                           "transpose_contiguous", "dataloader_workers"));

// Note [State before the history] and Note [Allocation site] on a real one-step AdamW benchmark
// (a 2.7B model, fp32, the history begun after two warm-up steps): the expert's account of the
// file puts 12.69 GiB of parameters, 12.69 GiB of gradients and 25.38 GiB of AdamW's moments
// under the peak; before, all 38.46 GiB made before the history read `parameter`, and the
// gradients' site was `XCBDisconnectStub`, a name the snapshot's unwinder gave the frames
// inside its own capture and outside the engine thread's start.
TEST(InferCategories, AdamStateMadeBeforeTheHistoryIsNotParameters) {
  const fs::path dir = tl_test::temp_dir("tidemark_infer") / "labelled";
  fs::create_directories(dir);
  const std::string name = "aimetrics_2.7b_train_seq128";
  tl_test::Result r =
      tl_test::run({"tar", "--zstd", "-xf",
                    std::string(TIDEMARK_TEST_DATA) + "/pytorch/labelled/snapshots.tar.zst", "-C",
                    dir.string(), name + ".pickle"});
  if (r.rc != 0)
    GTEST_SKIP() << "could not unpack the labelled snapshots (is zstd installed?): " << r.err;
  tl_test::Result s =
      tl_test::run({TIDEMARK_CLI, "summary", (dir / (name + ".pickle")).string(), "--json"});
  ASSERT_EQ(s.rc, 0) << s.err;
  const nlohmann::json j = nlohmann::json::parse(s.out);
  std::map<std::string, double> gib;  // requested, as the account's figures are
  for (const nlohmann::json& g : j["categories_at_peak"]["groups"])
    gib[g["key"].get<std::string>()] = g["requested_bytes"].get<double>() / double(1 << 30);
  EXPECT_NEAR(gib["parameter"], 12.69, 0.06);
  EXPECT_NEAR(gib["optimizer_state"], 25.38, 0.12);
  EXPECT_NEAR(gib["gradient"], 12.69, 0.06);
  for (const nlohmann::json& g : j["top_at_peak"]["groups"])
    EXPECT_EQ(g["label"].get<std::string>().find("XCBDisconnectStub"), std::string::npos)
        << g["label"];
  // One recorded iteration is one step: the whole 730 ms window (it was a 1 ns step after the
  // optimizer's end), begun with the parameters, the moments and the last step's gradients
  // live (about 50.8 GiB by the account), not 0 B.
  tl_test::Result st =
      tl_test::run({TIDEMARK_CLI, "steps", (dir / (name + ".pickle")).string(), "--json"});
  ASSERT_EQ(st.rc, 0) << st.err;
  const nlohmann::json steps = nlohmann::json::parse(st.out)["steps"];
  ASSERT_EQ(steps.size(), 1u) << st.out;
  EXPECT_GT(steps[0]["duration_ns"].get<double>(), 0.95 * j["duration_ns"].get<double>());
  EXPECT_GT(steps[0]["allocated_at_start_bytes"].get<double>(), 50.0 * (1 << 30));
}

}  // namespace
