// Runs a program with extra environment variables; returns its exit status, stdout and stderr.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace tidemark::interpose::testing {

struct RunResult {
  int status = -1;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline RunResult run_program(const std::vector<std::string>& argv,
                             const std::vector<std::string>& env_overrides,
                             const std::vector<std::string>& env_removed = {}) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string out = (dir / ("tm_out_" + std::to_string(getpid()))).string();
  const std::string err = (dir / ("tm_err_" + std::to_string(getpid()))).string();
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    bool drop = false;
    for (const auto& name : env_removed) drop = drop || kv.rfind(name + "=", 0) == 0;
    for (const auto& o : env_overrides)
      drop = drop || kv.rfind(o.substr(0, o.find('=') + 1), 0) == 0;
    if (!drop) env.push_back(kv);
  }
  for (const auto& o : env_overrides) env.push_back(o);
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  RunResult r;
  pid_t pid = 0;
  if (posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), cenv.data()) == 0) {
    int status = 0;
    waitpid(pid, &status, 0);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  posix_spawn_file_actions_destroy(&fa);
  r.out = slurp(out);
  r.err = slurp(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

}  // namespace tidemark::interpose::testing
