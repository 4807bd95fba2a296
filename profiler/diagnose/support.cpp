// What several detectors share (support.h).
#include "profiler/diagnose/support.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string_view>

#include "profiler/store/event_tables.h"
#include "profiler/store/meta_keys.h"
#include "profiler/store/tensor_tables.h"

namespace tidemark::diagnose::detail {

namespace {

constexpr const char* kSnapshotNoCategories =
    "the trace is an imported PyTorch snapshot: it has no tensor records, and PyTorch's own "
    "snapshots mark no block as an activation (none were inferred), so activations saved for "
    "backward cannot be recognised";

constexpr const char* kSnapshotNoBackward =
    "the trace is an imported PyTorch snapshot: its categories are inferred (activations "
    "included), but it has no backward scopes to tell a training step from an evaluation";

bool has_segments(const Trace& trace) {
  return store::any_segment(trace.reader());
}

// Whether `device` has allocated blocks (all devices: -1). A CUDA-injected trace of a program
// with its own caching allocator (PyTorch) has its segments only: allocated reads 0 there, so
// reserved against allocated says nothing about fragmentation or caching.
bool has_blocks(const Trace& trace, int64_t device = -1) {
  store::AllocationFilter f;
  if (device >= 0) f.device = device;
  return store::any_allocation(trace.reader(), f);
}

std::vector<int64_t> parse_ints(const std::string& json) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (i < json.size()) {
    if (json[i] == '-' || (json[i] >= '0' && json[i] <= '9')) {
      size_t end = 0;
      out.push_back(std::stoll(json.substr(i), &end));
      i += end;
    } else {
      ++i;
    }
  }
  return out;
}

// The allocator rounds every block to 512 bytes (docs/allocator.md).
constexpr uint64_t kBlockRound = 512;
uint64_t rounded(uint64_t bytes) {
  return (bytes + kBlockRound - 1) / kBlockRound * kBlockRound;
}
// The bytes a block was asked for: its request where the trace has one, else its size.
uint64_t asked(const store::AllocationRow& r) {
  return r.requested_size ? r.requested_size : r.size;
}

// Whether a stack is autocast's cast of an input: a frame of `at::autocast::cached_cast`,
// which makes the 16-bit copy (through `_to_copy`) and caches it when the input is a weight.
bool autocast_cast(const Trace& t, uint64_t stack) {
  for (const store::ResolvedFrame& r : t.resolved_frames(stack))
    if (std::string_view(r.function).starts_with("at::autocast::cached_cast")) return true;
  return false;
}

}  // namespace

// ---- the words of the evidence --------------------------------------------------------------

std::string bytes_text(int64_t bytes) {
  return format_bytes(bytes) + " (" + analysis::with_commas(bytes) + " bytes)";
}

std::string ratio_text(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", r);
  return buf;
}

std::string fixed2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

void set_site(const Trace& trace, uint64_t stack_id, Finding& f) {
  f.site = stack_id ? trace.site(stack_id).label : std::string();
  f.stack = trace.stack_frames(stack_id);
}

std::string device_label(const Trace& trace, int64_t device_id) {
  const DeviceRef* d = trace.device_by_id(device_id);
  return d ? d->name : "device " + std::to_string(device_id);
}

void note_inferred(const Trace& t, Finding& f) {
  if (!t.categories_inferred().empty())
    f.evidence.push_back(
        {"categories", "inferred, not recorded (from " + t.categories_inferred() + ")"});
  if (std::optional<std::string> s = analysis::steps_inferred_from(t))
    f.evidence.push_back({"steps", "inferred, not recorded (from " + *s + ")"});
}

// ---- what a snapshot's window holds -----------------------------------------------------------

bool state_only(const Trace& trace, int64_t device) {
  if (!trace.imported_snapshot()) return false;
  // One moment: no allocation later than the first.
  const auto range = store::allocation_time_range(trace.reader(), device);
  return !range || range->first == range->second;
}

WindowPhases window_phases(const Trace& trace) {
  WindowPhases w;
  // inference_basis() in profiler/importers/snapshot_infer.cpp writes the list.
  const std::string& basis = trace.categories_inferred();
  const size_t at = basis.find("phase runs: ");
  if (!trace.imported_snapshot() || at == std::string::npos) return w;
  const std::string runs = basis.substr(at + std::string_view("phase runs: ").size());
  auto ran = [&](std::string_view phase) {  // "1 forward, 2 backward": a whole word of the list
    for (size_t p = runs.find(phase); p != std::string::npos; p = runs.find(phase, p + 1)) {
      const size_t end = p + phase.size();
      if ((p == 0 || runs[p - 1] == ' ') && (end == runs.size() || runs[end] == ',')) return true;
    }
    return false;
  };
  w.known = true;
  w.forward = ran("forward");
  w.backward = ran("backward") || ran("recompute");
  w.optimizer = ran("optimizer");
  return w;
}

std::string phase_label(const WindowPhases& w) {
  if (!w.known) return {};
  if (w.backward) return "training (backward runs in the window)";
  return w.forward ? "forward only (no backward runs in the window)" : "";
}

bool trains(const Trace& trace, int64_t device) {
  for (events::Category c : {events::Category::gradient, events::Category::optimizer_state})
    if (store::any_allocation(trace.reader(), {.device = device, .category = c})) return true;
  return false;
}

// ---- steps and blocks -------------------------------------------------------------------------

// Without the engine's `backward` scopes, a snapshot whose categories were inferred (Note
// [Inferred categories] in profiler/importers/infer.cpp) is read like a recorded trace.
std::string activations_missing(const Trace& t, bool backward) {
  if (t.imported_snapshot() && t.categories_inferred().empty()) return kSnapshotNoCategories;
  if (t.imported_snapshot() && backward) return kSnapshotNoBackward;
  if (!store::any_allocation(t.reader(), {.categorized = true}) && !store::any_tensor(t.reader()))
    return "the trace has neither memory categories nor tensor records (a program not built on "
           "tensorlib), so activations saved for backward cannot be recognised";
  return {};
}

std::vector<Step> load_steps(const Trace& t, std::optional<int64_t> device) {
  std::vector<Step> out;
  for (const StepSpan& s : steps_of(t, device))
    out.push_back({s.number, s.ts, s.end_ts.value_or(kOpen)});
  return out;
}

std::vector<Block> load_blocks(const Trace& t, int64_t device, bool activations_only) {
  std::vector<Block> out;
  store::AllocationFilter filter{.device = device};
  if (activations_only) filter.category = events::Category::activation;
  store::for_each_allocation(t.reader(), filter, store::AllocationOrder::seq,
                             [&](const store::AllocationSpan& a) {
                               out.push_back({static_cast<int64_t>(a.size), a.alloc_ts,
                                              a.free_requested_ts.value_or(kOpen), a.stack_id,
                                              a.category == events::Category::activation, a.seq});
                             });
  return out;
}

std::vector<int64_t> live_bytes_at(const std::vector<Block>& blocks,
                                   const std::vector<uint64_t>& times) {
  std::vector<std::pair<uint64_t, int64_t>> allocs, frees;
  for (const Block& b : blocks) {
    allocs.emplace_back(b.alloc_ts, b.bytes);
    if (b.free_ts != kOpen) frees.emplace_back(b.free_ts, b.bytes);
  }
  std::sort(allocs.begin(), allocs.end());
  std::sort(frees.begin(), frees.end());
  std::vector<int64_t> out;
  size_t ia = 0, ifr = 0;
  int64_t live = 0;
  for (uint64_t ts : times) {
    for (; ia < allocs.size() && allocs[ia].first < ts; ++ia) live += allocs[ia].second;
    for (; ifr < frees.size() && frees[ifr].first <= ts; ++ifr) live -= frees[ifr].second;
    out.push_back(live);
  }
  return out;
}

TopSite top_site(const Trace& t, const std::vector<const Block*>& blocks) {
  std::map<std::string, TopSite> by_key;
  std::map<std::string, int64_t> biggest;
  for (const Block* b : blocks) {
    const Site& s = t.site(b->stack);
    TopSite& ts = by_key[s.key];
    ts.label = s.label;
    ts.bytes += b->bytes;
    ++ts.count;
    if (b->bytes > biggest[s.key]) biggest[s.key] = b->bytes, ts.stack = b->stack;
  }
  TopSite best;
  for (auto& [key, s] : by_key)
    if (s.bytes > best.bytes) best = s;
  return best;
}

Growth activation_growth(const std::vector<Block>& activations, const std::vector<Step>& steps) {
  std::vector<uint64_t> times;
  for (const Step& s : steps) times.push_back(s.ts);
  std::vector<int64_t> live = live_bytes_at(activations, times);
  std::vector<std::pair<int64_t, int64_t>> b;
  for (size_t i = 0; i < steps.size(); ++i) b.emplace_back(steps[i].number, live[i]);
  return fit_growth(std::move(b));
}

bool graph_retained(const Trace& t, int64_t device, const std::vector<Step>& steps) {
  if (steps.empty()) return false;
  return activation_growth(load_blocks(t, device, true), steps).growing;
}

std::vector<std::pair<uint64_t, uint64_t>> backward_scopes(const Trace& t, bool retain_only) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  const std::vector<std::string> names =
      retain_only ? std::vector<std::string>{"backward(retain_graph)"}
                  : std::vector<std::string>{"backward", "backward(retain_graph)"};
  for (const store::ScopeRow& s : store::scopes_named(t.reader(), names))
    out.emplace_back(s.push_ts, s.pop_ts.value_or(kOpen));
  return out;
}

bool graph_retention_on(const Trace& t, int64_t device) {
  return graph_retained(t, device, load_steps(t, device));
}

std::optional<StepSpan> step_holding(const Trace& trace, int64_t device, uint64_t ts) {
  std::optional<StepSpan> holding;
  for (const StepSpan& s : steps_of(trace, device))
    if (s.ts <= ts && (!s.end_ts || ts < *s.end_ts)) holding = s;
  return holding;
}

std::vector<uint64_t> step_times(const Trace& trace) {
  std::vector<uint64_t> out;
  store::for_each_step(trace.reader(), [&](const store::StepRow& r) { out.push_back(r.ts); });
  return out;
}

// ---- tensors ----------------------------------------------------------------------------------

int64_t item_size(const std::string& dtype) {
  if (dtype == "float64" || dtype == "int64" || dtype == "complex64") return 8;
  if (dtype == "float16" || dtype == "bfloat16" || dtype == "int16") return 2;
  if (dtype == "uint8" || dtype == "int8" || dtype == "bool") return 1;
  if (dtype == "complex128") return 16;
  return 4;  // float32, int32
}

int64_t numel(const TensorRow& t) {
  int64_t n = 1;
  for (int64_t s : t.sizes) n *= s;
  return n;
}

std::string ints_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::vector<TensorRow> load_tensors(const Trace& trace) {
  std::vector<TensorRow> out;
  store::for_each_tensor(trace.reader(), {}, [&](store::TensorRow& r) {
    TensorRow t;
    t.tensor_id = r.tensor_id;
    t.storage_id = r.storage_id;
    t.base_id = r.base_id;
    t.device = r.device;
    t.sizes = parse_ints(r.sizes);
    t.strides = parse_ints(r.strides);
    t.storage_offset = r.storage_offset;
    t.dtype = std::move(r.dtype);
    t.op = std::move(r.op);
    t.create_ts = r.create_ts;
    t.release_ts = r.release_ts;
    t.thread = r.thread;
    t.stack = r.stack_id;
    out.push_back(std::move(t));
  });
  return out;
}

bool skip_without_tensors(const Trace& trace, const char* id, Diagnosis& out) {
  if (store::any_tensor(trace.reader())) return false;
  out.skipped.push_back({id,
                         "the trace has no tensor records (an imported allocator snapshot, or a "
                         "recording without tensor events)"});
  return true;
}

int64_t one_percent_of_peak(const Trace& trace, int64_t device) {
  std::optional<store::Peak> p = peak(trace, device, store::Curve::allocated);
  return p ? p->bytes / 100 : 0;
}

// ---- the caching allocator --------------------------------------------------------------------

std::string allocator_skip_reason(const Trace& trace) {
  if (!has_segments(trace)) return "the trace has no segment (reserved memory) events";
  if (!has_blocks(trace))
    return "the trace has reserved memory but no allocated blocks (a CUDA-injected trace sees "
           "the segments the program's own allocator reserves, not its blocks; `tidemark "
           "import SNAPSHOT --onto` adds PyTorch's)";
  return "";
}

bool skip_device_without_blocks(const Trace& trace, const DeviceRef& dev, const char* id,
                                Diagnosis& out) {
  if (has_blocks(trace, dev.id)) return false;
  if (store::any_segment(trace.reader(), {.device = dev.id}))
    out.skipped.push_back({id, dev.name + ": reserved memory but no allocated blocks (a "
                                          "CUDA-injected device: its program's own allocator)"});
  return true;
}

SegmentsAt segments_at(const Trace& trace, int64_t device, uint64_t ts,
                       std::optional<events::Pool> pool) {
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [addr, end)
  for (const store::SegmentRow& r : store::segments_at(trace.reader(), device, ts, pool))
    ranges.push_back({static_cast<int64_t>(r.addr), static_cast<int64_t>(r.addr + r.size)});
  std::vector<std::pair<int64_t, int64_t>> blocks;
  for (const store::AllocationRow& a : store::blocks_active_at(trace.reader(), device, ts))
    blocks.push_back({static_cast<int64_t>(a.addr), static_cast<int64_t>(a.addr + a.size)});
  SegmentsAt out;
  out.count = static_cast<int64_t>(ranges.size());
  size_t b = 0;
  for (auto [lo, hi] : ranges) {
    while (b < blocks.size() && blocks[b].second <= lo) ++b;
    int64_t cursor = lo;
    for (size_t k = b; k < blocks.size() && blocks[k].first < hi; ++k) {
      out.largest_free = std::max(out.largest_free, blocks[k].first - cursor);
      cursor = std::max(cursor, blocks[k].second);
    }
    out.largest_free = std::max(out.largest_free, hi - cursor);
  }
  return out;
}

std::string allocator_settings(const Trace& trace) {
  return trace.meta_text(store::meta_keys::kAllocatorSettings);
}

// ---- autocast ---------------------------------------------------------------------------------

// Note [Autocast weight copies]: torch.autocast runs the ops of its lower-precision list
// (matmul, linear, einsum, convolutions, ...) in float16 or bfloat16, casting their float32
// inputs first in `at::autocast::cached_cast`. A weight -- a leaf that requires grad -- is cast
// once per autocast region and the copy cached until the region exits (`cache_enabled`, the
// default), under no_grad too; in training the graph saves the copy for backward as well. With
// float32 weights every cast weight therefore has a second, half-sized copy while the region
// lasts, which a float32 run does not hold. Which casts are weights' is read from sizes, as the
// frames of a cast are the same for a weight and an activation: among the allocations live at
// one moment, a cast whose size is half a live parameter's (its request, rounded as the
// allocator rounds) is that parameter's copy, at most as many copies of a size as there are
// parameters of twice it; the other casts are activations'. It needs native frames (PyTorch's
// `_record_memory_history(stacks="all")`, the default) and parameters told apart (recorded, or
// inferred for a snapshot: Note [Inferred categories] in profiler/importers/infer.cpp).
AutocastCopies autocast_weight_copies(const Trace& trace,
                                      const std::vector<store::AllocationRow>& live) {
  AutocastCopies out;
  std::map<uint64_t, uint64_t> parameters;  // a copy's rounded size -> parameters it may copy
  for (const store::AllocationRow& r : live)
    if (r.category == events::Category::parameter) ++parameters[rounded(asked(r) / 2)];
  if (parameters.empty()) return out;
  std::map<uint64_t, bool> memo;
  uint64_t largest = 0;
  for (const store::AllocationRow& r : live) {
    if (!r.stack_id || r.category == events::Category::parameter) continue;
    auto [it, fresh] = memo.try_emplace(r.stack_id, false);
    if (fresh) it->second = autocast_cast(trace, r.stack_id);
    if (!it->second) continue;
    auto p = parameters.find(rounded(asked(r)));
    if (p == parameters.end() || p->second == 0) {
      out.activation_bytes += static_cast<int64_t>(r.size);
      continue;
    }
    --p->second;
    out.bytes += static_cast<int64_t>(r.size);
    out.seqs.insert(r.seq);
    if (r.size > largest) largest = r.size, out.largest_stack = r.stack_id;
  }
  return out;
}

}  // namespace tidemark::diagnose::detail
