// `tidemark mcp` (cli/mcp.cpp, Note [The MCP server]): a client session over stdio --
// initialize, the initialized notification, tools/list, tools/call on a real PyTorch snapshot
// -- where every answer is one JSON-RPC line, the tools' results are the commands' own --json
// (held against `tidemark import` and `tidemark summary --json` run apart), and bad input comes
// back as JSON-RPC errors or tool errors without ending the session.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "run_program.h"

namespace {

using nlohmann::json;

const std::string kSnapshot =
    std::string(TIDEMARK_TEST_DATA) + "/pytorch/snapshot_small_gpu.pickle";

// The server's replies to `messages` (one JSON text each, sent as lines), one JSON per line.
std::vector<json> session(const std::vector<std::string>& messages) {
  const auto dir = tl_test::temp_dir("tidemark_mcp");
  const std::string in = (dir / "in.jsonl").string();
  {
    std::ofstream f(in);
    for (const std::string& m : messages) f << m << '\n';
  }
  tl_test::Result r = tl_test::run(
      {"/bin/sh", "-c", tl_test::quote(TIDEMARK_CLI) + " mcp < " + tl_test::quote(in)});
  EXPECT_EQ(r.rc, 0) << r.err;
  std::vector<json> out;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    json j = json::parse(line, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not one JSON per line: " << line;
    out.push_back(j);
  }
  return out;
}

std::string call(int id, const std::string& tool, const json& args) {
  return json{{"jsonrpc", "2.0"},
              {"id", id},
              {"method", "tools/call"},
              {"params", {{"name", tool}, {"arguments", args}}}}
      .dump();
}

TEST(Mcp, AClientSessionOpensASnapshotAndGetsTheCommandsOwnAnswers) {
  const std::vector<json> replies = session({
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}})",
      R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
      R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})",
      call(3, "summary", {{"path", kSnapshot}}),
      call(4, "diagnose", {{"path", kSnapshot}}),
      R"({"jsonrpc":"2.0","id":5,"method":"ping"})",
  });
  ASSERT_EQ(replies.size(), 5u);  // the notification has no reply
  EXPECT_EQ(replies[0]["id"], 1);
  EXPECT_EQ(replies[0]["result"]["protocolVersion"], "2025-06-18");
  EXPECT_TRUE(replies[0]["result"]["capabilities"].contains("tools"));
  std::vector<std::string> names;
  for (const json& t : replies[1]["result"]["tools"]) {
    names.push_back(t["name"]);
    EXPECT_EQ(t["inputSchema"]["type"], "object") << t.dump();
  }
  for (const char* want :
       {"open", "summary", "top", "timeline", "steps", "diagnose", "diff", "replay", "predict"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;

  // The summary is the command's own --json: held against an import and a summary run apart.
  const json& s = replies[2]["result"];
  ASSERT_EQ(s["isError"], false) << s.dump();
  const std::string db = (tl_test::temp_dir("tidemark_mcp") / "apart.db").string();
  std::filesystem::remove(db);
  ASSERT_EQ(tl_test::run({TIDEMARK_CLI, "import", kSnapshot, "-o", db}).rc, 0);
  tl_test::Result apart = tl_test::run({TIDEMARK_CLI, "summary", db, "--json"});
  ASSERT_EQ(apart.rc, 0);
  json expected = json::parse(apart.out);
  json got = s["structuredContent"];
  ASSERT_TRUE(got.is_object()) << s.dump();
  EXPECT_EQ(got["devices"], expected["devices"]);
  EXPECT_EQ(json::parse(s["content"][0]["text"].get<std::string>()), got);
  EXPECT_EQ(replies[3]["result"]["isError"], false);
  EXPECT_TRUE(replies[3]["result"]["structuredContent"].contains("findings"));
  EXPECT_EQ(replies[4]["result"], json::object());
}

TEST(Mcp, BadInputIsAnErrorAndTheSessionGoesOn) {
  const std::vector<json> replies = session({
      "this is not json",
      R"({"jsonrpc":"2.0","id":1,"method":"resources/list"})",
      call(2, "summary", {{"path", "/no/such/snapshot.pickle"}}),
      call(3, "nope", json::object()),
      call(4, "predict",
           {{"runs", json::array({{{"size", 1}, {"path", kSnapshot}}})}, {"at", json::array({4})}}),
      R"({"jsonrpc":"2.0","id":5,"method":"tools/list"})",
  });
  ASSERT_EQ(replies.size(), 6u);
  EXPECT_EQ(replies[0]["error"]["code"], -32700);
  EXPECT_EQ(replies[1]["error"]["code"], -32601);
  EXPECT_EQ(replies[2]["result"]["isError"], true);
  EXPECT_NE(replies[2]["result"]["content"][0]["text"].get<std::string>().find(
                "/no/such/snapshot.pickle"),
            std::string::npos);
  EXPECT_EQ(replies[3]["result"]["isError"], true);
  EXPECT_EQ(replies[4]["result"]["isError"], true);  // one run: predict needs two sizes
  EXPECT_NE(replies[4]["result"]["content"][0]["text"].get<std::string>().find("two or more"),
            std::string::npos);
  EXPECT_TRUE(replies[5]["result"].contains("tools"));
}

}  // namespace
