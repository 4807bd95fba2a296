// The real `tidemark` binary: record train_mlp, then summary --json against the trace's own
// facts (TraceReader), check's exit codes and messages, bad input giving exit 2 and one line,
// and record returning the child's exit status.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/trace_builder.h"
#include "profiler/store/trace_reader.h"
#include "run_program.h"
#include "schema_v1_trace.h"

namespace {

namespace fs = std::filesystem;
namespace st = tidemark::store;

using tl_test::quote;
using tl_test::Result;
using tl_test::slurp;

fs::path temp_dir() {
  return tl_test::temp_dir("tidemark_cli");
}

using tl_test::tidemark;  // the binary with `args` (no shell interpretation of them)

size_t lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    trace_ = (temp_dir() / "mlp.db").string();
    // Deep stacks, so sites reach the sample's code in unoptimised builds too.
    Result r = tidemark({"record", "-o", trace_, "--stacks", "64", "--", TIDEMARK_TRAIN_MLP, "20"});
    ASSERT_EQ(r.rc, 0) << r.err;
  }
  static void TearDownTestSuite() { fs::remove_all(temp_dir()); }
  static std::string trace_;
};
std::string CliTest::trace_;

TEST_F(CliTest, SummaryJsonAgreesWithTheTrace) {
  Result r = tidemark({"summary", trace_, "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  auto reader = st::TraceReader::open(trace_, st::TraceReader::Require::finalized);
  EXPECT_EQ(j["schema_version"], st::kSchemaVersion);
  EXPECT_EQ(j["event_count"], reader.event_count());
  EXPECT_GT(j["duration_ns"].get<uint64_t>(), 0u);
  ASSERT_EQ(j["devices"].size(), reader.devices().size());
  const nlohmann::json& d = j["devices"][0];
  EXPECT_EQ(d["device"], "cpu");
  auto peak = reader.peak(reader.devices()[0].id, st::Curve::allocated);
  ASSERT_TRUE(peak);
  EXPECT_GT(peak->bytes, 0);
  EXPECT_EQ(d["peak_allocated_bytes"], peak->bytes);
  EXPECT_EQ(d["peak_reserved_bytes"],
            reader.peak(reader.devices()[0].id, st::Curve::reserved)->bytes);
  EXPECT_EQ(d["peak_active_bytes"], reader.peak(reader.devices()[0].id, st::Curve::active)->bytes);
  EXPECT_EQ(d["alloc_count"], reader.allocations(reader.devices()[0].id).size());
  for (const char* key : {"peak_allocated_time_ns", "final_allocated_bytes", "final_reserved_bytes",
                          "segment_alloc_count", "oom_count", "sync_count"})
    EXPECT_TRUE(d.contains(key)) << key;
  EXPECT_EQ(d["final_allocated_bytes"], 0);  // train_mlp frees everything
  EXPECT_EQ(j["top_at_peak"]["bytes"], peak->bytes);
  EXPECT_EQ(j["leaks"]["bytes"], 0);
  // The sites are the sample's code, not tensorlib's (Note [Allocation site]).
  std::string site = j["top_at_peak"]["groups"][0]["label"];
  EXPECT_NE(site.find("samples::"), std::string::npos) << site;
}

// The allocated peak by category (an nn program tags parameters, gradients, activations and
// optimizer state): the categories add up to the peak's bytes, which summary computes by
// site; train_mlp's hand-written model tags none, so it has no split.
TEST_F(CliTest, SummarySplitsThePeakByCategory) {
  nlohmann::json plain = nlohmann::json::parse(tidemark({"summary", trace_, "--json"}).out);
  EXPECT_TRUE(plain["categories_at_peak"].is_null()) << plain["categories_at_peak"].dump();
  const std::string path = (temp_dir() / "loss.db").string();
  Result rec =
      tidemark({"record", "-o", path, "--",
                std::string(TIDEMARK_SAMPLES_BIN) + "/pitfall_accumulated_loss", "--steps", "5"});
  ASSERT_EQ(rec.rc, 0) << rec.err;
  nlohmann::json j = nlohmann::json::parse(tidemark({"summary", path, "--json"}).out);
  ASSERT_TRUE(j["categories_at_peak"].is_object()) << j.dump(2);
  int64_t sum = 0;
  std::set<std::string> keys;
  for (const auto& g : j["categories_at_peak"]["groups"]) {
    sum += g["bytes"].get<int64_t>();
    keys.insert(g["key"].get<std::string>());
  }
  EXPECT_EQ(sum, j["top_at_peak"]["bytes"].get<int64_t>());
  EXPECT_TRUE(keys.count("parameter") && keys.count("activation"))
      << j["categories_at_peak"].dump();
  Result text = tidemark({"summary", path});
  EXPECT_NE(text.out.find("\n  by category: activation "), std::string::npos) << text.out;
}

// Folded stacks for flame graphs (flamegraph.pl, speedscope, inferno): a line per stack,
// outermost frame first, bytes last; the lines add up to what top and leaks report.
struct Folded {
  int64_t bytes = 0;
  size_t lines = 0;
  bool outermost_first = false;  // a line has main before the sample's code it called
  bool well_formed = true;
};

Folded parse_folded(const std::string& out) {
  Folded f;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    ++f.lines;
    size_t space = line.rfind(' ');
    if (space == std::string::npos || space == 0) {
      f.well_formed = false;
      continue;
    }
    if (line.find(";;") != std::string::npos || line[0] == ';')
      f.well_formed = false;  // an empty frame
    f.bytes += std::stoll(line.substr(space + 1));
    size_t main = line.find("main ("), sample = line.find("samples::");
    if (main != std::string::npos && sample != std::string::npos && main < sample)
      f.outermost_first = true;
  }
  return f;
}

// Folded stacks of a real PyTorch snapshot with user frames (the default): each run of two or
// more library frames is one frame "… N library frames (f …)", as in the GUI's flame graph;
// with --frames all every frame is there. Both add up to the same bytes in as many lines, and
// a fold stands for exactly the frames it replaces: counting a fold as its N frames, the user
// lines hold as many frames as the --frames all lines.
TEST_F(CliTest, FoldedStacksFoldRunsOfLibraryFramesUnlessFramesAll) {
  const std::string snapshot = std::string(TIDEMARK_TEST_DATA) +
                               "/pytorch/niu_forward_and_backward_memory_snapshot_200.pickle";
  const std::string db = (temp_dir() / "folded-library.db").string();
  ASSERT_EQ(tidemark({"import", snapshot, "-o", db}).rc, 0);
  Result user = tidemark({"top", db, "--folded"});
  Result all = tidemark({"top", db, "--folded", "--frames", "all"});
  ASSERT_EQ(user.rc, 0) << user.err;
  ASSERT_EQ(all.rc, 0) << all.err;
  const Folded u = parse_folded(user.out), a = parse_folded(all.out);
  EXPECT_TRUE(u.well_formed && a.well_formed);
  EXPECT_EQ(u.bytes, a.bytes);
  EXPECT_EQ(u.lines, a.lines);
  // Frames per output, a fold counted as the frames it holds.
  auto frames = [](const std::string& out, size_t* folds) {
    size_t n = 0;
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream parts(line.substr(0, line.rfind(' ')));
      std::string frame;
      while (std::getline(parts, frame, ';')) {
        const std::string fold = "\u2026 ";
        if (frame.rfind(fold, 0) == 0 && frame.find(" library frames (") != std::string::npos) {
          const size_t k = std::stoul(frame.substr(fold.size()));
          EXPECT_GE(k, 2u) << frame;
          n += k;
          ++*folds;
        } else {
          ++n;
        }
      }
    }
    return n;
  };
  size_t user_folds = 0, all_folds = 0;
  const size_t user_frames = frames(user.out, &user_folds),
               all_frames = frames(all.out, &all_folds);
  EXPECT_GT(user_folds, 0u) << user.out.substr(0, 2000);
  EXPECT_EQ(all_folds, 0u);
  EXPECT_EQ(user_frames, all_frames);
  EXPECT_LT(user.out.size(), all.out.size());
  // PyTorch's own unwinder, innermost in every stack of this file, is a library frame.
  EXPECT_NE(all.out.find("torch::unwind::unwind()"), std::string::npos);
}

TEST_F(CliTest, FoldedStacksAddUpToThePeakAndTheLeaks) {
  Result top = tidemark({"top", trace_, "--folded"});
  ASSERT_EQ(top.rc, 0) << top.err;
  Folded f = parse_folded(top.out);
  nlohmann::json j = nlohmann::json::parse(
      tidemark({"top", trace_, "--by", "stack", "--limit", "0", "--json"}).out);
  EXPECT_TRUE(f.well_formed) << top.out.substr(0, 2000);
  EXPECT_EQ(f.bytes, j["bytes"].get<int64_t>());
  EXPECT_EQ(f.lines, j["groups_total"].get<size_t>());
  EXPECT_TRUE(f.outermost_first) << top.out.substr(0, 2000);

  // --reserved: the segments at the reserved peak, by the stacks that reserved them.
  Result reserved = tidemark({"top", trace_, "--reserved", "--folded"});
  ASSERT_EQ(reserved.rc, 0) << reserved.err;
  Folded r = parse_folded(reserved.out);
  nlohmann::json rj = nlohmann::json::parse(tidemark({"top", trace_, "--reserved", "--json"}).out);
  auto reader = st::TraceReader::open(trace_, st::TraceReader::Require::finalized);
  const int64_t reserved_peak = reader.peak(reader.devices()[0].id, st::Curve::reserved)->bytes;
  EXPECT_TRUE(r.well_formed) << reserved.out;
  EXPECT_EQ(r.bytes, reserved_peak);
  EXPECT_EQ(rj["bytes"].get<int64_t>(), reserved_peak);
  EXPECT_EQ(tidemark({"top", trace_, "--reserved", "--at", "1ms"}).rc, 2);

  for (const char* other : {"--json", "--by=site", "--limit=3"}) {
    Result both = tidemark({"top", trace_, "--folded", other});
    EXPECT_EQ(both.rc, 2) << other;
    EXPECT_NE(both.err.find("--folded"), std::string::npos) << both.err;
  }

  // Leaks: the real PyTorch snapshot ends with memory still allocated.
  const std::string snapshot =
      std::string(TIDEMARK_TEST_DATA) + "/pytorch/snapshot_small_gpu.pickle";
  const std::string db = (temp_dir() / "folded-leaks.db").string();
  ASSERT_EQ(tidemark({"import", snapshot, "-o", db}).rc, 0);
  Result leaks = tidemark({"leaks", db, "--folded"});
  ASSERT_EQ(leaks.rc, 0) << leaks.err;
  Folded l = parse_folded(leaks.out);
  nlohmann::json lj = nlohmann::json::parse(tidemark({"leaks", db, "--json"}).out);
  EXPECT_TRUE(l.well_formed) << leaks.out.substr(0, 2000);  // its unknown frames are "??"
  EXPECT_GT(l.bytes, 0);
  EXPECT_EQ(l.bytes, lj["bytes"].get<int64_t>());

  // Differential: `STACK A B`, each column adding up to its trace's allocated peak; two
  // devices (cpu in A, cuda:0 in B), so every stack starts with its device.
  Result d = tidemark({"diff", trace_, db, "--folded"});
  ASSERT_EQ(d.rc, 0) << d.err;
  int64_t a = 0, b = 0;
  std::istringstream in(d.out);
  std::string line;
  while (std::getline(in, line)) {
    EXPECT_TRUE(line.rfind("cpu;", 0) == 0 || line.rfind("cuda:0;", 0) == 0) << line;
    std::istringstream fields(line.substr(line.rfind(' ', line.rfind(' ') - 1)));
    int64_t x = 0, y = 0;
    fields >> x >> y;
    a += x;
    b += y;
  }
  auto peak = [&](const std::string& path) {
    return nlohmann::json::parse(
               tidemark({"summary", path, "--json"}).out)["devices"][0]["peak_allocated_bytes"]
        .get<int64_t>();
  };
  EXPECT_EQ(a, peak(trace_));
  EXPECT_EQ(b, peak(db));

  // A trace against itself: every stack is matched, with the same bytes in both columns.
  Result self = tidemark({"diff", trace_, trace_, "--folded"});
  ASSERT_EQ(self.rc, 0) << self.err;
  std::istringstream lines(self.out);
  int64_t total = 0;
  size_t n = 0;
  while (std::getline(lines, line)) {
    std::istringstream fields(line.substr(line.rfind(' ', line.rfind(' ') - 1)));
    int64_t x = -1, y = -2;
    fields >> x >> y;
    EXPECT_EQ(x, y) << line;
    total += x;
    ++n;
  }
  EXPECT_GT(n, 1u);
  EXPECT_EQ(total, peak(trace_));
}

TEST_F(CliTest, CheckPassesWithAGenerousLimitAndFailsNamingTheLimit) {
  std::string junit = (temp_dir() / "check.xml").string();
  Result ok = tidemark({"check", trace_, "--max-peak-allocated", "1GiB", "--max-leaked", "0"});
  EXPECT_EQ(ok.rc, 0) << ok.out << ok.err;
  Result bad = tidemark({"check", trace_, "--max-peak-allocated", "1KiB", "--junit", junit});
  EXPECT_EQ(bad.rc, 1) << bad.out << bad.err;
  EXPECT_NE(bad.out.find("--max-peak-allocated 1.00 KiB (1024 bytes)"), std::string::npos)
      << bad.out;
  EXPECT_NE(bad.out.find("samples::"), std::string::npos) << bad.out;  // a top contributor
  EXPECT_NE(slurp(junit).find("failures=\"1\""), std::string::npos);
  Result base = tidemark({"check", trace_, "--baseline", trace_, "--max-increase", "0"});
  EXPECT_EQ(base.rc, 0) << base.out << base.err;
}

TEST_F(CliTest, ReportingCommandsRunAndPrintJson) {
  for (std::vector<std::string> args :
       {std::vector<std::string>{"top", trace_, "--by", "stack", "--json"},
        {"top", trace_, "--at", "step:3", "--json"},
        {"top", trace_, "--at", "1ms", "--by", "scope", "--json"},
        {"leaks", trace_, "--by-step", "--json"},
        {"steps", trace_, "--json"},
        {"syncs", trace_, "--json"},
        {"diff", trace_, trace_, "--json"},
        {"timeline", trace_, "--width", "40", "--json"},
        {"info", trace_, "--json"}}) {
    Result r = tidemark(args);
    ASSERT_EQ(r.rc, 0) << args[0] << ": " << r.err;
    EXPECT_TRUE(nlohmann::json::accept(r.out)) << args[0] << ": " << r.out;
  }
  nlohmann::json steps = nlohmann::json::parse(tidemark({"steps", trace_, "--json"}).out);
  EXPECT_EQ(steps["steps"].size(), 20u);
  nlohmann::json diff = nlohmann::json::parse(tidemark({"diff", trace_, trace_, "--json"}).out);
  EXPECT_EQ(diff["devices"][0]["peak_allocated_delta_bytes"], 0);

  Result chart = tidemark({"timeline", trace_, "--width", "60", "--height", "6"});
  ASSERT_EQ(chart.rc, 0) << chart.err;
  // The marker row: ▼ in the peak's column, then the label after the chart's last column.
  const size_t marker = chart.out.find("▼");
  ASSERT_NE(marker, std::string::npos) << chart.out;
  const std::string marker_row = chart.out.substr(marker, chart.out.find('\n', marker) - marker);
  EXPECT_NE(marker_row.find(" peak "), std::string::npos) << chart.out;
  EXPECT_NE(chart.out.find("┴"), std::string::npos) << chart.out;  // step ticks
  std::string png = (temp_dir() / "t.png").string(), svg = (temp_dir() / "t.svg").string();
  EXPECT_EQ(tidemark({"timeline", trace_, "--png", png, "--width", "300"}).rc, 0);
  EXPECT_EQ(slurp(png).substr(1, 3), "PNG");
  EXPECT_EQ(tidemark({"timeline", trace_, "--svg", svg}).rc, 0);
  EXPECT_NE(slurp(svg).find("<svg"), std::string::npos);
}

TEST_F(CliTest, BadInputExitsTwoWithOneLineNamingTheFile) {
  std::string text = (temp_dir() / "text.db").string();
  std::ofstream(text) << "this is not a database, just text long enough to be read as one...\n";
  std::string truncated = (temp_dir() / "truncated.db").string();
  {
    std::string bytes = slurp(trace_);
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 3);
  }
  std::string future = (temp_dir() / "future.db").string();
  fs::copy_file(trace_, future, fs::copy_options::overwrite_existing);
  const std::string newer = "PRAGMA user_version = " + std::to_string(st::kSchemaVersion + 1);
  ASSERT_EQ(std::system(("sqlite3 " + quote(future) + " '" + newer + "' 2>/dev/null || " +
                         "python3 -c \"import sqlite3; c=sqlite3.connect('" + future +
                         "'); c.execute('" + newer + "'); c.commit()\"")
                            .c_str()),
            0);
  std::string missing = (temp_dir() / "missing.db").string();
  struct Case {
    std::vector<std::string> args;
    std::string expect;  // in the one line
  } cases[] = {
      {{"summary", missing}, missing},
      {{"summary", text}, "not a SQLite database"},
      {{"summary", truncated}, truncated},
      {{"summary", future}, "newer"},
      {{"summary", trace_, "--bogus"}, "--bogus"},
      {{"check", trace_, "--max-peak-allocated", "12XB"}, "12XB"},
      {{"check", trace_}, "limit"},
      {{"top", trace_, "--at", "step:999"}, "step 999"},
      {{"timeline", trace_, "--from", "1x"}, "--from"},
      {{"summary", trace_, "--device", "cuda:7"}, "cuda:7"},
      {{"nonsense"}, "nonsense"},
      {{"record", "-o", (temp_dir() / "x.db").string(), "--", "/nonexistent/program"},
       "/nonexistent/program"},
  };
  for (const Case& c : cases) {
    Result r = tidemark(c.args);
    EXPECT_EQ(r.rc, 2) << c.args[0] << " " << c.args.back() << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("terminate"), std::string::npos) << r.err;
  }
}

// A trace of reserved memory only (what CUDA injection records of PyTorch): summary names the
// sites that made reserved memory grow. Values: make_segments_trace's comment.
TEST(CliSummary, ReservedMemoryBySiteOnASegmentsOnlyTrace) {
  const std::string path = (temp_dir() / "segments.db").string();
  analysis_test::make_segments_trace(path);
  Result text = tidemark({"summary", path});
  ASSERT_EQ(text.rc, 0) << text.err;
  const size_t section = text.out.find(
      "\nreserved at the reserved peak of cuda:0 (28.00 MiB in 3 segments, 0.000 s), by site:\n"
      "     26.00 MiB  92.9%       2  load_model (train.py:14)\n"
      "      2.00 MiB   7.1%       1  (no stack)\n");
  EXPECT_NE(section, std::string::npos) << text.out;
  EXPECT_LT(section, text.out.find("\nleaks:")) << text.out;
  EXPECT_EQ(text.out.find("warmup"), std::string::npos) << text.out;  // freed before the peak

  Result r = tidemark({"summary", path, "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["json_version"], 2);
  EXPECT_TRUE(j["top_at_peak"].is_null());  // no allocations anywhere
  const uint64_t MiB = 1 << 20;
  using J = nlohmann::json;
  EXPECT_EQ(j["reserved_at_peak"], (J{{"device", "cuda:0"},
                                      {"time_ns", 4000},
                                      {"bytes", 28 * MiB},
                                      {"count", 3},
                                      {"by", "site"},
                                      {"groups", J::array({J{{"key", "load_model@train.py"},
                                                             {"label", "load_model (train.py:14)"},
                                                             {"bytes", 26 * MiB},
                                                             {"requested_bytes", 0},
                                                             {"count", 2}},
                                                           J{{"key", "(no stack)"},
                                                             {"label", "(no stack)"},
                                                             {"bytes", 2 * MiB},
                                                             {"requested_bytes", 0},
                                                             {"count", 1}}})},
                                      {"groups_total", 2}}))
      << j["reserved_at_peak"].dump(2);
}

// A trace of schema version 1: every command but finalize refuses it naming the upgrade;
// finalize upgrades it, after which the segments' stacks (kept in the raw events) are there,
// named by the frames the file already held.
TEST(CliFinalize, UpgradesASchemaVersion1Trace) {
  const std::string path = (temp_dir() / "v1.db").string();
  analysis_test::make_segments_trace(path);
  ASSERT_EQ(tl_test::make_schema_v1(path), "");
  for (const char* command : {"summary", "info", "top"}) {
    Result r = tidemark({command, path});
    EXPECT_EQ(r.rc, 2) << command << ": " << r.out;
    EXPECT_EQ(r.err, "tidemark: " + path +
                         ": trace schema version 1 is older than this build of Tidemark reads "
                         "(version 7); `tidemark finalize " +
                         path + "` upgrades it\n")
        << command;
  }
  Result f = tidemark({"finalize", path});
  ASSERT_EQ(f.rc, 0) << f.err;
  EXPECT_NE(f.out.find("upgraded from schema version 1 to " + std::to_string(st::kSchemaVersion)),
            std::string::npos)
      << f.out;
  Result s = tidemark({"summary", path, "--json"});
  ASSERT_EQ(s.rc, 0) << s.err;
  nlohmann::json j = nlohmann::json::parse(s.out);
  EXPECT_EQ(j["schema_version"], st::kSchemaVersion);
  // The trace has no module list to symbolize from: the frames the v1 finalize stored are kept
  // (Note [Kept frames]), so the sites are named as before.
  const nlohmann::json& groups = j["reserved_at_peak"]["groups"];
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0]["label"], "load_model (train.py:14)");
  EXPECT_EQ(groups[0]["bytes"], 26 << 20);
  EXPECT_EQ(groups[0]["count"], 2);
  EXPECT_EQ(groups[1]["label"], "(no stack)");
  EXPECT_EQ(groups[1]["bytes"], 2 << 20);
  // Finalizing it again is a plain finalize.
  Result again = tidemark({"finalize", path});
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_EQ(again.out.find("upgraded"), std::string::npos) << again.out;
}

// `-o run-%p.db`: the program records to a file named with its pid, and record finalizes that.
TEST(CliRecord, PercentPInTheOutputIsTheProgramsPid) {
  const std::string pattern = (temp_dir() / "pid-%p.db").string();
  Result r = tidemark({"record", "-o", pattern, "--", TIDEMARK_TRAIN_MLP, "2"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err.find("wrote no trace"), std::string::npos) << r.err;
  std::string written;
  for (const auto& e : fs::directory_iterator(temp_dir())) {
    const std::string name = e.path().filename().string();
    if (name.rfind("pid-", 0) == 0 && e.path().extension() == ".db") written = e.path().string();
  }
  ASSERT_FALSE(written.empty());
  EXPECT_NE(r.err.find("to " + written), std::string::npos) << r.err;
  EXPECT_TRUE(st::TraceReader::open(written, st::TraceReader::Require::finalized).finalized());
}

TEST(CliRecord, ReturnsTheChildsExitStatusAndFinalizesAfterAKill) {
  Result f = tidemark({"record", "-o", (temp_dir() / "false.db").string(), "--", "/bin/false"});
  EXPECT_EQ(f.rc, 1) << f.err;
  // The recorded program exits cleanly with finalize off; then its parent shell is killed.
  std::string killed = (temp_dir() / "killed.db").string();
  Result k = tidemark({"record", "-o", killed, "--", "/bin/sh", "-c",
                       std::string(TIDEMARK_TRAIN_MLP) + " 2 >/dev/null; kill -9 $$"});
  EXPECT_EQ(k.rc, 137) << k.err;
  auto reader = st::TraceReader::open(killed, st::TraceReader::Require::finalized);
  EXPECT_TRUE(reader.finalized());
  EXPECT_GT(reader.event_count(), 0u);
  Result s = tidemark({"summary", killed, "--json"});
  EXPECT_EQ(s.rc, 0) << s.err;
}

TEST(CliHelp, EveryCommandHasHelpWithAnExample) {
  for (const char* c : {"record", "summary", "info", "finalize", "timeline", "top", "leaks",
                        "syncs", "steps", "check", "diff", "import", "export"}) {
    Result r = tidemark({c, "--help"});
    EXPECT_EQ(r.rc, 0) << c;
    EXPECT_NE(r.out.find("Example:"), std::string::npos) << c << ": " << r.out;
  }
}

// Regression: `import` and `export` were registered after the unknown-command check and were
// refused as unknown commands.
TEST(CliImport, ImportsThePyTorchSnapshotWithItsPeaks) {
  const std::string snapshot =
      std::string(TIDEMARK_TEST_DATA) + "/pytorch/snapshot_small_gpu.pickle";
  const std::string out = (temp_dir() / "torch.db").string();
  Result r = tidemark({"import", snapshot, "-o", out});
  ASSERT_EQ(r.rc, 0) << r.err;
  Result s = tidemark({"summary", out, "--json"});
  ASSERT_EQ(s.rc, 0) << s.err;
  auto j = nlohmann::json::parse(s.out);
  // tests/importers/data/snapshot_small_gpu_expected.py computes these with Python's pickle.
  EXPECT_EQ(j["devices"][0]["device"], "cuda:0");
  EXPECT_EQ(j["devices"][0]["peak_allocated_bytes"], 108275712);
  EXPECT_EQ(j["devices"][0]["peak_reserved_bytes"], 134217728);
  Result e = tidemark({"export", out, "--format", "csv", "-o", "-"});
  ASSERT_EQ(e.rc, 0) << e.err;
  EXPECT_EQ(e.out.rfind("device,addr,size", 0), 0u);
}

// The real PyTorch snapshot imported and exported again is the same snapshot: every trace
// entry (action, address, size, stream, time, frames) and the final segments and blocks, as
// tests/analysis/snapshot_check.py compares them with Python's own pickle.
TEST(CliExport, TheRealSnapshotSurvivesImportAndExport) {
  const std::string snapshot =
      std::string(TIDEMARK_TEST_DATA) + "/pytorch/snapshot_small_gpu.pickle";
  const std::string db = (temp_dir() / "roundtrip.db").string();
  const std::string again = (temp_dir() / "roundtrip.pickle").string();
  ASSERT_EQ(tidemark({"import", snapshot, "-o", db}).rc, 0);
  Result e = tidemark({"export", db, "--format", "snapshot", "-o", again});
  ASSERT_EQ(e.rc, 0) << e.err;
  EXPECT_NE(e.err.find("cuda:0 is device 0"), std::string::npos) << e.err;
  const std::string script =
      (fs::path(__FILE__).parent_path().parent_path() / "analysis/snapshot_check.py").string();
  Result c = tl_test::run({"python3", script, again, "--original", snapshot});
  EXPECT_EQ(c.rc, 0) << c.out.substr(0, 2000) << c.err;
  auto j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j["devices"]["0"]["peak_reserved"], 134217728);
  EXPECT_EQ(j["devices"]["0"]["start_blocks"], 0);
}

// A recording exported as a snapshot and imported again keeps its peak and its categories
// (the export writes them as memory_viz's `category`, the importer reads them back).
TEST(CliExport, ARecordingSurvivesExportAndImportWithItsCategories) {
  const std::string db = (temp_dir() / "cat.db").string();
  const std::string pickle = (temp_dir() / "cat.pickle").string();
  const std::string again = (temp_dir() / "cat-again.db").string();
  Result rec =
      tidemark({"record", "-o", db, "--",
                std::string(TIDEMARK_SAMPLES_BIN) + "/pitfall_accumulated_loss", "--steps", "5"});
  ASSERT_EQ(rec.rc, 0) << rec.err;
  ASSERT_EQ(tidemark({"export", db, "--format", "snapshot", "-o", pickle}).rc, 0);
  Result imp = tidemark({"import", pickle, "-o", again});
  ASSERT_EQ(imp.rc, 0) << imp.err;
  auto summary = [&](const std::string& path) {
    return nlohmann::json::parse(tidemark({"summary", path, "--json"}).out);
  };
  nlohmann::json a = summary(db), b = summary(again);
  EXPECT_EQ(b["devices"][0]["peak_allocated_bytes"], a["devices"][0]["peak_allocated_bytes"]);
  ASSERT_TRUE(a["categories_at_peak"].is_object());
  EXPECT_EQ(b["categories_at_peak"]["groups"], a["categories_at_peak"]["groups"]);
}

// Note [Snapshots as traces]: a command given a PyTorch snapshot answers as it does for the
// trace `import` makes of it -- the same JSON but for `path`, the file given, and never the
// temporary trace's name -- with the peaks
// Python's pickle finds (tests/importers/data/snapshot_small_gpu_expected.py), and leaves no
// temporary trace behind. A damaged pickle is exit 2 naming it; a file that is neither stays
// "not a Tidemark trace".
TEST(CliSnapshots, EveryCommandReadsASnapshotAsItsImport) {
  const std::string snapshot =
      std::string(TIDEMARK_TEST_DATA) + "/pytorch/snapshot_small_gpu.pickle";
  const fs::path tmp = temp_dir() / "snapshot-tmp";
  fs::create_directories(tmp);
  const std::string db = (temp_dir() / "snapshot-imported.db").string();
  ASSERT_EQ(tidemark({"import", snapshot, "-o", db}).rc, 0);
  auto json_of = [&](std::vector<std::string> args, const std::string& file) {
    args.insert(args.begin() + 1, file);
    args.push_back("--json");
    Result r = tl_test::run(
        [&] {
          std::vector<std::string> argv{TIDEMARK_CLI};
          argv.insert(argv.end(), args.begin(), args.end());
          return argv;
        }(),
        {"TMPDIR=" + tmp.string()});
    EXPECT_EQ(r.rc, 0) << args[0] << ": " << r.err;
    // Messages and advice name the file given, never the temporary trace.
    EXPECT_EQ(r.out.find("tidemark-import-"), std::string::npos) << args[0] << ": " << r.out;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    if (j.is_object()) j.erase("path");  // the one field that names the file read
    return j;
  };
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"summary"},
        {"top", "--by", "site"},
        {"diagnose"},
        {"timeline", "--width", "40"},
        {"leaks"},
        {"replay", "--alloc-conf", "expandable_segments:True"}}) {
    const nlohmann::json direct = json_of(args, snapshot);
    EXPECT_EQ(direct, json_of(args, db)) << args[0];
    if (args[0] == "summary" || args[0] == "diagnose") {
      Result r = tidemark({args[0], snapshot, "--json"});
      EXPECT_EQ(nlohmann::json::parse(r.out)["path"], snapshot) << args[0];
    }
    if (args[0] == "summary") {
      EXPECT_EQ(direct["devices"][0]["peak_allocated_bytes"], 108275712);
      EXPECT_EQ(direct["devices"][0]["peak_reserved_bytes"], 134217728);
    }
  }
  EXPECT_TRUE(fs::is_empty(tmp)) << "a temporary trace was left in " << tmp;

  const std::string damaged = (temp_dir() / "damaged.pickle").string();
  {
    std::ifstream in(snapshot, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(damaged, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  Result d = tidemark({"summary", damaged});
  EXPECT_EQ(d.rc, 2);
  EXPECT_NE(d.err.find(damaged), std::string::npos) << d.err;
  const std::string text = (temp_dir() / "notes.txt").string();
  std::ofstream(text) << "not a trace\n";
  Result t = tidemark({"summary", text});
  EXPECT_EQ(t.rc, 2);
  EXPECT_NE(t.err.find("not a Tidemark trace"), std::string::npos) << t.err;
}

// import --onto needs a finalized recording; a missing one is bad input (exit 2) naming it,
// and nothing is written.
TEST(CliImport, OntoAMissingRecordingIsExit2) {
  const std::string snapshot =
      std::string(TIDEMARK_TEST_DATA) + "/pytorch/snapshot_small_gpu.pickle";
  const std::string missing = (temp_dir() / "no-such-run.db").string();
  const std::string out = (temp_dir() / "merged.db").string();
  Result r = tidemark({"import", snapshot, "--onto", missing, "-o", out});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("no-such-run.db"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
