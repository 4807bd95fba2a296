// tidemark::analysis: what the CLI and the GUI ask of a trace. Both link this library, so they
// always give the same answers. Results are plain structs; json.h serializes them.
//
// Times in results are nanoseconds relative to the trace origin (Trace::origin_ns(): the first
// event's time), unless a name ends in `_ts` (absolute event-clock time).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "profiler/analysis/category_rules.h"
#include "profiler/naming/site_rule.h"
#include "profiler/naming/units.h"
#include "profiler/store/tensor_tables.h"
#include "profiler/store/trace_reader.h"

namespace tidemark::analysis {

// A device of the trace: `id` is the `devices.id` the derived tables use; `name` is "cpu" or
// "cuda:0" ("rank1/cuda:0" in a merged trace: Note [Merged devices] in merge.h);
// `description` the recorded name ("cuda:0 (NVIDIA H200)").
struct DeviceRef {
  int64_t id = 0;
  std::string name;
  std::string description;
  uint64_t capacity = 0;
  std::optional<int64_t> rank;  // a merged trace's: the rank the device belongs to
  std::string local_name;       // its name in that rank's trace ("cuda:0"); else `name`
};

// Where an allocation (or sync) came from. Note [Allocation site]: the innermost frame of its
// stack that is the user's own code, as heaptrack and memray show it — not inside Tidemark,
// tensorlib, PyTorch, CPython, Python's packages or standard library, pybind11, the C++
// standard library or the C runtime. Library frames are those
//  * whose file (Windows' '\' read as '/', case ignored) lies under `tensorlib/`, `profiler/`,
//    `torch/`, a C++ standard library include directory, `site-packages/`, `dist-packages/`,
//    `lib/python...` or `cpython-...` (Python's standard library), CPython's source tree
//    (`Objects/`, `Python/`, `Modules/`, `Include/python...`, `Parser/`), glibc's sources, or is
//    `<frozen ...>` / `<string>`;
//  * whose function is in namespace `tl::`, `tidemark::`, `std::`, `__gnu_cxx::`, `c10::`,
//    `at::`, `torch::`, `caffe2::` or `pybind11::`, starts with `__` or `THP`, is CPython's
//    API (`_Py...`, `Py_...`, `Py` and a capital) or one of its call helpers
//    (`cfunction_call`, `method_vectorcall...`, `type_call`, `slot_tp_...`), or is a thread
//    entry point;
//  * whose module is libc, libstdc++, libgcc or libgomp.
// Unresolved addresses are skipped too, and so are a PyTorch snapshot's capture frames
// (`torch::unwind::`, `torch::CapturedTraceback::gather` and every frame inside them) and the
// frames outside a thread's start (`start_thread`, `clone`, `execute_native_thread_routine`),
// which snapshots' unwinders may name after an unrelated symbol (both kept with Frames::all).
// When every frame is skipped: a stack of the autograd
// engine's own thread (PyTorch's `Engine::thread_main`, tensorlib's `tl::autograd::backward`)
// is "backward (autograd engine)"; otherwise (a stack cut short inside the library by the
// capture depth, or a library worker thread such as the DataLoader's) the outermost resolved
// frame that is neither the runtime's nor the standard library's is used, as the one nearest
// the caller (the worker's loop, not std::thread's trampoline), then the outermost that is not
// the runtime's, then the innermost resolved frame, then the innermost address ("0x..."); no
// stack gives "(no stack)". With Frames::all (`--frames all`) the site is the innermost resolved
// frame, library or not. site_rule.h holds the rule.

struct Site {
  std::string key;    // "function@file" (no line, so a diff survives edits that move lines)
  std::string label;  // "function (file:line)"
};

class Trace {
 public:
  // Opens and checks a trace. `finalized` (the default) refuses one whose derived tables are
  // missing. Throws store::StoreError naming the file and the problem.
  static Trace open(const std::string& path,
                    store::TraceReader::Require require = store::TraceReader::Require::finalized);
  ~Trace();
  Trace(Trace&&) noexcept;
  Trace& operator=(Trace&&) noexcept;

  const store::TraceReader& reader() const { return *reader_; }
  const std::string& path() const { return reader_->path(); }
  // The name a user gave for the trace, which messages and advice name: the snapshot a
  // temporary trace was imported from (Note [Snapshots as traces] in
  // profiler/importers/temporary_import.h), else path().
  const std::string& shown_path() const { return shown_path_.empty() ? path() : shown_path_; }
  void set_shown_path(std::string p) { shown_path_ = std::move(p); }
  // The files the trace was read from, which an output must never be (Note [Output files]):
  // path(), and the snapshot it was imported from, if any.
  std::vector<std::string> input_files() const {
    if (shown_path_.empty() || shown_path_ == path()) return {path()};
    return {path(), shown_path_};
  }
  // The time origin: the first event's time (meta first_ts_ns), else the recording start.
  uint64_t origin_ns() const { return origin_ns_; }
  // The last event's time (meta last_ts_ns), else the recording end, else the origin.
  uint64_t end_ns() const { return end_ns_; }
  uint64_t duration_ns() const { return end_ns_ - origin_ns_; }

  // A value of the `meta` table (the keys: store/meta_keys.h): its text ("" when absent), or
  // its integer (empty when absent or not an integer).
  std::string meta_text(const char* key) const;
  std::optional<int64_t> meta_int(const char* key) const;

  const std::vector<DeviceRef>& devices() const { return devices_; }
  // "cpu", "cuda:0", "cuda" (cuda:0), or the recorded description. Throws std::invalid_argument
  // listing the devices when there is none such.
  const DeviceRef& device(std::string_view spec) const;
  const DeviceRef* device_by_id(int64_t id) const;

  const Site& site(uint64_t stack_id) const;
  // Which frames make a site (Note [Allocation site]): the user's (the default) or any.
  void set_frames(Frames frames);
  Frames frames_mode() const { return frames_mode_; }
  // The source file GroupBy::line attributes allocations to (`--file`): the innermost frame in
  // it, matched by path or by trailing path components ("model.py", "pkg/model.py"); empty:
  // the site's frame (Note [Source lines] in memory.cpp).
  void set_source_file(std::string file) { source_file_ = std::move(file); }
  const std::string& source_file() const { return source_file_; }
  // Custom categories (Note [Category rules] in category_rules.h): with rules set, grouping by
  // category names allocations by them instead of their recorded or inferred role.
  void set_category_rules(std::shared_ptr<const CategoryRules> rules);
  const CategoryRules* category_rules() const { return category_rules_.get(); }
  // The category an allocation is grouped under: its rule's name, or without rules the name of
  // `recorded` ("parameter", "activation", ...).
  std::string category_label(uint64_t stack_id, events::Category recorded) const;
  // The frame Note [Allocation site] picks for a stack (empty: no resolved frame).
  std::optional<store::ResolvedFrame> site_frame(uint64_t stack_id) const;
  // The frames of a stack, innermost first, as "function (file:line)" ("0x..." unresolved,
  // "??" for a frame with neither function nor file).
  std::vector<std::string> stack_frames(uint64_t stack_id) const;
  // The resolved frames of a stack, innermost first, with their whole file paths (the
  // detectors that read which library a frame is in: torch/optim, torch/nn); unresolved
  // addresses are left out.
  std::vector<store::ResolvedFrame> resolved_frames(uint64_t stack_id) const;
  // Per frame of stack_frames(stack_id), whether it is library code (is_library_frame: Note
  // [Allocation site]); an unresolved address counts as library, as the site rule skips it.
  std::vector<bool> library_frames(uint64_t stack_id) const;
  // An imported PyTorch snapshot (meta command_line `pytorch-snapshot:...`): no tensor records,
  // steps or syncs, and a stack_depth that is its deepest stack, not a capture limit.
  bool imported_snapshot() const { return imported_; }
  // Times are the order of a snapshot's entries, 1 us apart, not clock times (meta
  // synthetic_times: a snapshot of PyTorch before 2.1): show event numbers, not seconds.
  bool synthetic_times() const { return synthetic_times_; }
  // What the allocations' categories were inferred from (meta categories_inferred: an imported
  // snapshot's, Note [Inferred categories] in profiler/importers/infer.cpp); empty when they
  // were recorded (or are all unknown).
  const std::string& categories_inferred() const { return categories_inferred_; }
  // How `tidemark estimate` made the trace, as JSON (meta estimated: the card, its capacity,
  // what was emulated and what could not be; docs/estimate.md); empty when a GPU ran it. Every
  // figure of such a trace is an estimate, and what shows it says so.
  const std::string& estimated() const { return estimated_; }
  // "2.053 s" or "event 5553" for an absolute time of this trace.
  std::string time_text(uint64_t ts) const;
  // The recording's capture depth (meta stack_depth; 0: recorded without stacks).
  int stack_depth() const { return stack_depth_; }
  // Whether a stack was cut short by the capture depth: as many return addresses as the
  // depth, and its outermost frame not where a process, a thread or a Python script starts
  // (`_start`, `__libc_start_main`, `start_thread`, `clone`, `<module>`). Such stacks lack
  // their outer callers. Never in an imported snapshot, whose depth is no capture limit.
  bool stack_truncated(uint64_t stack_id) const;

 private:
  Trace() = default;
  std::unique_ptr<store::TraceReader> reader_;
  uint64_t origin_ns_ = 0, end_ns_ = 0;
  int stack_depth_ = 0;
  bool imported_ = false;  // an imported PyTorch snapshot (meta command_line pytorch-snapshot:...)
  bool synthetic_times_ = false;
  std::string categories_inferred_;
  std::string estimated_;
  std::string shown_path_;
  Frames frames_mode_ = Frames::user;
  std::string source_file_;
  std::shared_ptr<const CategoryRules> category_rules_;
  struct CategoryCache {
    std::mutex mutex;
    std::unordered_map<uint64_t, std::string> by_stack;
  };
  std::unique_ptr<CategoryCache> category_cache_;  // with rules: each stack's category
  std::vector<DeviceRef> devices_;
  mutable std::map<uint64_t, Site> sites_;
  mutable std::map<uint64_t, std::vector<store::ResolvedFrame>> frames_;
  const std::vector<store::ResolvedFrame>& frames(uint64_t ip) const;
  // Calls f(ip, frame) for each frame of a stack, innermost first, inlined frames expanded;
  // `frame` is null for an address without resolved frames. Without the recorder's own
  // innermost frames (Note [The recorder's own frames] in site_rule.h).
  template <class F>
  void for_each_frame(uint64_t stack_id, F&& f) const;
};

// A row of the `tensors` table (docs/trace-format.md, store::TensorRow: a tensor or view, its
// times absolute, base_id 0 when it is not a view) and the site that made it.
// (events::TensorInfo is the event that records one.)
struct TensorRecord : store::TensorRow {
  std::string site;  // Note [Allocation site] of its creation: filled by the details (details.h)
  bool is_view() const { return base_id != 0; }
};
// The tensors `filter` takes, by creation time then id (store/tensor_tables.h); the site is
// left for the caller to fill.
std::vector<TensorRecord> tensor_records(const Trace& trace, const store::TensorFilter& filter);

// Note [Matching devices]
// Two traces (a diff, a baseline check, a comparison) speak of the same device when the devices
// have the same name ("cpu", "cuda:0"): the recorded description or the `devices.id` may differ
// between runs of one program.
struct DeviceMatch {
  std::string name;
  const DeviceRef* a = nullptr;  // null: the device is only in `b`
  const DeviceRef* b = nullptr;  // null: only in `a`
};
// The devices of `a`, in its order, then those only in `b`, each with its counterpart.
std::vector<DeviceMatch> match_devices(const Trace& a, const Trace& b);
// The same over two device lists (the GUI keeps a trace's list beside it).
std::vector<DeviceMatch> match_devices(const std::vector<DeviceRef>& a,
                                       const std::vector<DeviceRef>& b);

}  // namespace tidemark::analysis
