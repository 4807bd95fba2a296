#include "profiler/analysis/trace.h"

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <stdexcept>

#include "profiler/analysis/sql.h"
#include "profiler/analysis/units.h"

namespace tidemark::analysis {

std::string device_name(events::DeviceId id) {
  std::string type = id.type == events::DeviceType::cuda ? "cuda" : "cpu";
  if (id.type == events::DeviceType::cpu && id.index == 0) return type;
  return type + ":" + std::to_string(id.index);
}

Trace::~Trace() = default;
Trace::Trace(Trace&&) noexcept = default;
Trace& Trace::operator=(Trace&&) noexcept = default;

Trace Trace::open(const std::string& path, store::TraceReader::Require require) {
  Trace t;
  t.reader_ = std::make_unique<store::TraceReader>(store::TraceReader::open(path, require));
  t.db_ = std::make_unique<detail::SqlDb>(path);
  auto meta_u64 = [&](const char* key) -> std::optional<uint64_t> {
    auto v = t.reader_->meta_value(key);
    if (!v || v->empty()) return std::nullopt;
    try {
      return static_cast<uint64_t>(std::stoll(*v));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  };
  auto first = meta_u64("first_ts_ns"), last = meta_u64("last_ts_ns");
  auto start = meta_u64("start_ts_ns");
  t.origin_ns_ = first ? *first : start.value_or(0);
  auto end = last ? last : t.reader_->end_ts();
  t.end_ns_ = end && *end >= t.origin_ns_ ? *end : t.origin_ns_;
  for (const store::DeviceRow& row : t.reader_->devices())
    t.devices_.push_back({row.id, device_name(row.info.id), row.info.name, row.info.capacity});
  t.stack_depth_ = static_cast<int>(meta_u64("stack_depth").value_or(0));
  t.imported_ = t.reader_->meta_value("command_line").value_or("").rfind("pytorch-snapshot:", 0) == 0;
  t.synthetic_times_ = meta_u64("synthetic_times").value_or(0) != 0;
  t.categories_inferred_ = t.reader_->meta_value("categories_inferred").value_or("");
  return t;
}

std::string Trace::time_text(uint64_t ts) const {
  return format_time_point(ts >= origin_ns_ ? ts - origin_ns_ : 0, synthetic_times_);
}

bool Trace::stack_truncated(uint64_t stack_id) const {
  // An imported snapshot's depth is its deepest frames list, not a capture limit.
  if (stack_id == 0 || stack_depth_ <= 0 || imported_) return false;
  const std::vector<uint64_t> ips = reader_->stack(stack_id);
  if (ips.empty() || ips.size() < static_cast<size_t>(stack_depth_)) return false;
  const auto& fs = frames(ips.back());  // the outermost address; its frames innermost first
  if (fs.empty()) return true;
  const std::string_view f = fs.back().function;
  for (std::string_view entry : {"_start", "start_thread", "thread_start", "clone", "clone3",
                                 "__clone", "__clone3", "__clone_internal", "<module>"})
    if (f == entry) return false;  // a process's, a thread's, or a Python script's start
  return f.substr(0, 12) != "__libc_start";
}

const DeviceRef& Trace::device(std::string_view spec) const {
  std::string want(spec);
  if (want == "cuda") want = "cuda:0";
  if (want == "cpu:0") want = "cpu";
  for (const DeviceRef& d : devices_)
    if (d.name == want || d.description == spec) return d;
  std::string known;
  for (const DeviceRef& d : devices_) known += (known.empty() ? "" : ", ") + d.name;
  throw std::invalid_argument("no device '" + std::string(spec) +
                              "' in the trace (it has: " + (known.empty() ? "none" : known) + ")");
}

const DeviceRef* Trace::device_by_id(int64_t id) const {
  for (const DeviceRef& d : devices_)
    if (d.id == id) return &d;
  return nullptr;
}

const std::vector<store::ResolvedFrame>& Trace::frames(uint64_t ip) const {
  auto it = frames_.find(ip);
  if (it == frames_.end()) it = frames_.emplace(ip, reader_->frames(ip)).first;
  return it->second;
}

namespace {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

// The last component of a path, '/' or '\\' separated (PyTorch snapshots from Windows).
std::string basename(const std::string& path) {
  size_t slash = path.find_last_of("/\\");
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The qualified name of a demangled function: "void tl::f<int>(int)" -> "tl::f<int>".
// "(anonymous namespace)" is part of a name, not the start of the parameters (else a function
// in an anonymous namespace returning a std:: type would look like a std:: function).
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

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}
bool contains(std::string_view s, std::string_view p) {
  return s.find(p) != std::string_view::npos;
}

// Program entry points, thread trampolines and the C runtime: never a useful site.
bool is_runtime(const store::ResolvedFrame& f) {
  std::string_view name = qualified_name(f.function);
  for (std::string_view p :
       {"__", "_start", "start_thread", "clone", "execute_native_thread_routine", "_Py", "Py_",
        "pthread_", "NSYS_"})
    if (starts_with(name, p)) return true;
  // The CPython API: Py followed by a capital (PyEval_..., PyObject_Call, PyCell_New).
  if (name.size() > 2 && starts_with(name, "Py") &&
      std::isupper(static_cast<unsigned char>(name[2])))
    return true;
  std::string m = basename(f.module);
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
  for (char& c : p) c = c == '\\' ? '/' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return p;
}

// Note [Allocation site] in trace.h.
bool is_internal(const store::ResolvedFrame& f) {
  if (is_runtime(f)) return true;
  std::string_view name = qualified_name(f.function);
  while (starts_with(name, "(anonymous namespace)::")) name.remove_prefix(23);
  for (std::string_view p : {"tl::", "tidemark::", "std::", "__gnu_cxx::", "c10::", "at::",
                             "torch::", "caffe2::", "THP", "pybind11::"})
    if (starts_with(name, p)) return true;
  // CPython's C functions that snapshots' native stacks show without a file.
  for (std::string_view p : {"cfunction_call", "cfunction_vectorcall", "method_vectorcall", "type_call",
                             "slot_", "vectorcall_", "binary_op", "ternary_op", "unary_op", "pymain_", "run_eval_code_obj", "run_mod", "pyrun_"})
    if (starts_with(name, p)) return true;
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

// A thread of the autograd engine (PyTorch's, or tensorlib's): its stacks never reach the
// user's code, which called backward() on another thread.
bool is_autograd_engine(const store::ResolvedFrame& f) {
  std::string_view name = qualified_name(f.function);
  return starts_with(name, "torch::autograd::Engine::thread_main") ||
         starts_with(name, "torch::autograd::python::PythonEngine::thread_init") ||
         starts_with(name, "torch::autograd::Engine::execute") ||
         starts_with(name, "tl::autograd::backward");
}

std::string frame_label(const store::ResolvedFrame& f) {
  if (f.file.empty() || f.file == "??") return f.function.empty() ? "??" : f.function;
  return f.function + " (" + basename(f.file) + ":" + std::to_string(f.line) + ")";
}

}  // namespace

std::optional<store::ResolvedFrame> Trace::site_frame(uint64_t stack_id) const {
  if (stack_id == 0) return std::nullopt;
  const store::ResolvedFrame* outermost = nullptr;      // not a runtime frame
  const store::ResolvedFrame* outermost_lib = nullptr;  // ... nor the standard library's
  const store::ResolvedFrame* first_resolved = nullptr;
  bool autograd = false;
  for (uint64_t ip : reader_->stack(stack_id)) {
    for (const store::ResolvedFrame& f : frames(ip)) {
      if (f.function.empty()) continue;
      if (frames_mode_ == Frames::all) return f;
      if (!first_resolved) first_resolved = &f;
      if (!is_runtime(f)) outermost = &f;
      if (!is_runtime(f) && !is_std_library(f)) outermost_lib = &f;
      autograd = autograd || is_autograd_engine(f);
      if (!is_internal(f)) return f;
    }
  }
  if (autograd) return store::ResolvedFrame{"backward (autograd engine)", "", 0, false, ""};
  if (outermost_lib) return *outermost_lib;
  if (outermost) return *outermost;
  if (first_resolved) return *first_resolved;
  return std::nullopt;
}

void Trace::set_frames(Frames frames) {
  if (frames == frames_mode_) return;
  frames_mode_ = frames;
  sites_.clear();
}

const Site& Trace::site(uint64_t stack_id) const {
  auto it = sites_.find(stack_id);
  if (it != sites_.end()) return it->second;
  Site s{"(no stack)", "(no stack)"};
  if (stack_id != 0) {
    if (auto f = site_frame(stack_id)) {
      s = {f->function + "@" + basename(f->file), frame_label(*f)};
    } else if (std::vector<uint64_t> ips = reader_->stack(stack_id); !ips.empty()) {
      s = {hex(ips.front()), hex(ips.front())};
    }
  }
  return sites_.emplace(stack_id, std::move(s)).first->second;
}

std::vector<std::string> Trace::stack_frames(uint64_t stack_id) const {
  std::vector<std::string> out;
  if (stack_id == 0) return out;
  for (uint64_t ip : reader_->stack(stack_id)) {
    const auto& fs = frames(ip);
    if (fs.empty()) out.push_back(hex(ip));
    for (const store::ResolvedFrame& f : fs) out.push_back(frame_label(f));
  }
  return out;
}

}  // namespace tidemark::analysis
