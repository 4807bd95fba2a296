// Running a real program from a test: spawned directly (no shell, so no interpretation of the
// arguments), stdout and stderr captured, the exit status decoded. Shared by every test tree
// that runs programs: the CLI, sample, analysis and interpose tests.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace tl_test {

struct Result {
  int rc = -1;  // the exit status, or 128 + the signal that killed it (-1: could not start)
  std::string out, err;
};

// `s` quoted for /bin/sh (a test that does want a shell: ulimit, redirections).
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

// Runs argv[0] (a path, or a name looked up in PATH) with the rest as its arguments, stdin
// from /dev/null, in this process's environment with `env` ("NAME=value") set over it and the
// variables named in `removed` taken out.
inline Result run(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
                  const std::vector<std::string>& removed = {}) {
  std::vector<std::string> environment;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    bool drop = false;
    for (const std::string& name : removed) drop = drop || kv.rfind(name + "=", 0) == 0;
    for (const std::string& o : env) drop = drop || kv.rfind(o.substr(0, o.find('=') + 1), 0) == 0;
    if (!drop) environment.push_back(kv);
  }
  environment.insert(environment.end(), env.begin(), env.end());
  std::vector<char*> cargv, cenv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const std::string& e : environment) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);

  const std::filesystem::path dir = temp_dir("tidemark_run");
  const std::string out = (dir / "stdout").string(), err = (dir / "stderr").string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  Result r;
  pid_t pid = 0;
  if (posix_spawnp(&pid, cargv[0], &actions, nullptr, cargv.data(), cenv.data()) == 0) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(out);
    r.err = slurp(err);
  } else {
    r.err = "cannot start " + argv[0];
  }
  posix_spawn_file_actions_destroy(&actions);
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
