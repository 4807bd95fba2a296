// GroupBy::line (Note [Source lines] in profiler/analysis/memory.cpp): the bytes live at the
// peak put on the lines of one source file, by the innermost frame of each stack in it, on a
// trace written here whose every allocation and frame is known; and two runs compared line by
// line (diff --by line).
#include <gtest/gtest.h>

#include <map>

#include "analysis/trace_builder.h"
#include "profiler/analysis/diff.h"
#include "profiler/analysis/memory.h"
#include "profiler/analysis/trace.h"

namespace {

namespace an = tidemark::analysis;
using analysis_test::Builder;
namespace ev = tidemark::events;
namespace st = tidemark::store;

// Stacks (innermost first): 11 = linear (torch/nn/linear.py:120) <- forward (src/model.py:20)
// <- main (train.py:5); 12 = softmax (torch/nn/functional.py:9) <- attend (src/model.py:31) <-
// forward (src/model.py:21) <- main; 13 = load (data.py:7) <- main (train.py:4), not in model.py.
st::FinalizeOptions frames() {
  st::FinalizeOptions o;
  o.symbolize = [](uint64_t ip) -> std::vector<st::ResolvedFrame> {
    auto f = [](const char* fn, const char* file, int line) {
      st::ResolvedFrame r;
      r.function = fn;
      r.file = file;
      r.line = line;
      return r;
    };
    switch (ip) {
      case 0x10:
        return {f("main", "/home/u/proj/train.py", 5)};
      case 0x11:
        return {f("forward", "/home/u/proj/src/model.py", 20)};
      case 0x12:
        return {f("linear", "/usr/lib/python3/site-packages/torch/nn/linear.py", 120)};
      case 0x21:
        return {f("forward", "/home/u/proj/src/model.py", 21)};
      case 0x22:
        return {f("attend", "/home/u/proj/src/model.py", 31)};
      case 0x23:
        return {f("softmax", "/usr/lib/python3/site-packages/torch/nn/functional.py", 9)};
      case 0x30:
        return {f("main", "/home/u/proj/train.py", 4)};
      case 0x31:
        return {f("load", "/home/u/proj/data.py", 7)};
      default:
        return {};
    }
  };
  return o;
}

// A run: `linear` blocks (stack 11) of `a` bytes, softmax blocks (stack 12) of `b`, one data
// block (stack 13) of 4096; all live at the end (the peak).
std::string run(const std::string& name, uint64_t a, uint64_t b) {
  const std::string path = analysis_test::temp_path(name);
  Builder t(path);
  // Nodes: id, parent, ip (innermost node is the stack id).
  t.stack_node(100, 0, 0x10);
  t.stack_node(101, 100, 0x11);
  t.stack_node(11, 101, 0x12);
  t.stack_node(102, 100, 0x21);
  t.stack_node(103, 102, 0x22);
  t.stack_node(12, 103, 0x23);
  t.stack_node(104, 0, 0x30);
  t.stack_node(13, 104, 0x31);
  t.block(ev::Kind::segment_alloc, 1000, 0x10000, 1 << 24);
  t.alloc(2000, 0x10000, a, 11);
  t.alloc(2100, 0x20000, a, 11);
  t.alloc(2200, 0x40000, b, 12);
  t.alloc(2300, 0x80000, 4096, 13);
  t.finish(3000, frames());
  return path;
}

std::map<std::string, int64_t> by_line(an::Trace& t, const std::string& file) {
  t.set_source_file(file);
  auto at = an::peak_point(t, t.devices().front().id);
  std::map<std::string, int64_t> out;
  for (const an::Group& g :
       an::live_at(t, t.devices().front().id, *at, an::GroupBy::line, 0).groups)
    out[g.label] = g.bytes;
  return out;
}

TEST(SourceLines, BytesGoToTheInnermostLineOfTheFile) {
  an::Trace t = an::Trace::open(run("lines_a", 8192, 16384));
  const std::map<std::string, int64_t> lines = by_line(t, "src/model.py");
  const std::map<std::string, int64_t> expect = {{"forward (model.py:20)", 2 * 8192},
                                                 {"attend (model.py:31)", 16384},
                                                 {"(not in src/model.py)", 4096}};
  EXPECT_EQ(lines, expect);
  // By base name too; a file no frame is in takes everything as "not in".
  EXPECT_EQ(by_line(t, "model.py").at("attend (model.py:31)"), 16384);
  EXPECT_EQ(by_line(t, "other.py"),
            (std::map<std::string, int64_t>{{"(not in other.py)", 2 * 8192 + 16384 + 4096}}));
  // A partial name is no match: "odel.py" is not model.py.
  EXPECT_EQ(by_line(t, "odel.py").size(), 1u);
  // Without a file: the site's own line (the user's innermost frame).
  const std::map<std::string, int64_t> sites = by_line(t, "");
  EXPECT_EQ(sites.at("forward (model.py:20)"), 2 * 8192);
  EXPECT_EQ(sites.at("attend (model.py:31)"), 16384);
  EXPECT_EQ(sites.at("load (data.py:7)"), 4096);
}

TEST(SourceLines, TwoRunsCompareLineByLine) {
  an::Trace a = an::Trace::open(run("lines_b", 8192, 16384));
  an::Trace b = an::Trace::open(run("lines_c", 8192, 65536));
  a.set_source_file("model.py");
  b.set_source_file("model.py");
  const an::TraceDiff d = an::diff(a, b, an::GroupBy::line);
  ASSERT_EQ(d.sites.size(), 1u);
  ASSERT_EQ(d.sites[0].changed.size(), 1u);  // only the attention line changed
  EXPECT_EQ(d.sites[0].changed[0].label, "attend (model.py:31)");
  EXPECT_EQ(d.sites[0].changed[0].delta(), 65536 - 16384);
  EXPECT_TRUE(d.sites[0].added.empty());
  EXPECT_TRUE(d.sites[0].vanished.empty());
}

}  // namespace
