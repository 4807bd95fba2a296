#include "profiler/naming/site_rule.h"

#include <cctype>

namespace tidemark::analysis {

std::string file_basename(const std::string& path) {
  size_t slash = path.find_last_of("/\\");
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string_view qualified_name(std::string_view f) {
  constexpr std::string_view kAnonymous = "(anonymous namespace)";
  int depth = 0;
  size_t start = 0, end = f.size();
  for (size_t i = 0; i < f.size(); ++i) {
    char c = f[i];
    if (f.substr(i).starts_with(kAnonymous))
      i += kAnonymous.size() - 1;
    else if (c == '<')
      ++depth;
    else if (c == '>')
      --depth;
    else if (c == '(' && depth == 0) {
      end = i;
      break;
    } else if (c == ' ' && depth == 0) {
      start = i + 1;
    }
  }
  return start < end ? f.substr(start, end - start) : f;
}

namespace {

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}
bool contains(std::string_view s, std::string_view p) {
  return s.find(p) != std::string_view::npos;
}

// Program entry points, thread trampolines and the C runtime: never a useful site.
bool is_runtime(const store::ResolvedFrame& f) {
  std::string_view name = qualified_name(f.function);
  for (std::string_view p : {"__", "_start", "start_thread", "clone",
                             "execute_native_thread_routine", "_Py", "Py_", "pthread_", "NSYS_"})
    if (starts_with(name, p)) return true;
  // The CPython API: Py followed by a capital (PyEval_..., PyObject_Call, PyCell_New).
  if (name.size() > 2 && starts_with(name, "Py") &&
      std::isupper(static_cast<unsigned char>(name[2])))
    return true;
  std::string m = file_basename(f.module);
  for (std::string_view p : {"libc.so", "libc-", "libstdc++", "libgcc", "libgomp", "ld-linux"})
    if (starts_with(m, p)) return true;
  return false;
}

// The C++ standard library's own code (a thread's std::thread::_State_impl, std::function).
bool is_std_library(const store::ResolvedFrame& f) {
  std::string_view name = qualified_name(f.function);
  for (std::string_view p : {"std::", "__gnu_cxx::"})
    if (starts_with(name, p)) return true;
  return contains(f.file, "/include/c++/") || contains(f.file, "/bits/");
}

// A path with '/' separators, lower-cased: Windows paths ("C:\\...\\Lib\\copy.py") match the
// same rules as others.
std::string normalized_path(std::string_view file) {
  std::string p(file);
  for (char& c : p)
    c = c == '\\' ? '/' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return p;
}

// A thread of the autograd engine (PyTorch's, or tensorlib's): its stacks never reach the
// user's code, which called backward() on another thread.
bool is_autograd_engine(const store::ResolvedFrame& f) {
  std::string_view name = qualified_name(f.function);
  return starts_with(name, "torch::autograd::Engine::thread_main") ||
         starts_with(name, "torch::autograd::python::PythonEngine::thread_init") ||
         starts_with(name, "torch::autograd::Engine::execute") ||
         starts_with(name, "tl::autograd::backward");
}

// PyTorch's stack capture in a snapshot's native frames (`torch::unwind::unwind`,
// `torch::CapturedTraceback::gather`): it and the frames inside it are the snapshot's own, not
// the program's, whatever names its unwinder gave them.
bool is_snapshot_capture(const store::ResolvedFrame& f) {
  std::string_view name = qualified_name(f.function);
  return starts_with(name, "torch::unwind::") ||
         starts_with(name, "torch::CapturedTraceback::gather");
}

// Where a thread begins (glibc's start_thread and clone, libstdc++'s trampoline): the frames
// outside it made the thread, and are never a site (a snapshot's unwinder names them after
// whatever symbol lies nearest, `XCBDisconnectStub` on one real file).
bool is_thread_start(const store::ResolvedFrame& f) {
  std::string_view name = qualified_name(f.function);
  return name == "start_thread" || name == "clone" || name == "clone3" ||
         starts_with(name, "execute_native_thread_routine");
}

}  // namespace

bool is_autograd_engine_frame(const store::ResolvedFrame& f) {
  return is_autograd_engine(f);
}

bool is_backward_call_frame(const store::ResolvedFrame& f) {
  if (is_autograd_engine(f)) return true;
  std::string file = f.file;
  std::replace(file.begin(), file.end(), '\\', '/');
  return f.function == "backward" && (file.find("torch/_tensor.py") != std::string::npos ||
                                      file.find("torch/autograd/") != std::string::npos);
}

// Note [Allocation site] in trace.h.
bool is_recorder_frame(const store::ResolvedFrame& f) {
  const std::string_view name = qualified_name(f.function);
  return name.starts_with("tidemark::events::") || name.starts_with("tidemark::record::");
}

bool is_library_frame(const store::ResolvedFrame& f, bool by_path) {
  if (is_runtime(f)) return true;
  std::string_view name = qualified_name(f.function);
  while (starts_with(name, "(anonymous namespace)::")) name.remove_prefix(23);
  for (std::string_view p : {"tl::", "tidemark::", "std::", "__gnu_cxx::", "c10::", "at::",
                             "torch::", "caffe2::", "THP", "pybind11::"})
    if (starts_with(name, p)) return true;
  // CPython's C functions that snapshots' native stacks show without a file.
  for (std::string_view p : {"cfunction_call", "cfunction_vectorcall", "method_vectorcall",
                             "type_call", "slot_", "vectorcall_", "binary_op", "ternary_op",
                             "unary_op", "pymain_", "run_eval_code_obj", "run_mod", "pyrun_"})
    if (starts_with(name, p)) return true;
  if (!by_path) return false;
  const std::string file = normalized_path(f.file);
  for (std::string_view p : {"/tensorlib/", "/profiler/", "/include/c++/", "/bits/", "/torch/",
                             // Python's packages and standard library
                             "/site-packages/", "/dist-packages/", "/lib/python", "/cpython-",
                             // the C runtime's sources (glibc's nptl)
                             "/glibc-", "/nptl/"})
    if (contains(file, p)) return true;
  // CPython's own C sources (Objects/call.c, Python/ceval.c, Include/internal/pycore_call.h).
  if (file.ends_with(".c") || file.ends_with(".h"))
    for (std::string_view p : {"/objects/", "/python/", "/modules/", "/include/", "/parser/"})
      if (contains(file, p) && contains(file, "python")) return true;
  return starts_with(file, "<frozen") || starts_with(file, "<string>");
}

std::optional<store::ResolvedFrame> pick_site(std::span<const store::ResolvedFrame* const> frames,
                                              Frames mode) {
  const store::ResolvedFrame* outermost = nullptr;      // not a runtime frame
  const store::ResolvedFrame* outermost_lib = nullptr;  // ... nor the standard library's
  const store::ResolvedFrame* first_resolved = nullptr;
  bool autograd = false;
  size_t from = 0;  // past a snapshot's capture frames (Frames::all keeps them: the innermost)
  for (size_t i = 0; mode != Frames::all && i < frames.size(); ++i)
    if (is_snapshot_capture(*frames[i])) from = i + 1;
  for (const store::ResolvedFrame* fp : frames.subspan(from)) {
    const store::ResolvedFrame& f = *fp;
    if (f.function.empty()) continue;
    if (mode != Frames::all && is_thread_start(f)) break;
    if (mode == Frames::all) return f;
    if (!first_resolved) first_resolved = &f;
    if (!is_runtime(f)) outermost = &f;
    if (!is_runtime(f) && !is_std_library(f)) outermost_lib = &f;
    autograd = autograd || is_autograd_engine(f);
    if (!is_library_frame(f)) return f;
  }
  if (autograd) return store::ResolvedFrame{"backward (autograd engine)", "", 0, false, ""};
  if (outermost_lib) return *outermost_lib;
  if (outermost) return *outermost;
  if (first_resolved) return *first_resolved;
  return std::nullopt;
}

}  // namespace tidemark::analysis
