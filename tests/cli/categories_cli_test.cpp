// --categories (Note [Category rules]) on a recorded Transformer: the peak grouped by the
// project's own names, the same rules found beside the trace without the flag, the totals
// unchanged, and a bad rules file refused naming it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "run_program.h"

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

TEST(CategoriesCli, ThePeakIsGroupedByTheProjectsOwnNames) {
  const fs::path dir = tl_test::temp_dir("tidemark_categories") / "run";
  fs::create_directories(dir);
  const std::string trace = (dir / "t.db").string();
  ASSERT_EQ(tl_test::run({TIDEMARK_CLI, "record", "--stacks", "64", "--force", "-o", trace, "--",
                          std::string(TIDEMARK_SAMPLES_BIN) + "/train_transformer", "--seq-len",
                          "32", "--steps", "2"})
                .rc,
            0);
  const std::string rules = (tl_test::temp_dir("tidemark_categories") / "rules.json").string();
  std::ofstream(rules)
      << R"({"attention": "Attention::forward", "blocks": "Block::forward", "rest": "elsewhere"})";
  auto top = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {TIDEMARK_CLI, "top",    trace,     "--by",
                                     "category",   "--json", "--limit", "0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    tl_test::Result r = tl_test::run(argv);
    EXPECT_EQ(r.rc, 0) << r.err;
    return r.rc == 0 ? json::parse(r.out) : json();
  };
  const json roles = top({});
  const json custom = top({"--categories", rules});
  std::set<std::string> names;
  int64_t sum = 0;
  for (const json& g : custom["groups"]) {
    names.insert(g["key"].get<std::string>());
    sum += g["bytes"].get<int64_t>();
  }
  EXPECT_TRUE(names.count("attention")) << custom.dump();
  EXPECT_TRUE(names.count("blocks")) << custom.dump();
  for (const std::string& n : names)
    EXPECT_TRUE(n == "attention" || n == "blocks" || n == "elsewhere") << n;
  EXPECT_EQ(sum, custom["bytes"].get<int64_t>());
  EXPECT_EQ(custom["bytes"], roles["bytes"]);  // the same memory, named otherwise
  EXPECT_TRUE(roles["groups"][0]["key"] != "attention");
  // The same rules found beside the trace.
  fs::copy_file(rules, dir / "tidemark-categories.json", fs::copy_options::overwrite_existing);
  EXPECT_EQ(top({})["groups"], custom["groups"]);
  fs::remove(dir / "tidemark-categories.json");
  // Bug: a rules file in the working directory, or one another user planted beside the trace
  // (a shared /tmp), relabelled the user's report. The working directory is never searched;
  // a file beside the trace that is not the user's, or that anyone may write, is refused,
  // named, and not applied.
  {
    const fs::path elsewhere = tl_test::temp_dir("tidemark_categories_cwd");
    fs::copy_file(rules, elsewhere / "tidemark-categories.json",
                  fs::copy_options::overwrite_existing);
    tl_test::Result here = tl_test::run(
        {"/bin/sh", "-c",
         "cd " + tl_test::quote(elsewhere.string()) + " && exec " + tl_test::quote(TIDEMARK_CLI) +
             " top " + tl_test::quote(trace) + " --by category --json --limit 0"});
    ASSERT_EQ(here.rc, 0) << here.err;
    EXPECT_EQ(json::parse(here.out)["groups"], roles["groups"])
        << "rules from the working directory";
    const fs::path planted = dir / "tidemark-categories.json";
    fs::copy_file(rules, planted, fs::copy_options::overwrite_existing);
    fs::permissions(planted, fs::perms::others_write, fs::perm_options::add);
    tl_test::Result r = tl_test::run({TIDEMARK_CLI, "summary", trace});
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_NE(r.err.find(planted.string()), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("anyone may write"), std::string::npos) << r.err;
    fs::permissions(planted, fs::perms::others_write, fs::perm_options::remove);
    if (::chown(planted.c_str(), 65534, 65534) == 0 && ::geteuid() != 65534) {
      r = tl_test::run({TIDEMARK_CLI, "summary", trace});
      EXPECT_EQ(r.rc, 2) << r.err;
      EXPECT_NE(r.err.find("owned by user 65534"), std::string::npos) << r.err;
    }
    fs::remove(planted);
  }
  // What is shown says whose names they are: the summary and the report name the rules file.
  tl_test::Result text = tl_test::run({TIDEMARK_CLI, "summary", trace, "--categories", rules});
  EXPECT_NE(text.out.find("(by the rules of " + rules + ")"), std::string::npos) << text.out;
  const std::string html = (tl_test::temp_dir("tidemark_categories") / "report.html").string();
  ASSERT_EQ(tl_test::run({TIDEMARK_CLI, "report", trace, "--categories", rules, "-o", html}).rc, 0);
  std::ifstream in(html);
  const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("Categories by the rules of " + rules), std::string::npos);
  EXPECT_EQ(tl_test::run({TIDEMARK_CLI, "summary", trace}).out.find("by the rules of"),
            std::string::npos);
  // A bad file: exit 2, named.
  const std::string bad = (tl_test::temp_dir("tidemark_categories") / "bad.json").string();
  std::ofstream(bad) << R"({"attention": "("})";
  tl_test::Result r = tl_test::run({TIDEMARK_CLI, "summary", trace, "--categories", bad});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
}

}  // namespace
