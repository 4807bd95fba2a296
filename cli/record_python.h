// `tidemark record -- python train.py` (docs/recording.md, "PyTorch programs"): the Python
// startup hook (python/hook: sitecustomize.py and tidemark_hook) that records PyTorch's CUDA
// allocator in every Python process of the run, and the import of what it wrote into the run's
// trace.
#pragma once

#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"

namespace tidemark::cli {

// Whether `command` runs Python: an interpreter (python, python3.12, pypy3), a launcher that is
// a Python program (torchrun, accelerate, deepspeed), or a file whose #! line names python or
// whose name ends in .py.
bool is_python_command(const std::vector<std::string>& command);

// The directory holding the hook's sitecustomize.py: next to the executable (build tree:
// cli/python, a copy of python/hook; installed: ../share/tidemark/python), else the path compiled
// in. Empty when missing (then `record` says so and records without it).
std::string python_hook_dir();

// The recorded trace's summary on stderr (record.cpp); false when the trace is incomplete.
bool print_summary(const std::string& path);

class PythonHook {
 public:
  // Makes the directory the run's processes write their snapshots into (removed with this).
  explicit PythonHook(const RecordArgs& a);
  PythonHook(const PythonHook&) = delete;
  PythonHook& operator=(const PythonHook&) = delete;

  // The environment the program runs in, as NAME=value (the hook first on PYTHONPATH, ahead of
  // the program's own; where to write; what to record).
  std::vector<std::string> environment(bool nvtx) const;
  const std::string& hook_dir() const { return hook_; }

  // After the program (process `root_pid`) exited with `code`: imports the snapshots its
  // processes wrote into `output` (lined up with `output` itself when the CUDA injection wrote
  // a trace there since `started_unix_ns`; merged by rank when several ranks wrote one each)
  // and prints the summary, or says why nothing was recorded. Returns the exit status: the
  // program's, or 1 when it exited 0 and nothing was recorded; -1 when the hook wrote nothing
  // but the injection did (the caller finishes that trace as any other).
  int finish(const std::string& output, int code, int64_t started_unix_ns, int64_t root_pid) const;

 private:
  const RecordArgs& args_;
  std::string hook_;
  PrivateDir folder_;  // where the hook writes (made only when there is a hook)
  std::string dir_;    // its path, empty without a hook
};

}  // namespace tidemark::cli
