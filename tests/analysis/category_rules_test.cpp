// Custom categories (Note [Category rules] in profiler/analysis/category_rules.h): both rule
// forms, first match wins, the rest, bad files refused naming the rule; and on a trace written
// here, the peak grouped by the rules' names and the timeline bands stacked by them, their bytes
// derived from the allocations by hand.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "analysis/trace_builder.h"
#include "profiler/analysis/bands.h"
#include "profiler/analysis/category_rules.h"
#include "profiler/analysis/memory.h"
#include "profiler/analysis/trace.h"

namespace {

namespace an = tidemark::analysis;
namespace ev = tidemark::events;
namespace st = tidemark::store;

st::ResolvedFrame frame(const char* fn, const char* file, const char* module = "") {
  st::ResolvedFrame f;
  f.function = fn;
  f.file = file;
  f.module = module;
  return f;
}

TEST(CategoryRules, FirstMatchWinsAndTheRestIsNamed) {
  auto r = an::CategoryRules::parse(
      R"({"attention": "attention|softmax", "ffn": "swiglu|linear", "rest": "misc"})", "t");
  EXPECT_EQ(r->category_of({frame("softmax", "torch/functional.py"), frame("forward", "model.py")}),
            "attention");
  // A stack matching both: the first rule in the file's order.
  EXPECT_EQ(r->category_of({frame("linear", "torch/linear.py"), frame("attention", "model.py")}),
            "attention");
  EXPECT_EQ(r->category_of({frame("linear", "torch/linear.py")}), "ffn");
  EXPECT_EQ(r->category_of({frame("load", "data.py")}), "misc");
  EXPECT_EQ(r->names(), (std::vector<std::string>{"attention", "ffn", "misc"}));
  // The long form: every pattern of a rule matches one frame.
  auto l = an::CategoryRules::parse(
      R"({"rules": [{"name": "model attention", "function": "^attend$", "file": "model\\.py$"},
                    {"name": "data", "module": "dataloader"}]})",
      "t");
  EXPECT_EQ(l->category_of({frame("attend", "src/model.py")}), "model attention");
  EXPECT_EQ(l->category_of({frame("attend", "src/other.py")}), "other");  // file does not match
  EXPECT_EQ(l->category_of({frame("next", "x.py", "torch/utils/dataloader.py")}), "data");
}

// The same rules in YAML (a file named .yaml): the same names in the same order, the same
// categories; a YAML file that is no mapping, or an alias bomb, is refused naming it.
TEST(CategoryRules, YamlRulesAreTheJsonRules) {
  if (!an::CategoryRules::reads_yaml())
    GTEST_SKIP() << "built without libyaml: YAML rules untested";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tidemark-yaml-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string yaml = (dir / "rules.yaml").string(), list = (dir / "list.yml").string(),
                    bad = (dir / "bad.yaml").string();
  std::ofstream(yaml)
      << "# the short form\nattention: attention|softmax\nffn: 'swiglu|linear'\nrest: misc\n";
  std::ofstream(list)
      << "rules:\n  - name: model attention\n    function: ^attend$\n    file: model\\.py$\n"
         "  - {name: data, module: dataloader}\n";
  std::ofstream(bad) << "- just\n- a list\n";
  auto r = an::CategoryRules::load(yaml);
  EXPECT_EQ(r->names(), (std::vector<std::string>{"attention", "ffn", "misc"}));
  EXPECT_EQ(r->category_of({frame("linear", "torch/linear.py"), frame("attention", "model.py")}),
            "attention");
  EXPECT_EQ(r->category_of({frame("linear", "torch/linear.py")}), "ffn");
  EXPECT_EQ(r->category_of({frame("load", "data.py")}), "misc");
  auto l = an::CategoryRules::load(list);
  EXPECT_EQ(l->category_of({frame("attend", "src/model.py")}), "model attention");
  EXPECT_EQ(l->category_of({frame("attend", "src/other.py")}), "other");
  EXPECT_EQ(l->category_of({frame("next", "x.py", "torch/utils/dataloader.py")}), "data");
  // A list, and aliases that name one node 10^9 times (a few hundred bytes): refused, named.
  const std::string bomb = (dir / "bomb.yaml").string();
  {
    std::ofstream out(bomb);
    out << "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
    for (int i = 1; i < 10; ++i)
      out << "l" << i << ": &l" << i << " [*l" << i - 1 << ", *l" << i - 1 << ", *l" << i - 1
          << ", *l" << i - 1 << ", *l" << i - 1 << ", *l" << i - 1 << ", *l" << i - 1 << ", *l"
          << i - 1 << ", *l" << i - 1 << ", *l" << i - 1 << "]\n";
  }
  for (const std::string& f : {bad, bomb}) {
    try {
      an::CategoryRules::load(f);
      ADD_FAILURE() << f << " was accepted";
    } catch (const an::CategoryRulesError& e) {
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(CategoryRules, BadFilesAreRefusedNamingTheRule) {
  auto refused = [](const std::string& text, const std::string& says) {
    try {
      an::CategoryRules::parse(text, "rules.json");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const an::CategoryRulesError& e) {
      EXPECT_NE(std::string(e.what()).find("rules.json"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused("not json", "JSON object");
  refused("{}", "no category rules");
  refused(R"({"attention": "("})", "\"attention\"");
  refused(R"({"attention": 3})", "non-empty string");
  refused(R"({"rules": [{"function": "x"}]})", "rule 1: needs a \"name\"");
  refused(R"({"rules": [{"name": "a"}]})", "needs a \"function\", \"file\" or \"module\"");
}

// Stacks: 11 = softmax (torch/functional.py) <- forward (model.py); 12 = linear <- forward;
// 13 = load (data.py).
std::string write_trace(const std::string& name) {
  const std::string path = analysis_test::temp_path(name);
  analysis_test::Builder b(path);
  b.stack_node(100, 0, 0x10);
  b.stack_node(11, 100, 0x11);
  b.stack_node(12, 100, 0x12);
  b.stack_node(13, 0, 0x13);
  b.block(ev::Kind::segment_alloc, 1000, 0x10000, 1 << 24);
  b.alloc(2000, 0x10000, 4096, 11, ev::Category::activation);
  b.alloc(2100, 0x20000, 8192, 12, ev::Category::parameter);
  b.alloc(2200, 0x40000, 1024, 13, ev::Category::input);
  b.alloc(2300, 0x50000, 2048, 11, ev::Category::temporary);
  b.free(2400, 0x50000, 2048);
  st::FinalizeOptions o;
  o.symbolize = [](uint64_t ip) -> std::vector<st::ResolvedFrame> {
    switch (ip) {
      case 0x10:
        return {frame("forward", "/p/model.py")};
      case 0x11:
        return {frame("softmax", "/usr/lib/torch/functional.py")};
      case 0x12:
        return {frame("linear", "/usr/lib/torch/linear.py")};
      case 0x13:
        return {frame("load", "/p/data.py")};
      default:
        return {};
    }
  };
  b.finish(3000, o);
  return path;
}

TEST(CategoryRules, ThePeakAndTheBandsGoByTheRules) {
  an::Trace t = an::Trace::open(write_trace("category_rules"));
  const int64_t device = t.devices().front().id;
  auto by_category = [&] {
    std::map<std::string, int64_t> out;
    for (const an::Group& g :
         an::live_at(t, device, *an::peak_point(t, device), an::GroupBy::category, 0).groups)
      out[g.key] = g.bytes;
    return out;
  };
  // Without rules: the recorded roles. The peak is at 2300 (all four live: 15,360 bytes).
  EXPECT_EQ(by_category(),
            (std::map<std::string, int64_t>{
                {"activation", 4096}, {"parameter", 8192}, {"input", 1024}, {"temporary", 2048}}));
  t.set_category_rules(
      an::CategoryRules::parse(R"({"attention": "softmax", "ffn": "linear"})", "t"));
  EXPECT_EQ(by_category(), (std::map<std::string, int64_t>{
                               {"attention", 4096 + 2048}, {"ffn", 8192}, {"other", 1024}}));
  const an::Bands bands = an::allocated_bands(t, device, an::BandBy::category);
  EXPECT_EQ(bands.labels(), (std::vector<std::string>{"attention", "ffn", "other"}));
  EXPECT_EQ(bands.at(2300), (std::vector<int64_t>{4096 + 2048, 8192, 1024}));
  EXPECT_EQ(bands.at(2500), (std::vector<int64_t>{4096, 8192, 1024}));
}

}  // namespace
