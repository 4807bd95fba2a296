// Running a real program from a test: argv quoted for /bin/sh (no interpretation of the
// arguments), stdout and stderr captured, the exit status decoded. Shared by the CLI and
// sample tests.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace tl_test {

struct Result {
  int rc = -1;  // the exit status, or 128 + the signal that killed it
  std::string out, err;
};

inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A scratch directory for this test process (`tag` keeps test programs apart).
inline std::filesystem::path temp_dir(const std::string& tag = "tidemark_cli") {
  std::filesystem::path d =
      std::filesystem::temp_directory_path() / (tag + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

// Runs argv[0] with the rest as its arguments, with `env` ("NAME=value") added to the
// environment, stdin from /dev/null.
inline Result run(const std::vector<std::string>& argv, const std::vector<std::string>& env = {}) {
  std::string cmd;
  for (const std::string& e : env) cmd += "export " + quote(e) + "; ";
  for (size_t i = 0; i < argv.size(); ++i) cmd += (i ? " " : "") + quote(argv[i]);
  const std::filesystem::path dir = temp_dir("tidemark_run");
  const std::string out = (dir / "stdout").string(), err = (dir / "stderr").string();
  cmd += " >" + quote(out) + " 2>" + quote(err) + " </dev/null";
  int status = std::system(cmd.c_str());
  Result r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

#ifdef TIDEMARK_CLI
// Runs the `tidemark` binary under test (the CLI tests) with `args`.
inline Result tidemark(const std::vector<std::string>& args) {
  std::vector<std::string> argv{TIDEMARK_CLI};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv);
}
#endif

// The `key: integer` lines of a program's output (the pitfall samples' report).
inline std::map<std::string, int64_t> key_values(const std::string& out) {
  std::map<std::string, int64_t> kv;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    size_t colon = line.find(": ");
    if (colon == std::string::npos || colon == 0 || line[0] == ' ') continue;
    const std::string key = line.substr(0, colon), value = line.substr(colon + 2);
    if (key.find(' ') != std::string::npos) continue;
    char* end = nullptr;
    long long v = std::strtoll(value.c_str(), &end, 10);
    if (end != value.c_str() && *end == '\0') kv[key] = v;
  }
  return kv;
}

}  // namespace tl_test
