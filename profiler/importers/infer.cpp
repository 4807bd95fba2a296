#include "profiler/importers/infer.h"

#include <algorithm>
#include <string>
#include <unordered_map>

// Note [Inferred categories]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A PyTorch snapshot says what each block's call stack was and when it lived, not what it
// held. tensorlib records the role of a block (parameter, gradient, ...); a snapshot of the
// same program does not. The rules below recover the role from what a snapshot has. They are
// measured against tensorlib's own categories (tests/cli/infer_categories_test.cpp records
// programs, exports them without categories, imports them and compares; docs/importers.md has
// the figures).
//
// 1. Phases. The phase of an alloc or a free is what its frames name (phase_of_frame): the
//    autograd engine is backward (PyTorch's `torch::autograd::Engine`, the `backward` of
//    torch/_tensor.py and torch/autograd, torch.utils.checkpoint's hooks; tensorlib's
//    `tl::autograd::backward`, its engine, `tl::Tensor::backward`); an optimizer (files under
//    torch/optim, `Optimizer.step`, `Optimizer.zero_grad`, `tl::optim::`) is optimizer;
//    torch/utils/data and `tl::data::` are data loading; a module's constructor,
//    `reset_parameters`, init functions and moving a module (`_apply`, `to`) are setup; any
//    other frame of torch/nn or `tl::nn::` is forward. A stack takes the strongest phase among
//    its frames (backward, optimizer, data, setup, forward), except that forward frames under
//    backward ones are a recompute (checkpointing runs a segment's forward again in backward).
//    C++ names are read without their parameters (`evaluate(tl::data::Dataset&)` is no data
//    loading). The importer adds the record_function ranges of external_annotations
//    (`autograd::engine::...` backward, `Optimizer.*` optimizer, `enumerate(DataLoader)...`
//    data, `nn.Module: ...` forward) for events whose frames say nothing (PyTorch's autograd
//    thread has no Python frames).
// 2. Runs. Consecutive classified events of one phase form a run; an alloc whose frames say
//    nothing (the loop's own code: `x = torch.randn(...)`, `loss.item()`) ends it, as does
//    another phase's event. A run's extent goes from its first event to the event that ended
//    it. Positions are event order, not times (a snapshot's times are microseconds, and many
//    events share one). An event whose frames say nothing takes the phase of the run whose
//    extent holds it; a free after a run's last event and before an unclassified alloc takes
//    none (the frees at the end of a loop body belong to no phase). tensorlib's traces give
//    frees no frames, PyTorch's often do.
// 3. Categories, from the alloc's phase, the free's phase and the lifetime ("within": freed
//    inside the extent of the run it was allocated in):
//    * data loading: `input` (a batch, a dataset), or `temporary` when freed within its run
//      (decoding, collating) or when a dataset's item getter made it (`__getitem__`, a C++
//      `...::get` under the loader: one example, copied into the batch; a DataLoader's worker
//      threads interleave such allocations with the loop's, so lifetimes alone cannot tell);
//    * optimizer: `optimizer_state` when it outlives its run (moments, momentum buffers), else
//      `temporary`;
//    * backward: `gradient` when still allocated when the next optimizer run begins (without
//      one: when the next run that is no backward begins, or never freed), else `temporary`;
//    * recompute: `activation` when it outlives its run (saved for the segment's backward),
//      else `temporary`;
//    * setup: `parameter` unless freed within its run (`temporary`: init scratch, the copy a
//      move left behind);
//    * made for cuBLAS's workspace (its frames: `at::cuda::getNewWorkspace`, the handle
//      getters): `unknown` -- library state kept for the process, which rules on lifetimes
//      would call a parameter (made before the work) or a gradient (made in backward, by the
//      engine's own handle);
//    * freed by a `zero_grad` (PyTorch's optimizer's or module's, tensorlib's; its
//      set_to_none frees the gradients): `gradient`, whatever made it;
//    * allocated before the snapshot's history began, never freed and with no frames naming
//      a phase: `parameter` (weights put on the device before recording started; a KV cache
//      made then reads as one too), or `gradient` or `optimizer_state` by the sizes (Note
//      [State before the history]), or `activation` where a forward before the history kept
//      its graph (Note [A graph from before the history]);
//    * forward or no phase, freed by the engine (the free's phase is backward) or by
//      autograd's own objects (a graph dying without backward: `SavedVariable`, a node):
//      `activation`;
//    * forward or no phase, freed within its run: `temporary`;
//    * forward, outliving its run: the run's last alloc (the forward's result, what the
//      program reads) and a checkpointed segment's blocks (it saves nothing) are `temporary`
//      (`unknown` when never freed); any other is kept by the graph (kept_by_graph):
//      `activation` when no backward began before its free (a graph that never ran backward,
//      or a snapshot taken before it) or when a later forward did too (a graph kept across
//      iterations, retain_graph), else `temporary` (the program held it through backward);
//    * no phase, made before the first forward, backward or optimizer run and never freed:
//      `parameter` (weights the program's own code made: `nn.Parameter(torch.randn(...))` in a
//      module of its own has no torch frame below it);
//    * no phase, freed after the next forward run, when that forward kept some of its own
//      blocks past its end (grad mode on): kept_by_graph again (an input the first layer
//      saved); else `unknown`.
// 4. Steps, when the importer has none from annotations (Note [Inferred steps] in
//    pytorch_snapshot.cpp): one at the end of each optimizer run, named "inferred from
//    optimizer frames". An optimizer that allocates nothing (plain SGD) leaves no run, and
//    one with a fused update (tensorlib's Adam, PyTorch's `fused=True`) one run, its states
//    on the first step: with at most one optimizer run and more than one backward run, a
//    step ends at the end of each backward run instead ("inferred from backward frames"; a
//    loop that accumulates gradients over several backwards then shows each as a step). A
//    backward that checkpointing interrupts with recomputes is one backward run.
// 5. Steps, when rule 4 finds none (no optimizer that allocates, no repeated backward: an
//    evaluation loop, plain SGD, a loop the frames do not name): from repetition. A loop's
//    body makes the same allocations from the same call paths in the same order every
//    iteration, so a call path that allocates once per iteration recurs at a fixed distance
//    (in allocations) G: its occurrences mark where the iterations begin. The rule takes the
//    call paths that allocate at least 3 times, each time G allocations after the last (the
//    first gap may be longer: a first iteration that also makes lazy state, when there are
//    at least 4), and among them the loop covering the most allocations (iterations x G),
//    which must be at least half of the device's allocations with frames and repeat: from the
//    third iteration on, at least 90% of its allocations are from the call path of the one G
//    before (data loading's allocations left out: a DataLoader's workers interleave them
//    differently every iteration; the data loading just before an iteration's first allocation,
//    a batch it waited for, is its own). An iteration begins
//    where in the body the most frees come between two allocations (the last iteration's
//    memory dies as the next begins; the anchor on a tie): a step ends before each
//    iteration's first allocation after the first, and after the last iteration, as many events
//    after its last allocation as the one before had (not the teardown after the loop:
//    "inferred from repeated allocations"). A model built in a loop before training covers
//    too little. A loop inside one call of a module's forward is no iteration of the program:
//    the blocks of a transformer recur at a fixed distance within one forward, all called
//    from one line of the model's forward, while a training loop's iterations run the model's
//    forward from its first line to its last, then the loss, the backward and the optimizer.
//    So a loop is passed over when 90% of its allocations share their outermost `forward`
//    frame and its line (PhaseEvent::forward_line), and the best loop that is not inside a
//    forward is taken (on real snapshots the 12 and 32 layers of one forward were taken for
//    steps before, and their saved activations for growth across them). A loop whose
//    iterations allocate differently (a growing sequence length, data-dependent branches)
//    gets no steps: none is invented.
//
// What the rules cannot see: a parameter allocated inside the loop (lazy modules), gradients
// made outside backward (`p.grad = ...`), a cache a forward fills, what a custom autograd
// Function saves outside the engine. Each inferred value is marked: the trace's meta
// `categories_inferred` says from what, and `summary`, `diagnose` and `steps` say so.

namespace tidemark::importers::infer {

namespace {

bool has(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// "tl::nn::Linear::Linear(...)": the last two components of the qualified name are equal.
bool is_constructor(std::string_view function) {
  std::string_view name = function.substr(0, function.find('('));
  size_t sep = name.rfind("::");
  if (sep == std::string_view::npos || sep == 0) return false;
  std::string_view last = name.substr(sep + 2);
  std::string_view outer = name.substr(0, sep);
  size_t sep2 = outer.rfind("::");
  std::string_view prev = sep2 == std::string_view::npos ? outer : outer.substr(sep2 + 2);
  // Template arguments of the class ("Foo<int>::Foo").
  prev = prev.substr(0, prev.find('<'));
  return !last.empty() && last == prev;
}

// Python's files may be written with either slash (a snapshot taken on Windows).
bool in_file(std::string_view file, std::string_view dir) {
  if (has(file, dir)) return true;
  std::string back(dir);
  std::replace(back.begin(), back.end(), '/', '\\');
  return has(file, back);
}

int rank(Phase p) {
  switch (p) {
    case Phase::none:
      return 0;
    case Phase::forward:
      return 1;
    case Phase::setup:
      return 2;
    case Phase::data:
      return 3;
    case Phase::optimizer:
      return 4;
    case Phase::backward:
      return 5;
    case Phase::recompute:
      return 6;
  }
  return 0;
}

}  // namespace

std::string_view phase_name(Phase p) {
  switch (p) {
    case Phase::none:
      return "none";
    case Phase::setup:
      return "setup";
    case Phase::data:
      return "data";
    case Phase::forward:
      return "forward";
    case Phase::backward:
      return "backward";
    case Phase::optimizer:
      return "optimizer";
    case Phase::recompute:
      return "recompute";
  }
  return "none";
}

namespace {

// The qualified name of a demangled C++ function, without its parameters and template
// arguments ("tl::nn::Linear::forward" of "tl::nn::Linear::forward(tl::Tensor const&)"), so
// a parameter's type ("evaluate(tl::data::FashionMNIST const&)") names no phase. Python's
// names come back as they are.
std::string qualified_name(std::string_view function) {
  std::string out;
  int depth = 0;
  constexpr std::string_view kAnon = "(anonymous namespace)";
  for (size_t i = 0; i < function.size(); ++i) {
    if (function.compare(i, kAnon.size(), kAnon) == 0) {
      out += "(anonymous)";
      i += kAnon.size() - 1;
      continue;
    }
    const char ch = function[i];
    if (ch == '<' && !(i >= 8 && function.substr(i - 8, 8) == "operator")) {
      ++depth;
    } else if (ch == '>' && depth > 0) {
      --depth;
    } else if (depth == 0) {
      if (ch == '(') break;
      out += ch;
    }
  }
  return out;
}

}  // namespace

Phase phase_of_frame(std::string_view full_function, std::string_view file) {
  const std::string name = qualified_name(full_function);
  const std::string_view function = name;
  // Backward: the autograd engine.
  if (has(function, "torch::autograd::Engine") ||
      has(function, "torch::autograd::python::PythonEngine") ||
      has(function, "tl::autograd::backward") || has(function, "tl::autograd::Engine") ||
      function == "tl::autograd::grad" || has(function, "run_backward") ||
      has(function, "tl::Tensor::backward") || has(function, "_engine_run_backward") ||
      full_function.starts_with("autograd::engine::"))
    return Phase::backward;
  if (function == "backward" &&
      (in_file(file, "torch/_tensor.py") || in_file(file, "torch/autograd/")))
    return Phase::backward;
  // torch.utils.checkpoint recomputing on the engine's thread (its hooks or its backward).
  if (in_file(file, "torch/utils/checkpoint.py") &&
      (function == "backward" || function == "recompute_fn" || function == "unpack_hook" ||
       function == "unpack"))
    return Phase::backward;
  // Optimizer.
  if (has(function, "tl::optim::") || in_file(file, "torch/optim/") ||
      full_function.starts_with("Optimizer.step") ||
      full_function.starts_with("Optimizer.zero_grad"))
    return Phase::optimizer;
  // Data loading.
  if (has(function, "tl::data::") || in_file(file, "torch/utils/data/") ||
      full_function.starts_with("enumerate(DataLoader)"))
    return Phase::data;
  // Setup: building the model or moving it.
  const bool tl_nn = has(function, "tl::nn::");
  const bool torch_nn = in_file(file, "torch/nn/");
  if (tl_nn && (is_constructor(function) || has(function, "reset_parameters") ||
                has(function, "tl::nn::init::") || function.ends_with("::to") ||
                has(function, "register_parameter") || has(function, "register_buffer")))
    return Phase::setup;
  if (torch_nn &&
      (function == "__init__" || function == "reset_parameters" ||
       in_file(file, "torch/nn/init.py") || in_file(file, "torch/nn/parameter.py") ||
       function == "_apply" || function == "to" || function == "cuda" || function == "convert" ||
       function == "register_parameter" || function == "register_buffer" ||
       function == "load_state_dict" || function == "_load_from_state_dict"))
    return Phase::setup;
  // Forward: any other module code.
  if (tl_nn || torch_nn || full_function.starts_with("nn.Module: ")) return Phase::forward;
  return Phase::none;
}

bool autograd_frame(std::string_view function) {
  // The graph's own objects (their destructors free what they saved), in tensorlib and PyTorch.
  return has(function, "SavedVariable") || has(function, "autograd::Node") ||
         has(function, "autograd::FunctionNode") || has(function, "autograd::PyNode");
}

bool item_getter_frame(std::string_view function) {
  if (function == "__getitem__" || function == "__getitems__") return true;
  const std::string name = qualified_name(function);
  return std::string_view(name).ends_with("::get");
}

bool checkpoint_frame(std::string_view function, std::string_view file) {
  return qualified_name(function).starts_with("tl::checkpoint") ||
         in_file(file, "torch/utils/checkpoint.py");
}

void StackPhase::add(Phase p) {
  forward_ = forward_ || p == Phase::forward;
  if (rank(p) > rank(phase_)) phase_ = p;
}

Phase StackPhase::phase() const {
  return phase_ == Phase::backward && forward_ ? Phase::recompute : phase_;
}

namespace {

// A run: events [first, last] of one phase, and `limit`, the position of the first event
// after `last` that ends it (another phase's, or an unclassified alloc), or past the end.
struct Run {
  Phase phase;
  uint64_t first, last, limit;
  bool ended_by_run = false;  // `limit` is the next run's first event
  uint64_t last_alloc = 0;    // its last alloc (a forward's result)
  bool saving = false;        // a forward that kept some of its blocks past its end (grad mode)
};

}  // namespace

bool forward_frame(std::string_view function) {
  const std::string name = qualified_name(function);
  return name == "forward" || std::string_view(name).ends_with("::forward");
}

std::vector<uint64_t> repetition_step_ends(const std::vector<PhaseEvent>& events) {
  // The allocations with frames, in order: their positions in `events` and call paths. Data
  // loading's are left out: a DataLoader's workers interleave them with the loop's in a
  // different order every iteration.
  std::vector<uint64_t> at, path;
  for (uint64_t i = 0; i < events.size(); ++i)
    if (events[i].alloc && events[i].stack != 0 && events[i].phase != Phase::data)
      at.push_back(i), path.push_back(events[i].stack);
  const size_t n = at.size();
  std::unordered_map<uint64_t, std::vector<uint32_t>> seen;  // call path -> its allocations
  for (size_t k = 0; k < n; ++k) seen[path[k]].push_back(static_cast<uint32_t>(k));
  // The candidate loops: an anchor's occurrences (iteration starts) and the length G, covering
  // at least half of the allocations.
  struct Loop {
    const std::vector<uint32_t>* ks;
    size_t g;
  };
  std::vector<Loop> loops;
  for (const auto& [p, ks] : seen) {
    if (ks.size() < 3) continue;
    const size_t g = ks.back() - ks[ks.size() - 2];
    bool regular = ks[1] - ks[0] >= g && (ks.size() >= 4 || ks[1] - ks[0] == g);
    for (size_t j = 2; j < ks.size() && regular; ++j) regular = ks[j] - ks[j - 1] == g;
    if (regular && 2 * ks.size() * g >= n) loops.push_back({&ks, g});
  }
  // Best first: the loop covering the most allocations, then the most iterations, then the
  // earliest call path (a loop's first allocation begins its iterations).
  std::sort(loops.begin(), loops.end(), [](const Loop& a, const Loop& b) {
    const size_t ca = a.ks->size() * a.g, cb = b.ks->size() * b.g;
    if (ca != cb) return ca > cb;
    if (a.ks->size() != b.ks->size()) return a.ks->size() > b.ks->size();
    return a.ks->front() < b.ks->front();
  });
  std::vector<uint32_t> frees(events.size() + 1, 0);  // frees among events[0, i)
  for (size_t i = 0; i < events.size(); ++i) frees[i + 1] = frees[i] + (events[i].alloc ? 0 : 1);
  auto frees_before = [&](size_t k) { return k == 0 ? 0 : frees[at[k]] - frees[at[k - 1] + 1]; };
  for (const Loop& loop : loops) {
    const std::vector<uint32_t>& ks = *loop.ks;
    const size_t g = loop.g;
    // Where in the body an iteration begins: r allocations before the anchor, where the frees
    // between two allocations are most (what the last iteration made dies as the next begins);
    // the anchor itself on a tie.
    size_t r = 0, most = 0;
    for (size_t c = 0; c < g && c < ks[1]; ++c) {
      size_t f = 0;
      for (size_t j = 1; j < ks.size(); ++j) f += frees_before(ks[j] - c);
      if (f > most) most = f, r = c;
    }
    // The body repeats, not only its anchor: each allocation from the third iteration on against
    // the one an iteration before (the first may differ: it makes lazy state).
    const size_t from = ks[1] - r + g;
    const size_t last = ks.back() - r + g;  // the first allocation after the last iteration
    size_t same = 0, compared = 0;
    for (size_t k = from; k < std::min(n, last); ++k, ++compared) same += path[k] == path[k - g];
    if (10 * same < 9 * compared) continue;
    // Inside one call of a module's forward (a model's layers): not the program's loop.
    std::unordered_map<uint64_t, size_t> lines;
    size_t body = 0, inside = 0;
    for (size_t k = ks[1] - r; k < std::min(n, last); ++k, ++body)
      if (const uint64_t l = events[at[k]].forward_line) inside = std::max(inside, ++lines[l]);
    if (body > 0 && 10 * inside >= 9 * body) continue;
    // An iteration that waited for its batch begins with the loader's allocations for it (a
    // worker late under load): the step ends before them, not between them and the iteration.
    auto begin_of = [&](uint64_t p) {
      while (p > 0 && events[p - 1].phase == Phase::data) --p;
      return p;
    };
    std::vector<uint64_t> ends;
    for (size_t j = 1; j < ks.size(); ++j) ends.push_back(begin_of(at[ks[j] - r]));
    // The last iteration ends as the one before it did, as many events after its last allocation
    // (its own frees), not with what the program frees after the loop; at the latest before the
    // first allocation after it.
    const uint64_t tail = at[ks.back() - r] - at[ks.back() - r - 1] - 1;
    const uint64_t after = last < n ? at[last] : events.size();
    ends.push_back(std::min<uint64_t>(at[std::min(n, last) - 1] + 1 + tail, after));
    return ends;
  }
  return {};
}

namespace {
// Note [State before the history]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A snapshot whose history began after the optimizer's first step (a warm-up, then one step
// recorded) holds the optimizer's state among the blocks made before the history, which have
// no frames: rule 3 calls them all parameters (on a 2.7B AdamW step, 38.46 GiB, of which 25.38
// GiB are its two moments). Their sizes tell them apart, two ways.
//
// 1. Where the window's backward made the gradients: a parameter has one gradient of its size,
//    and an optimizer that keeps state per parameter k - 1 more tensors of it (Adam's two
//    moments: k = 3; SGD's momentum: 2; AMSGrad: 4). When the window runs an optimizer, and
//    one k from 2 to 4 holds for the sizes of at least 90% of those blocks' bytes -- each such
//    size has exactly k times as many blocks as gradients -- then of each such size the first
//    blocks, as many as its gradients, stay parameters and the rest are optimizer_state.
// 2. Where the window made none (a forward dumped before its backward, or a backward that
//    accumulated into gradients made before it: `zero_grad(set_to_none=False)`): the blocks
//    come in G equal groups, one per role -- every size has a multiple of G blocks. A model's
//    parameters alone do not: its embedding, its head, its last norm and its biases come in
//    sizes of one or two blocks, so a fifth or more of the blocks break any G of 3 or more
//    (18-25% on the real forwards of 2.7B and XL models), where a training program's state
//    breaks it only by a few stray blocks (cuBLAS's workspaces, a batch, a loss: at most
//    kStrayBlocks, or 2%). G = 4 is a parameter, its gradient and Adam's two moments; G = 3
//    a parameter and Adam's moments (the gradients freed), or a parameter, its gradient and a
//    momentum buffer -- told apart by the blocks a `zero_grad` in the window frees, which are
//    gradients (rule 3). Of each size, one group stays parameters, the gradients are those
//    `zero_grad` freed or else, for G = 4, one more group, and the rest are optimizer_state.
//    G = 2 (a parameter and one tensor more, or a model with two of everything) says nothing.
//
// Which block of a size is which role cannot be told (none has frames): the bytes of each
// category are right, a given block's may not be. With sizes that match no k or G, nothing
// changes.
constexpr size_t kStrayBlocks = 4;

// Rule 1; false when it did not apply.
bool state_from_gradients(const std::vector<Block>& blocks,
                          std::vector<events::Category>& categories) {
  using C = events::Category;
  std::unordered_map<uint64_t, uint64_t> gradients;          // size -> count
  std::unordered_map<uint64_t, std::vector<size_t>> before;  // size -> blocks, in order
  uint64_t before_bytes = 0;
  for (size_t k = 0; k < blocks.size(); ++k) {
    const Block& b = blocks[k];
    if (categories[k] == C::gradient && !b.before_trace && b.size > 0) ++gradients[b.size];
    if (categories[k] == C::parameter && b.before_trace && b.free_event == kNever &&
        b.alloc_phase == Phase::none && b.size > 0) {
      before[b.size].push_back(k);
      before_bytes += b.size;
    }
  }
  if (gradients.empty() || before.empty()) return false;
  uint64_t bytes_of[5] = {};  // by k: the bytes of the sizes with k blocks per gradient
  for (const auto& [size, ks] : before)
    if (auto g = gradients.find(size);
        g != gradients.end() && ks.size() % g->second == 0 && ks.size() / g->second <= 4)
      bytes_of[ks.size() / g->second] += size * ks.size();
  uint64_t k = 2;
  for (uint64_t m = 3; m <= 4; ++m)
    if (bytes_of[m] > bytes_of[k]) k = m;
  if (bytes_of[k] == 0 || bytes_of[k] * 10 < before_bytes * 9) return false;
  for (const auto& [size, ks] : before) {
    auto g = gradients.find(size);
    if (g == gradients.end() || ks.size() != k * g->second) continue;
    for (size_t i = g->second; i < ks.size(); ++i) categories[ks[i]] = C::optimizer_state;
  }
  return true;
}

// Rule 2.
void state_in_groups(const std::vector<Block>& blocks, std::vector<events::Category>& categories) {
  using C = events::Category;
  std::unordered_map<uint64_t, std::vector<size_t>> by_size;  // size -> blocks, in order
  size_t n = 0;
  for (size_t k = 0; k < blocks.size(); ++k) {
    const Block& b = blocks[k];
    const bool kept = categories[k] == C::parameter && b.free_event == kNever;
    // (A block from before the history that the window frees carries its free's frames, the
    // only ones the snapshot has: a zero_grad's read as the optimizer's phase.)
    if (b.before_trace && b.size > 0 &&
        ((kept && b.alloc_phase == Phase::none) || b.freed_by_zero_grad))
      by_size[b.size].push_back(k), ++n;
  }
  size_t groups = 0;
  for (size_t g : {size_t{4}, size_t{3}}) {
    size_t stray = 0;
    for (const auto& [size, ks] : by_size) stray += ks.size() % g == 0 ? 0 : ks.size();
    if (stray <= std::max(kStrayBlocks, n / 50) && n - stray >= 4 * g) {
      groups = g;
      break;
    }
  }
  if (groups == 0) return;
  for (const auto& [size, ks] : by_size) {
    if (ks.size() % groups != 0) continue;
    const size_t group = ks.size() / groups;
    std::vector<size_t> freed, kept;
    for (size_t k : ks) (blocks[k].freed_by_zero_grad ? freed : kept).push_back(k);
    if (!freed.empty() && freed.size() != group) continue;  // no role fits: leave them
    size_t grads = freed.size();
    for (size_t k : freed) categories[k] = C::gradient;
    for (size_t i = 0; i < kept.size(); ++i) {
      if (i < group) {
        categories[kept[i]] = C::parameter;
      } else if (grads < group && groups == 4) {
        categories[kept[i]] = C::gradient, ++grads;
      } else {
        categories[kept[i]] = C::optimizer_state;
      }
    }
  }
}

// Note [A graph from before the history]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A forward run with grad mode on before the history began (a warm-up pass whose output the
// program keeps) leaves the tensors its graph saved among the blocks made before the history:
// frameless, never freed by the window's backward, and read as parameters by rule 3. A
// model's forward saves the same sizes every time it runs on the same shapes, so they show
// themselves against the window's first forward that saves: when the blocks from before the
// history that are still live at that forward's end hold, size for size, at least
// kGraphMatch of the bytes it saves, the matched ones are that earlier graph's: `activation`
// (the ones the window frees first, then those it never frees). Activations and weights of
// one size are told apart only by count: a model whose batch x sequence equals its width
// (its activations as large as its square weights) may lend a parameter to the match.
constexpr double kGraphMatch = 0.8;

void graph_before_history(const std::vector<Block>& blocks, const std::vector<bool>& saved_first,
                          uint64_t forward_end, std::vector<events::Category>& categories) {
  using C = events::Category;
  std::unordered_map<uint64_t, uint64_t> saved;  // size -> blocks the forward saved
  uint64_t saved_bytes = 0;
  for (size_t k = 0; k < blocks.size(); ++k)
    if (saved_first[k] && categories[k] == C::activation)
      ++saved[blocks[k].size], saved_bytes += blocks[k].size;
  if (saved_bytes == 0) return;
  std::unordered_map<uint64_t, std::vector<size_t>> before;  // size -> candidates, freed first
  for (size_t k = 0; k < blocks.size(); ++k) {
    const Block& b = blocks[k];
    if (b.before_trace && b.alloc_phase == Phase::none && !b.freed_by_zero_grad &&
        saved.count(b.size) && (b.free_event == kNever || b.free_event + 1 > forward_end))
      before[b.size].push_back(k);
  }
  uint64_t matched = 0;
  for (auto& [size, ks] : before) {
    std::stable_sort(ks.begin(), ks.end(), [&](size_t x, size_t y) {
      return blocks[x].free_event < blocks[y].free_event;
    });
    ks.resize(std::min<size_t>(ks.size(), saved[size]));
    matched += size * ks.size();
  }
  if (static_cast<double>(matched) < kGraphMatch * static_cast<double>(saved_bytes)) return;
  for (const auto& [size, ks] : before)
    for (size_t k : ks) categories[k] = C::activation;
}
}  // namespace

bool workspace_frame(std::string_view function) {
  const std::string name = qualified_name(function);
  const std::string_view n = name;
  return n == "at::cuda::getNewWorkspace" || n == "at::cuda::getCurrentCUDABlasHandle" ||
         n == "at::cuda::getCurrentCUDABlasLtHandle" || n == "at::cuda::getCUDABlasLtWorkspace";
}

bool zero_grad_frame(std::string_view function, std::string_view file) {
  const std::string name = qualified_name(function);
  const std::string_view n = name;
  if (n.starts_with("Optimizer.zero_grad")) return true;  // the record_function range
  if (n == "zero_grad")
    return in_file(file, "torch/nn/modules/module.py") || in_file(file, "torch/optim/");
  return n.starts_with("tl::") && n.ends_with("::zero_grad");
}

Result infer(const std::vector<Block>& blocks, const std::vector<PhaseEvent>& events) {
  using C = events::Category;
  Result out;
  // Positions: event i is at i + 1; blocks from before the trace are allocated at 0.
  const uint64_t end = events.size() + 1;
  std::vector<Run> runs;
  bool broken = true;  // an unclassified alloc since the last run's last event
  for (uint64_t i = 0; i < events.size(); ++i) {
    const PhaseEvent& e = events[i];
    const uint64_t pos = i + 1;
    if (e.phase == Phase::none) {
      if (e.alloc && !broken && !runs.empty()) runs.back().limit = pos, broken = true;
      continue;
    }
    if (!runs.empty() && runs.back().phase == e.phase && !broken) {
      runs.back().last = pos;
      if (e.alloc) runs.back().last_alloc = pos;
      continue;
    }
    if (!runs.empty() && !broken) runs.back().limit = pos, runs.back().ended_by_run = true;
    runs.push_back({e.phase, pos, pos, end, false, e.alloc ? pos : 0});
    broken = false;
    ++out.runs[static_cast<size_t>(e.phase)];
  }
  // The run position p falls in ([first, limit)), or runs.size().
  auto run_at = [&](uint64_t p) -> size_t {
    auto it = std::upper_bound(runs.begin(), runs.end(), p,
                               [](uint64_t v, const Run& r) { return v < r.first; });
    if (it == runs.begin()) return runs.size();
    const size_t r = static_cast<size_t>(it - runs.begin() - 1);
    return p < runs[r].limit ? r : runs.size();
  };
  auto phase_at = [&](uint64_t p) {
    const size_t r = run_at(p);
    return r < runs.size() ? runs[r].phase : Phase::none;
  };
  // The phase of a free at p whose frames say nothing: its run's, unless it comes after the
  // run's last event and before an unclassified alloc (the frees at the end of a loop's body).
  auto phase_of_free = [&](uint64_t p) {
    const size_t r = run_at(p);
    if (r == runs.size() || (p > runs[r].last && !runs[r].ended_by_run)) return Phase::none;
    return runs[r].phase;
  };
  // Lookups in linear time overall (a snapshot has millions of events and thousands of runs):
  // next_of[ph][i], the first run at or after run i of phase ph; next_done[i], the first at or
  // after run i that is neither backward nor recompute (runs.size(): none); next_stop[p], the
  // first position at or after p holding an alloc or a classified event (end: none).
  const size_t n = runs.size();
  std::vector<std::vector<uint32_t>> next_of(
      kPhases, std::vector<uint32_t>(n + 1, static_cast<uint32_t>(n)));
  std::vector<uint32_t> next_done(n + 1, static_cast<uint32_t>(n));
  for (size_t i = n; i-- > 0;) {
    for (size_t k = 0; k < kPhases; ++k) next_of[k][i] = next_of[k][i + 1];
    next_of[static_cast<size_t>(runs[i].phase)][i] = static_cast<uint32_t>(i);
    const bool backward = runs[i].phase == Phase::backward || runs[i].phase == Phase::recompute;
    next_done[i] = backward ? next_done[i + 1] : static_cast<uint32_t>(i);
  }
  std::vector<uint64_t> next_stop(end + 1, end);
  for (uint64_t p = end; p-- > 1;) {
    const PhaseEvent& e = events[p - 1];
    next_stop[p] = e.alloc || e.phase != Phase::none ? p : next_stop[p + 1];
  }
  // The training or inference work: from the first forward, backward or optimizer run's first
  // event to the last one's last (first_work = end, last_work = 0: none).
  uint64_t first_work = end, last_work = 0;
  for (const Run& r : runs)
    if (r.phase == Phase::forward || r.phase == Phase::backward || r.phase == Phase::optimizer ||
        r.phase == Phase::recompute)
      first_work = std::min(first_work, r.first), last_work = std::max(last_work, r.last);
  // The index of the first run beginning after position p.
  auto first_after = [&](uint64_t p) {
    return static_cast<size_t>(
        std::upper_bound(runs.begin(), runs.end(), p,
                         [](uint64_t v, const Run& r) { return v < r.first; }) -
        runs.begin());
  };
  // The first run of phase `ph` beginning after position p, or null.
  auto next_run_of = [&](Phase ph, uint64_t p) -> const Run* {
    const size_t j = next_of[static_cast<size_t>(ph)][first_after(p)];
    return j < n ? &runs[j] : nullptr;
  };
  // Rule 4: the optimizer's runs end the steps; when it has at most one (an optimizer that
  // allocates only its states, on its first step: fused kernels) but backward ran more than
  // once, each backward run ends one instead.
  // A backward that checkpointing interrupts with recomputes is one backward: its runs and
  // the recomputes between them end one step, after the last.
  std::vector<uint64_t> optimizer_ends, backward_ends;
  for (size_t i = 0; i < runs.size(); ++i) {
    auto in_backward = [&](size_t j) {
      return j < runs.size() &&
             (runs[j].phase == Phase::backward || runs[j].phase == Phase::recompute);
    };
    if (runs[i].phase == Phase::optimizer) optimizer_ends.push_back(runs[i].last);
    if (runs[i].phase == Phase::backward && !in_backward(i + 1))
      backward_ends.push_back(runs[i].last);
    if (runs[i].phase == Phase::recompute && !in_backward(i + 1) && i > 0 && in_backward(i - 1))
      backward_ends.push_back(runs[i].last);
  }
  const bool by_backward = optimizer_ends.size() <= 1 && backward_ends.size() > 1;
  out.step_ends = by_backward ? backward_ends : optimizer_ends;  // a run's last position: after it
  if (!out.step_ends.empty()) {
    out.step_basis = by_backward ? StepBasis::backward : StepBasis::optimizer;
  } else {
    out.step_ends = repetition_step_ends(events);  // rule 5
    if (!out.step_ends.empty()) out.step_basis = StepBasis::repetition;
  }

  // A block a forward (beginning after position p) kept until pf_pos, not freed by a backward:
  // an activation when no backward began before its free (a graph that never ran backward)
  // or when a later forward did too (a graph kept across iterations, retain_graph); else the
  // program held it through the backward (its input, its loss): temporary.
  auto kept_by_graph = [&](uint64_t p, uint64_t pf_pos) {
    const Run* bw = next_run_of(Phase::backward, p);
    if (!bw || bw->first >= pf_pos) return C::activation;
    const Run* fw = next_run_of(Phase::forward, bw->first);
    return fw && fw->first < pf_pos ? C::activation : C::temporary;
  };
  // Each block's positions, phases and run, then which forward runs kept blocks.
  struct Where {
    uint64_t pa_pos, pf_pos;
    Phase pa, pf;
    size_t ra;
    bool within;  // freed within its run (outside any: before the next classified event)
  };
  std::vector<Where> where;
  where.reserve(blocks.size());
  for (const Block& b : blocks) {
    Where w;
    w.pa_pos = b.before_trace ? 0 : b.alloc_event + 1;
    const bool freed = b.free_event != kNever;
    w.pf_pos = freed ? b.free_event + 1 : end;
    w.pa = b.alloc_phase != Phase::none ? b.alloc_phase : phase_at(w.pa_pos);
    w.pf = !freed                        ? Phase::none
           : b.free_phase != Phase::none ? b.free_phase
                                         : phase_of_free(w.pf_pos);
    w.ra = run_at(w.pa_pos);
    w.within = false;
    if (freed) {
      if (w.ra < runs.size()) {
        w.within = w.pf_pos < runs[w.ra].limit;
      } else {
        w.within = w.pf_pos < next_stop[std::min(w.pa_pos + 1, end)];
      }
    }
    if (w.pa == Phase::forward && w.ra < runs.size() && !w.within && !b.checkpointed &&
        runs[w.ra].last_alloc != w.pa_pos)
      runs[w.ra].saving = true;
    where.push_back(w);
  }

  out.categories.reserve(blocks.size());
  for (size_t k = 0; k < blocks.size(); ++k) {
    const Block& b = blocks[k];
    const auto [pa_pos, pf_pos, pa, pf, ra, within] = where[k];
    const bool freed = b.free_event != kNever;
    C c = C::unknown;
    if (b.workspace) {
      out.categories.push_back(C::unknown);  // cuBLAS's, not the program's
      continue;
    }
    if (freed && b.freed_by_zero_grad) {
      out.categories.push_back(C::gradient);  // zero_grad(set_to_none=True) frees gradients
      continue;
    }
    switch (pa) {
      case Phase::data:
        c = within || (b.item && freed) ? C::temporary : C::input;
        break;
      case Phase::optimizer:
        c = within ? C::temporary : C::optimizer_state;
        break;
      case Phase::backward: {
        // Alive when the next optimizer run begins; without one, when the backward pass is
        // over (the next run that is neither backward nor a recompute begins).
        const Run* after = next_run_of(Phase::optimizer, pa_pos);
        if (!after)
          if (const size_t j = next_done[first_after(pa_pos)]; j < n) after = &runs[j];
        c = !freed || (after && pf_pos > after->first) ? C::gradient : C::temporary;
        break;
      }
      case Phase::recompute:
        c = within ? C::temporary : C::activation;
        break;
      case Phase::setup:
        c = within ? C::temporary : C::parameter;
        break;
      case Phase::forward:
      case Phase::none:
        if (b.before_trace && !freed && b.alloc_phase == Phase::none) {
          c = C::parameter;
        } else if (freed && (pf == Phase::backward || b.freed_by_autograd)) {
          c = C::activation;
        } else if (within) {
          c = C::temporary;
        } else if (pa == Phase::forward &&
                   (b.checkpointed || (ra < runs.size() && runs[ra].last_alloc == pa_pos))) {
          // A forward's result (its run's last alloc), or a checkpointed segment's (it saves
          // nothing): what the program reads, not what backward needs.
          c = freed ? C::temporary : C::unknown;
        } else if (pa == Phase::forward) {
          c = kept_by_graph(pa_pos, pf_pos);  // kept past its forward run
        } else if (pa == Phase::none && pa_pos < first_work && !freed && last_work > 0) {
          c = C::parameter;  // made by the program's own code before the work, kept through it
        } else if (const Run* fw = next_run_of(Phase::forward, pa_pos);
                   freed && fw && fw->saving && fw->limit <= pf_pos) {
          c = kept_by_graph(fw->first, pf_pos);  // made outside a forward that kept it
        }
        break;
    }
    out.categories.push_back(c);
  }
  // Note [A graph from before the history]: against the window's first forward that saves.
  for (size_t r = 0; r < runs.size(); ++r) {
    if (runs[r].phase != Phase::forward || !runs[r].saving) continue;
    std::vector<bool> saved_first(blocks.size());
    for (size_t k = 0; k < blocks.size(); ++k)
      saved_first[k] = where[k].pa == Phase::forward && where[k].ra == r;
    graph_before_history(blocks, saved_first, runs[r].last, out.categories);
    break;
  }
  // Note [State before the history].
  if (out.runs[static_cast<size_t>(Phase::optimizer)] == 0 ||
      !state_from_gradients(blocks, out.categories))
    state_in_groups(blocks, out.categories);
  return out;
}

}  // namespace tidemark::importers::infer
