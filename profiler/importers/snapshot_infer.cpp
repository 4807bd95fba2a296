#include "profiler/importers/snapshot_infer.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <unordered_map>

namespace tidemark::importers::snapshot {

namespace {

using infer::Phase;

struct RunPhase {
  Phase phase = Phase::none;
  bool autograd = false;
  bool zero_grad = false;
  bool workspace = false;
  bool checkpoint = false;
  bool item = false;          // made by a dataset's item getter the loader called
  uint64_t forward_line = 0;  // infer::PhaseEvent::forward_line
};

// Phases of frame runs, each computed once (frame runs are shared by many entries).
class Phases {
 public:
  explicit Phases(const SnapshotReader& reader) : reader_(reader) {}
  RunPhase of(FrameRun run) {
    if (run == 0) return {};
    auto [it, fresh] = memo_.try_emplace(run);
    if (!fresh) return it->second;
    auto [items, count] = reader_.run_items(run);
    infer::StackPhase stack;
    bool autograd = false, zero_grad = false, workspace = false, checkpoint = false, item = false,
         getter = false, loader = false;
    uint64_t forward_line = 0;
    for (size_t i = 0; i < count; ++i) {  // innermost first
      pickle::Ref f(&reader_.doc(), items[i]);
      if (f.type() != pickle::Type::dict) continue;  // Note [Lenient fields]: unknown
      auto text = [&](const char* key) -> std::string_view {
        std::optional<pickle::Ref> v = f.get(key);
        if (!v) return {};
        return v->as_string().value_or(std::string_view());
      };
      const std::string_view name = text("name"), file = text("filename");
      const infer::Phase p = infer::phase_of_frame(name, file);
      stack.add(p);
      autograd = autograd || infer::autograd_frame(name);
      zero_grad = zero_grad || infer::zero_grad_frame(name, file);
      workspace = workspace || infer::workspace_frame(name);
      checkpoint = checkpoint || infer::checkpoint_frame(name, file);
      // An item getter inside the innermost data-loading frame: one example, not a batch.
      if (!loader && p == Phase::data) item = getter, loader = true;
      getter = getter || infer::item_getter_frame(name);
      if (infer::forward_frame(name)) {  // the outermost one wins: frames are innermost first
        std::optional<pickle::Ref> line = f.get("line");
        const int64_t l = line ? line->as_int().value_or(-1) : -1;
        forward_line =
            (std::hash<std::string_view>{}(name) ^ (std::hash<std::string_view>{}(file)*31) ^
             (static_cast<uint64_t>(l) * 0x9e3779b97f4a7c15ULL)) |
            1;  // never 0 (none)
      }
    }
    return it->second = {stack.phase(), autograd, zero_grad,   workspace,
                         checkpoint,    item,     forward_line};
  }

 private:
  const SnapshotReader& reader_;
  std::unordered_map<FrameRun, RunPhase> memo_;
};

}  // namespace

DeviceInference infer_device(const SnapshotReader& reader, const std::vector<Entry>& entries,
                             const std::vector<StartBlock>& start,
                             const std::vector<Annotation>& annotations, uint64_t) {
  DeviceInference out;
  Phases phases(reader);
  std::vector<infer::Block> blocks;
  std::vector<infer::PhaseEvent> events;
  std::unordered_map<uint64_t, size_t> open;  // addr -> index in blocks
  // Block index -> entry index (SIZE_MAX: a start block).
  std::vector<size_t> entry_of;
  std::vector<size_t> entry_of_event;  // event position -> entry index
  for (const StartBlock& s : start) {
    infer::Block b;
    b.before_trace = true;
    const RunPhase rp = phases.of(s.frames);
    b.alloc_phase = rp.phase;
    b.workspace = rp.workspace;
    b.size = s.size;
    if (s.pending)
      b.free_event = 0;  // freed as the trace begins
    else
      open[s.addr] = blocks.size();
    entry_of.push_back(SIZE_MAX);
    blocks.push_back(b);
  }
  // Record_function ranges open at each entry: counts per phase.
  std::array<int, infer::kPhases> open_ranges{};
  size_t next_annotation = 0;
  auto annotation_phase = [&](uint64_t ts) {
    while (next_annotation < annotations.size() && annotations[next_annotation].time_ns <= ts) {
      const Annotation& a = annotations[next_annotation++];
      int& n = open_ranges[static_cast<size_t>(infer::phase_of_frame(a.name, {}))];
      n = a.start ? n + 1 : std::max(0, n - 1);
    }
    infer::StackPhase p;
    for (size_t k = 1; k < open_ranges.size(); ++k)
      if (open_ranges[k] > 0) p.add(static_cast<Phase>(k));
    return p.phase();
  };
  // Note [The engine's frameless events]: PyTorch's autograd engine runs backward on threads
  // of its own, which have no Python frames; in a snapshot recorded with Python frames only
  // (the default `context`), everything backward allocates and frees comes without frames,
  // right after the `loss.backward()` call whose own first allocation has them. Where the
  // snapshot's frees do carry frames (so a frameless one is no tensorlib-style free), a
  // frameless alloc or free that follows a backward event, with no framed event between, is
  // the engine's: backward. (Without this, the saved activations the engine frees read as
  // freed by nobody, and a training step's peak as temporaries.)
  bool frees_have_frames = false;
  for (const Entry& e : entries)
    if ((e.action == Action::free_requested || e.action == Action::free) && e.frames != 0) {
      frees_have_frames = true;
      break;
    }
  bool after_backward = false;  // the last event with frames was backward's
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    const bool alloc = e.action == Action::alloc;
    const bool free = e.action == Action::free_requested || e.action == Action::free;
    if (!alloc && !free) continue;
    RunPhase rp = phases.of(e.frames);
    const Phase ranged = annotation_phase(e.time_ns);
    if (rp.phase == Phase::none && ranged != Phase::none) {
      rp.phase = ranged;
      out.annotations_used = true;
    }
    if (e.frames != 0)
      after_backward = rp.phase == Phase::backward || rp.phase == Phase::recompute;
    else if (rp.phase == Phase::none && after_backward && frees_have_frames)
      rp.phase = Phase::backward;
    const uint64_t position = events.size();
    entry_of_event.push_back(i);
    events.push_back({e.time_ns, rp.phase, alloc, alloc ? static_cast<uint64_t>(e.frames) : 0,
                      alloc ? rp.forward_line : 0});
    if (alloc) {
      infer::Block b;
      b.alloc_event = position;
      b.alloc_phase = rp.phase;
      b.size = e.size;
      b.checkpointed = rp.checkpoint && rp.phase == Phase::forward;
      b.item = rp.item && rp.phase == Phase::data;
      b.workspace = rp.workspace;
      open[e.addr] = blocks.size();
      entry_of.push_back(i);
      blocks.push_back(b);
    } else if (auto it = open.find(e.addr); it != open.end()) {
      infer::Block& b = blocks[it->second];
      b.free_event = position;
      b.free_phase = rp.phase;
      b.freed_by_autograd = rp.autograd;
      b.freed_by_zero_grad = rp.zero_grad;
      open.erase(it);
    }
  }
  infer::Result r = infer::infer(blocks, events);
  out.entries.assign(entries.size(), ev::Category::unknown);
  out.start.assign(start.size(), ev::Category::unknown);
  for (size_t k = 0; k < blocks.size(); ++k) {
    const ev::Category c = r.categories[k];
    out.any = out.any || c != ev::Category::unknown;
    if (entry_of[k] == SIZE_MAX)
      out.start[k] = c;
    else
      out.entries[entry_of[k]] = c;
  }
  // A step before event p comes before its entry; after the last event, after its entry.
  for (uint64_t p : r.step_ends)
    out.step_ends.push_back(p < entry_of_event.size()
                                ? entry_of_event[p]
                                : (entry_of_event.empty() ? 0 : entry_of_event.back() + 1));
  out.step_basis = r.step_basis;
  for (size_t k = 0; k < out.runs.size(); ++k) out.runs[k] = r.runs[k];
  return out;
}

std::string inference_basis(const std::vector<const DeviceInference*>& devices) {
  bool any = false, annotations = false;
  std::array<uint64_t, infer::kPhases> runs{};
  for (const DeviceInference* d : devices) {
    any = any || d->any;
    annotations = annotations || d->annotations_used;
    for (size_t k = 0; k < runs.size(); ++k) runs[k] += d->runs[k];
  }
  if (!any) return {};
  std::string s = annotations ? "frames, annotations and lifetimes" : "frames and lifetimes";
  std::string list;
  for (Phase p : {Phase::setup, Phase::data, Phase::forward, Phase::backward, Phase::recompute,
                  Phase::optimizer}) {
    const uint64_t n = runs[static_cast<size_t>(p)];
    if (n == 0) continue;
    if (!list.empty()) list += ", ";
    list += std::to_string(n) + " " + std::string(infer::phase_name(p));
  }
  return s + "; phase runs: " + (list.empty() ? "none" : list);
}

}  // namespace tidemark::importers::snapshot
