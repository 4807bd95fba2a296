// tidemark mcp: a Model Context Protocol server on stdio (docs/cli.md, "mcp"), so a coding
// assistant can open traces and PyTorch snapshots and ask what Tidemark answers.
//
// Note [The MCP server]
// ~~~~~~~~~~~~~~~~~~~~~
// JSON-RPC 2.0, one message per line on stdin and stdout (MCP's stdio transport); nothing
// else is written to stdout, diagnostics go to stderr. `initialize` negotiates the protocol
// version (the client's when this server speaks it, else the newest it does) and says the
// server has tools; `ping` answers; `tools/list` and `tools/call` work with or without the
// handshake. Each tool is a `tidemark` command with --json, run as a child process of this
// executable: the tools return exactly what the command's documented --json contract says
// (structuredContent, and the same text in content), a failed command comes back as a tool
// error with its message, and a crash or a hang in one call cannot take the server down. A
// snapshot is imported once per server into a temporary directory and reused.
#include <fcntl.h>
#include <fmt/core.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "profiler/store/trace_reader.h"

extern char** environ;

namespace tidemark::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

struct Output {
  int rc = -1;
  std::string out, err;
};

// This executable with `args`, stdout and stderr captured.
Output run_self(const std::vector<std::string>& args) {
  std::error_code ec;
  const std::string exe = fs::read_symlink("/proc/self/exe", ec).string();
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)
    return {-1, "", "pipe failed"};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> argv{const_cast<char*>(exe.c_str())};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  Output o;
  if (spawned != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    o.err = "cannot run " + exe;
    return o;
  }
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* into[2] = {&o.out, &o.err};
  int open = 2;
  char buf[65536];
  while (open > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        into[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  o.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return o;
}

json schema(json properties, std::vector<std::string> required) {
  return {
      {"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)}};
}

const json kPath = {
    {"type", "string"},
    {"description", "A Tidemark trace (.db) or a PyTorch memory snapshot (.pickle)"}};
const json kDevice = {{"type", "string"},
                      {"description", "cpu, cuda:0, ... (default: every device, or the busiest)"}};

json tool_list() {
  auto tool = [](const char* name, const char* description, json input) {
    return json{{"name", name}, {"description", description}, {"inputSchema", std::move(input)}};
  };
  return json::array({
      tool("open",
           "Open a trace or snapshot: its devices, events, duration and how it was recorded "
           "(tidemark info)",
           schema({{"path", kPath}}, {"path"})),
      tool("summary",
           "Peaks of allocated and reserved memory per device, what was live at the peak by site "
           "and category, "
           "leaks (tidemark summary --json)",
           schema({{"path", kPath}, {"device", kDevice}, {"limit", {{"type", "integer"}}}},
                  {"path"})),
      tool("top",
           "The sites (or stacks) holding the most memory at a moment, the peak by default "
           "(tidemark top --json)",
           schema(
               {{"path", kPath},
                {"device", kDevice},
                {"at", {{"type", "string"}, {"description", "peak, end, or a time such as 1.5s"}}},
                {"by", {{"type", "string"}, {"description", "site, stack, category or tensor"}}},
                {"limit", {{"type", "integer"}}}},
               {"path"})),
      tool("timeline",
           "Allocated and reserved memory over time, as points (tidemark timeline --json)",
           schema({{"path", kPath}, {"device", kDevice}, {"width", {{"type", "integer"}}}},
                  {"path"})),
      tool("steps",
           "Per training step: duration, memory at its start, its peak, allocations, syncs "
           "(tidemark steps --json)",
           schema({{"path", kPath}, {"device", kDevice}}, {"path"})),
      tool("diagnose",
           "What is wrong with the run's memory, where, and the fix: findings with ids, evidence "
           "and fixes "
           "(tidemark diagnose --json)",
           schema({{"path", kPath},
                   {"all", {{"type", "boolean"}, {"description", "minor findings too"}}}},
                  {"path"})),
      tool("diff", "What changed between two runs: peaks and sites (tidemark diff --json)",
           schema({{"a", kPath}, {"b", kPath}}, {"a", "b"})),
      tool("replay",
           "What-if: the run replayed through the caching allocator under other "
           "PYTORCH_CUDA_ALLOC_CONF settings "
           "or a capacity (tidemark replay --json)",
           schema({{"path", kPath},
                   {"alloc_conf",
                    {{"type", "string"}, {"description", "e.g. expandable_segments:True"}}},
                   {"capacity", {{"type", "string"}, {"description", "e.g. 80GiB"}}},
                   {"sweep", {{"type", "boolean"}, {"description", "rank 24 settings"}}}},
                  {"path"})),
      tool("predict",
           "Will it fit? The peak at another batch size or sequence length from runs at two or "
           "more sizes "
           "(tidemark predict --json)",
           schema({{"runs",
                    {{"type", "array"},
                     {"items", schema({{"size", {{"type", "number"}}}, {"path", kPath}},
                                      {"size", "path"})}}},
                   {"at", {{"type", "array"}, {"items", {{"type", "number"}}}}},
                   {"capacity", {{"type", "string"}}},
                   {"alloc_conf", {{"type", "string"}}}},
                  {"runs", "at"})),
  });
}

class Server {
 public:
  // One message in, at most one out (none for a notification).
  std::optional<json> handle(const json& m) {
    if (!m.is_object() || m.value("jsonrpc", "") != "2.0" || !m.contains("method") ||
        !m["method"].is_string())
      return error(m.is_object() && m.contains("id") ? m["id"] : json(nullptr), -32600,
                   "Invalid Request");
    const std::string method = m["method"];
    const bool notification = !m.contains("id");
    const json id = notification ? json(nullptr) : m["id"];
    const json params = m.contains("params") ? m["params"] : json::object();
    if (notification) return std::nullopt;  // notifications/initialized, cancelled, ...
    if (method == "initialize") {
      std::string version = kVersions[0];
      if (params.contains("protocolVersion") && params["protocolVersion"].is_string())
        for (const char* v : kVersions)
          if (params["protocolVersion"] == v) version = v;
      return result(
          id,
          {{"protocolVersion", version},
           {"capabilities", {{"tools", {{"listChanged", false}}}}},
           {"serverInfo",
            {{"name", "tidemark"}, {"title", "Tidemark GPU memory profiler"}, {"version", "1"}}},
           {"instructions",
            "Open a PyTorch memory snapshot or a Tidemark trace by path with any tool; `diagnose` "
            "says "
            "what is wrong and how to fix it, `predict` whether a larger size fits."}});
    }
    if (method == "ping") return result(id, json::object());
    if (method == "tools/list") return result(id, {{"tools", tool_list()}});
    if (method == "tools/call") {
      if (!params.contains("name") || !params["name"].is_string())
        return error(id, -32602, "tools/call needs a tool name");
      const json args = params.contains("arguments") && params["arguments"].is_object()
                            ? params["arguments"]
                            : json::object();
      return result(id, call(params["name"], args));
    }
    return error(id, -32601, "Method not found: " + method);
  }

 private:
  static json result(const json& id, json r) {
    return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(r)}};
  }
  static json error(const json& id, int code, const std::string& message) {
    return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
  }
  static json tool_error(const std::string& message) {
    return {{"content", json::array({{{"type", "text"}, {"text", message}}})}, {"isError", true}};
  }

  // A trace for `path`: itself, or the snapshot imported (once).
  std::string trace_of(const std::string& path) {
    if (store::is_trace_file(path)) return path;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) throw UsageError(path + ": no such file");
    auto it = imported_.find(path);
    if (it != imported_.end()) return it->second;
    const std::string db = dir_.file(fmt::format("import{}.db", imported_.size()));
    const Output o = run_self({"import", path, "-o", db});
    if (o.rc != 0) throw UsageError(o.err.empty() ? path + ": cannot import it" : o.err);
    return imported_[path] = db;
  }

  static std::string text(const json& args, const char* key) {
    if (!args.contains(key)) return {};
    if (args[key].is_string()) return args[key];
    if (args[key].is_number_integer()) return std::to_string(args[key].get<int64_t>());
    if (args[key].is_number()) return fmt::format("{}", args[key].get<double>());
    throw UsageError(std::string(key) + ": expected a string or a number");
  }

  json call(const std::string& name, const json& args) {
    std::vector<std::string> cmd;
    try {
      auto path = [&](const char* key) {
        const std::string p = text(args, key);
        if (p.empty()) throw UsageError(std::string("missing argument '") + key + "'");
        return trace_of(p);
      };
      auto option = [&](const char* key, const char* flag) {
        const std::string v = text(args, key);
        if (!v.empty()) cmd.insert(cmd.end(), {flag, v});
      };
      if (name == "open") {
        cmd = {"info", path("path")};
      } else if (name == "summary" || name == "top" || name == "timeline" || name == "steps") {
        cmd = {name, path("path")};
        option("device", "--device");
        if (name == "summary" || name == "top") option("limit", "--limit");
        if (name == "top") {
          option("at", "--at");
          option("by", "--by");
        }
        if (name == "timeline") option("width", "--width");
      } else if (name == "diagnose") {
        cmd = {"diagnose", path("path")};
        if (args.value("all", false)) cmd.push_back("--all");
      } else if (name == "diff") {
        cmd = {"diff", path("a"), path("b")};
      } else if (name == "replay") {
        cmd = {"replay", path("path")};
        option("alloc_conf", "--alloc-conf");
        option("capacity", "--capacity");
        if (args.value("sweep", false)) cmd.push_back("--sweep");
      } else if (name == "predict") {
        cmd = {"predict"};
        if (!args.contains("runs") || !args["runs"].is_array())
          throw UsageError("missing argument 'runs'");
        for (const json& r : args["runs"]) {
          if (!r.is_object()) throw UsageError("runs: each run is {\"size\": N, \"path\": FILE}");
          cmd.push_back(text(r, "size") + "=" + trace_of(text(r, "path")));
        }
        if (!args.contains("at") || !args["at"].is_array() || args["at"].empty())
          throw UsageError("missing argument 'at' (the sizes to predict at)");
        std::string at;
        for (const json& x : args["at"])
          at += (at.empty() ? "" : ",") + (x.is_string() ? x.get<std::string>() : x.dump());
        cmd.insert(cmd.end(), {"--at", at});
        option("capacity", "--capacity");
        option("alloc_conf", "--alloc-conf");
      } else {
        return tool_error("unknown tool '" + name + "' (tools/list names them)");
      }
    } catch (const UsageError& e) {
      return tool_error(e.what());
    }
    cmd.push_back("--json");
    const Output o = run_self(cmd);
    if (o.rc != 0)
      return tool_error(o.err.empty() ? fmt::format("tidemark {} failed (exit {})", name, o.rc)
                                      : o.err);
    json structured = json::parse(o.out, nullptr, false);
    json r = {{"content", json::array({{{"type", "text"}, {"text", o.out}}})}, {"isError", false}};
    if (structured.is_object()) r["structuredContent"] = std::move(structured);
    return r;
  }

  PrivateDir dir_{"tidemark-mcp", "mcp"};  // the imports of snapshots the tools were given
  std::map<std::string, std::string> imported_;
};

}  // namespace

int run_mcp() {
  Server server;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const json m = json::parse(line, nullptr, false);
    std::optional<json> reply;
    if (m.is_discarded())
      reply = json{{"jsonrpc", "2.0"},
                   {"id", nullptr},
                   {"error", {{"code", -32700}, {"message", "Parse error"}}}};
    else if (m.is_array())
      reply = json{{"jsonrpc", "2.0"},
                   {"id", nullptr},
                   {"error", {{"code", -32600}, {"message", "batches are not supported"}}}};
    else
      reply = server.handle(m);
    if (reply) {
      std::cout << reply->dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
      std::cout.flush();
    }
  }
  return kExitOk;
}

}  // namespace tidemark::cli
