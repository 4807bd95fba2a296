// export_chrome / export_csv (profiler/analysis/export.cpp): a hand-written history exported
// and read back (the Chrome JSON parsed, the CSV split), the refusals on bad input, and a real
// recording of tensorlib exported end to end.
#include "profiler/analysis/export.h"
#include "profiler/analysis/trace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <tensorlib/tensorlib.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "profiler/analysis/output_file.h"
#include "profiler/record/recorder.h"
#include "profiler/store/sqlite_db.h"
#include "profiler/store/trace_reader.h"
#include "profiler/store/trace_writer.h"
#include "temp_trace.h"

namespace {

namespace ev = tidemark::events;
namespace st = tidemark::store;
namespace an = tidemark::analysis;
using nlohmann::json;

using tl_test::TempTrace;

// The first event's time: exported times are relative to it (as the CLI's are), not to the
// recording's start (meta start_ts_ns, earlier).
constexpr uint64_t kOrigin = 1'000'000;
constexpr uint64_t S = 0x100000;        // a cpu segment
constexpr uint64_t G = 0x7f0000000000;  // a cuda segment
constexpr uint64_t MiB = 1 << 20;
constexpr ev::DeviceId kCpu{ev::DeviceType::cpu, 0};
constexpr ev::DeviceId kCuda{ev::DeviceType::cuda, 0};
// A scope name that needs JSON escaping and CSV quoting.
constexpr const char* kModel = "model \"big\", v2";

struct History {
  std::vector<ev::Event> events;
  std::vector<uint64_t> stacks;
  uint64_t seq = 0;

  ev::Event& add(ev::Kind k, uint64_t t, uint64_t thread, ev::DeviceId d = kCpu,
                 uint64_t stack = 0) {
    ev::Event e;
    e.kind = k;
    e.seq = ++seq;
    e.ts_ns = kOrigin + t;
    e.thread_id = thread;
    e.device = d;
    events.push_back(e);
    stacks.push_back(stack);
    return events.back();
  }
  void block(ev::Kind k, uint64_t t, uint64_t thread, ev::DeviceId d, uint64_t addr, uint64_t size,
             uint64_t req, uint64_t seg, uint64_t stack = 0) {
    add(k, t, thread, d, stack).block = {
        addr, size, req, 0, seg, ev::Pool::small, ev::Category::unknown};
  }
  void name(ev::Kind k, uint64_t t, uint64_t thread, const char* n, uint64_t value = 0) {
    ev::Event& e = add(k, t, thread);
    e.name = {n, value};
  }
};

// Times are ns after kOrigin. Thread 1 runs the model, thread 2 a loader scope never closed.
History history() {
  using K = ev::Kind;
  History h;
  h.name(K::mark, 0, 1, "begin");
  h.block(K::segment_alloc, 100, 1, kCpu, S, 2 * MiB, 0, S);
  h.name(K::scope_push, 110, 1, kModel);
  h.name(K::scope_push, 120, 1, "layer1");
  h.name(K::scope_push, 130, 2, "loader");
  h.block(K::alloc, 140, 1, kCpu, S, 1024, 1000, S, 3);
  h.block(K::segment_alloc, 145, 1, kCuda, G, 4 * MiB, 0, G);
  h.block(K::alloc, 150, 1, kCuda, G, 512, 500, G);
  h.name(K::scope_pop, 170, 1, "layer1");
  // Two changes at one time: the counters show the value after both.
  h.block(K::free_requested, 190, 1, kCpu, S, 1024, 1000, S);
  h.block(K::free_completed, 190, 1, kCpu, S, 1024, 1000, S);
  h.add(K::sync, 200, 1, kCuda).sync = {ev::SyncKind::item, 7, 15};
  h.name(K::step, 210, 1, "", 1);
  // A deferred free on cuda: allocated drops at 220, active at 250.
  h.block(K::free_requested, 220, 1, kCuda, G, 512, 500, G);
  h.block(K::free_completed, 250, 1, kCuda, G, 512, 500, G);
  h.name(K::scope_pop, 260, 1, kModel);
  h.name(K::step, 300, 1, "", 2);
  h.name(K::mark, 320, 2, "eval");
  h.add(K::oom, 340, 1, kCuda).allocator = {8 * MiB, 0, MiB, 16 * MiB, 0, 4 * MiB, 0};
  h.block(K::alloc, 350, 2, kCpu, S + 1024, 2048, 2000, S);  // live at the end
  return h;
}

constexpr uint64_t kEnd = 400;

void write_history(const std::string& path, bool finalize = true) {
  st::TraceMeta meta;
  meta.command_line = "/usr/bin/train --epochs 1";
  meta.pid = 4242;
  meta.start_ts_ns = kOrigin - 500;
  meta.devices = {{kCpu, "cpu", 0}, {kCuda, "cuda:0 (Test GPU)", 16 * MiB}};
  History h = history();
  auto w = st::TraceWriter::create(path, meta);
  w->add_stack_node(1, 0, 0x1000);
  w->add_stack_node(2, 1, 0x2000);
  w->add_stack_node(3, 2, 0x3000);
  for (size_t i = 0; i < h.events.size(); ++i) w->append(h.events[i], h.stacks[i]);
  w->close(kOrigin + kEnd);
  w.reset();
  if (!finalize) return;
  st::FinalizeOptions opt;
  // The innermost address (0x3000) is in the allocator, which a site skips; 0x2000 resolves
  // to an inlined frame in a caller, so the site is the inlined function.
  opt.symbolize = [](uint64_t ip) -> std::vector<st::ResolvedFrame> {
    if (ip == 0x3000)
      return {{"tl::memory::CachingAllocator::allocate(unsigned long)",
               "/src/tensorlib/memory/caching_allocator.cpp", 789, false, "/bin/train"}};
    if (ip != 0x2000) return {};
    return {{"make_weights(int)", "model.h", 12, true, "/bin/train"},
            {"build_model()", "model.cpp", 40, false, "/bin/train"}};
  };
  st::finalize(path, opt);
}

int64_t ns_of(const json& micros) {
  return std::llround(micros.get<double>() * 1000.0);
}

std::string chrome_text(const std::string& path) {
  std::ostringstream out;
  an::export_chrome(an::Trace::open(path), out);
  return out.str();
}

TEST(ExportChrome, CountersSlicesAndInstantsMatchTheHistory) {
  TempTrace trace("chrome");
  write_history(trace.path());
  json doc = json::parse(chrome_text(trace.path()));  // throws on malformed JSON
  ASSERT_TRUE(doc["traceEvents"].is_array());
  EXPECT_EQ(doc["displayTimeUnit"], "ns");
  EXPECT_EQ(doc["otherData"]["pid"], 4242);

  using Samples = std::vector<std::pair<int64_t, int64_t>>;  // (ns since origin, bytes)
  std::map<std::string, Samples> counters;
  std::map<std::string, json> by_name;  // the last non-counter event of each name
  std::map<uint64_t, std::string> thread_names;
  std::string process_name;
  for (const json& e : doc["traceEvents"]) {
    EXPECT_EQ(e["pid"], 4242) << e;
    std::string ph = e["ph"], name = e["name"];
    if (ph == "C") {
      counters[name].emplace_back(ns_of(e["ts"]), e["args"]["bytes"].get<int64_t>());
    } else if (ph == "M" && name == "thread_name") {
      thread_names[e["tid"]] = e["args"]["name"];
    } else if (ph == "M" && name == "process_name") {
      process_name = e["args"]["name"];
    } else if (ph != "M") {
      EXPECT_EQ(by_name.count(name), 0u) << "two events named " << name;
      by_name[name] = e;
    }
  }

  // Counters: the value after the last change at each time, a sample only on a change.
  EXPECT_EQ(counters["cpu allocated"], (Samples{{100, 0}, {140, 1024}, {190, 0}, {350, 2048}}));
  EXPECT_EQ(counters["cpu active"], (Samples{{100, 0}, {140, 1024}, {190, 0}, {350, 2048}}));
  EXPECT_EQ(counters["cpu reserved"], (Samples{{100, 2 * MiB}}));
  EXPECT_EQ(counters["cuda:0 allocated"], (Samples{{145, 0}, {150, 512}, {220, 0}}));
  EXPECT_EQ(counters["cuda:0 active"], (Samples{{145, 0}, {150, 512}, {250, 0}}));
  EXPECT_EQ(counters["cuda:0 reserved"], (Samples{{145, 4 * MiB}}));
  EXPECT_EQ(counters.size(), 6u);

  // Scope slices per thread; the loader never closed and runs to the end of the trace.
  const json& model = by_name.at(kModel);
  EXPECT_EQ(model["ph"], "X");
  EXPECT_EQ(model["tid"], 1);
  EXPECT_EQ(ns_of(model["ts"]), 110);
  EXPECT_EQ(ns_of(model["dur"]), 150);
  EXPECT_EQ(model["args"]["depth"], 0);
  const json& layer = by_name.at("layer1");
  EXPECT_EQ(layer["tid"], 1);
  EXPECT_EQ(ns_of(layer["ts"]), 120);
  EXPECT_EQ(ns_of(layer["dur"]), 50);
  EXPECT_EQ(layer["args"]["path"], std::string(kModel) + "/layer1");
  EXPECT_EQ(layer["args"]["depth"], 1);
  const json& loader = by_name.at("loader");
  EXPECT_EQ(loader["tid"], 2);
  EXPECT_EQ(ns_of(loader["ts"]), 130);
  EXPECT_EQ(ns_of(loader["dur"]), static_cast<int64_t>(kEnd - 130));
  EXPECT_EQ(loader["args"]["open_at_end"], true);

  // Steps: slices on their own track, the last one ending with the trace.
  const json& step1 = by_name.at("step 1");
  const json& step2 = by_name.at("step 2");
  EXPECT_EQ(step1["ph"], "X");
  EXPECT_EQ(ns_of(step1["ts"]), 210);
  EXPECT_EQ(ns_of(step1["dur"]), 90);
  EXPECT_EQ(ns_of(step2["ts"]), 300);
  EXPECT_EQ(ns_of(step2["dur"]), static_cast<int64_t>(kEnd - 300));
  EXPECT_EQ(step1["tid"], step2["tid"]);
  EXPECT_EQ(thread_names.at(step1["tid"]), "steps");
  EXPECT_NE(step1["tid"], 1);
  EXPECT_NE(step1["tid"], 2);

  // Instants: the sync with its kind and duration, the mark, the OOM.
  const json& sync = by_name.at("sync item");
  EXPECT_EQ(sync["ph"], "i");
  EXPECT_EQ(sync["s"], "t");
  EXPECT_EQ(sync["tid"], 1);
  EXPECT_EQ(ns_of(sync["ts"]), 200);
  EXPECT_EQ(sync["args"]["kind"], "item");
  EXPECT_EQ(sync["args"]["duration_ns"], 15);
  EXPECT_EQ(sync["args"]["stream"], 7);
  EXPECT_EQ(sync["args"]["device"], "cuda:0");
  const json& mark = by_name.at("eval");
  EXPECT_EQ(mark["ph"], "i");
  EXPECT_EQ(mark["tid"], 2);
  EXPECT_EQ(ns_of(mark["ts"]), 320);
  EXPECT_EQ(ns_of(by_name.at("begin")["ts"]), 0);
  const json& oom = by_name.at("oom");
  EXPECT_EQ(oom["ph"], "i");
  EXPECT_EQ(ns_of(oom["ts"]), 340);
  EXPECT_EQ(oom["args"]["requested_size"], 8 * MiB);
  EXPECT_EQ(oom["args"]["device"], "cuda:0");

  EXPECT_EQ(process_name, "train");
  EXPECT_EQ(thread_names.at(1), "thread 1");
  EXPECT_EQ(thread_names.at(2), "thread 2");
}

// Splits RFC 4180 CSV (quoted fields may hold commas and doubled quotes).
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>(1));
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        rows.back().back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        rows.back().back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().emplace_back();
    } else if (c == '\n') {
      rows.emplace_back(1);
    } else {
      rows.back().back() += c;
    }
  }
  if (rows.back() == std::vector<std::string>(1)) rows.pop_back();
  return rows;
}

TEST(ExportCsv, OneRowPerAllocationWithTimesScopeAndSite) {
  TempTrace trace("csv");
  write_history(trace.path());
  std::ostringstream out;
  an::export_csv(an::Trace::open(trace.path()), out);
  auto rows = parse_csv(out.str());
  ASSERT_EQ(rows.size(), 4u) << out.str();
  const std::vector<std::string> header = {"device",
                                           "addr",
                                           "size",
                                           "requested_size",
                                           "stream",
                                           "segment",
                                           "pool",
                                           "alloc_ns",
                                           "free_requested_ns",
                                           "free_completed_ns",
                                           "thread",
                                           "scope",
                                           "category",
                                           "stack",
                                           "site_function",
                                           "site_file",
                                           "site_line"};
  EXPECT_EQ(rows[0], header);
  // In allocation order. Times are ns since the start; empty: not freed by the end.
  EXPECT_EQ(rows[1],
            (std::vector<std::string>{"cpu", "0x100000", "1024", "1000", "0", "0x100000", "small",
                                      "140", "190", "190", "1", std::string(kModel) + "/layer1",
                                      "unknown", "3", "make_weights(int)", "model.h", "12"}));
  EXPECT_EQ(rows[2],
            (std::vector<std::string>{
                "cuda:0", "0x7f0000000000", "512", "500", "0", "0x7f0000000000", "small", "150",
                "220", "250", "1", std::string(kModel) + "/layer1", "unknown", "0", "", "", ""}));
  EXPECT_EQ(rows[3],
            (std::vector<std::string>{"cpu", "0x100400", "2048", "2000", "0", "0x100000", "small",
                                      "350", "", "", "2", "loader", "unknown", "0", "", "", ""}));
  // The quoted field is quoted as RFC 4180 says: doubled quotes inside quotes.
  EXPECT_NE(out.str().find("\"model \"\"big\"\", v2/layer1\""), std::string::npos) << out.str();
}

TEST(Export, RefusesMissingForeignAndUnfinalizedFilesNamingThem) {
  std::ostringstream out;
  auto expect_error = [&](const std::string& path, const std::string& what) {
    for (auto* fn : {&an::export_chrome, &an::export_csv}) {
      try {
        fn(an::Trace::open(path), out);
        ADD_FAILURE() << "no error for " << path;
      } catch (const st::StoreError& e) {
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      }
    }
  };
  expect_error("/nonexistent/trace.db", "cannot open");

  TempTrace text("not_sqlite");
  std::ofstream(text.path()) << "hello, this is not a database\n";
  expect_error(text.path(), "not a Tidemark trace");

  TempTrace raw("unfinalized");
  write_history(raw.path(), /*finalize=*/false);
  expect_error(raw.path(), "not finalized");
  EXPECT_TRUE(out.str().empty()) << "nothing is written before the input is known good";
}

TEST(Export, AFailingOutputStreamThrows) {
  TempTrace trace("badstream");
  write_history(trace.path());
  std::ostringstream out;
  out.setstate(std::ios::badbit);
  const an::Trace t = an::Trace::open(trace.path());
  EXPECT_THROW(an::export_chrome(t, out), std::runtime_error);
  EXPECT_THROW(an::export_csv(t, out), std::runtime_error);
}

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Temporaries export_to_file left beside `path` (Note [Output files]: `PATH.part-...`).
int temporaries_beside(const std::string& path) {
  int n = 0;
  const std::string prefix = std::filesystem::path(path).filename().string() + ".part-";
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
    n += e.path().filename().string().starts_with(prefix);
  return n;
}

TEST(Export, ToFileWritesTheWholeExportAndRefusesTheTraceItself) {
  TempTrace trace("tofile");
  write_history(trace.path());
  const an::Trace t = an::Trace::open(trace.path());
  const std::string out = trace.path() + ".json";
  std::ofstream(out) << "old contents";
  an::ExportResult r = an::export_to_file(t, out, {an::ExportFormat::chrome, {}});
  EXPECT_FALSE(r.snapshot);
  EXPECT_EQ(file_text(out), chrome_text(trace.path()));
  r = an::export_to_file(t, out, {an::ExportFormat::snapshot, {}});
  ASSERT_TRUE(r.snapshot);
  EXPECT_GT(r.snapshot->entries, 0u);
  EXPECT_EQ(file_text(out).substr(0, 2), "\x80\x04");  // a protocol 4 pickle

  const std::string before = file_text(trace.path());
  EXPECT_THROW(an::export_to_file(t, trace.path(), {an::ExportFormat::csv, {}}), an::OutputError);
  EXPECT_EQ(file_text(trace.path()), before);
  EXPECT_EQ(temporaries_beside(out), 0);
  std::filesystem::remove(out);
}

TEST(Export, AFailedExportToFileLeavesTheOutputAsItWas) {
  TempTrace trace("tofile_damaged");
  write_history(trace.path());
  {  // the raw events damaged after finalize: the snapshot export fails halfway
    st::detail::Db db(trace.path(), st::detail::Db::Mode::read_write);
    db.exec("UPDATE event_blocks SET data = x'0102030405'");
  }
  const an::Trace t = an::Trace::open(trace.path());
  const std::string out = trace.path() + ".pickle";
  std::ofstream(out) << "old contents";
  EXPECT_THROW(an::export_to_file(t, out, {an::ExportFormat::snapshot, {}}), st::StoreError);
  EXPECT_EQ(file_text(out), "old contents");
  EXPECT_EQ(temporaries_beside(out), 0);
  std::filesystem::remove(out);
}

TEST(Export, FormatNamesRoundTrip) {
  for (an::ExportFormat f :
       {an::ExportFormat::chrome, an::ExportFormat::csv, an::ExportFormat::snapshot})
    EXPECT_EQ(an::parse_export_format(an::export_format_name(f)), f);
  EXPECT_FALSE(an::parse_export_format("json"));
}

[[gnu::noinline]] tl::Tensor export_test_allocate(int64_t n) {
  return tl::ones({n});
}

TEST(Export, ARecordingOfTensorlibExportsItsPeakAndSites) {
  TempTrace trace("recorded");
  tidemark::record::Options o;
  o.path = trace.path();
  o.stack_depth = 32;
  tidemark::record::start(o);
  {
    tl::profiler::Scope scope("work");
    tl::Tensor a = export_test_allocate(1 << 16);
    tl::Tensor b = export_test_allocate(1 << 14);
    tl::profiler::mark("halfway");
  }
  tidemark::record::stop();

  auto reader = st::TraceReader::open(trace.path(), st::TraceReader::Require::finalized);
  int64_t cpu = reader.device_row_id(kCpu).value();
  int64_t peak = reader.peak(cpu)->bytes;

  json doc = json::parse(chrome_text(trace.path()));
  int64_t highest = 0, last = -1;
  bool scope_seen = false, mark_seen = false;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "C" && e["name"] == "cpu allocated") {
      highest = std::max(highest, e["args"]["bytes"].get<int64_t>());
      last = e["args"]["bytes"];
    }
    if (e["ph"] == "X" && e["name"] == "work") scope_seen = true;
    if (e["ph"] == "i" && e["name"] == "halfway") mark_seen = true;
  }
  EXPECT_EQ(highest, peak);
  EXPECT_GE(highest, int64_t{(1 << 16) + (1 << 14)} * 4);
  EXPECT_EQ(last, 0);  // both tensors were freed before the recording stopped
  EXPECT_TRUE(scope_seen);
  EXPECT_TRUE(mark_seen);

  std::ostringstream csv;
  an::export_csv(an::Trace::open(trace.path()), csv);
  auto rows = parse_csv(csv.str());
  ASSERT_GE(rows.size(), 3u) << csv.str();
  size_t in_scope = 0, at_site = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), rows[0].size()) << csv.str();
    if (rows[i][11] != "work") continue;
    ++in_scope;
    // The site is the caller of tensorlib, not the allocator inside it.
    if (rows[i][14].find("export_test_allocate") != std::string::npos) ++at_site;
  }
  EXPECT_EQ(in_scope, 2u) << csv.str();
  EXPECT_EQ(at_site, 2u) << csv.str();
}

}  // namespace
