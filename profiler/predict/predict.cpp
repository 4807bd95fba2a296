// The prediction (predict.h, Note [Prediction method]): runs aligned by their allocations'
// keys, sizes fitted in the varied value, the largest run synthesised at the target and
// replayed.
#include "profiler/predict/predict.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include "tensorlib/memory/caching_allocator.h"

namespace tidemark::predict {

namespace an = tidemark::analysis;
namespace rp = tidemark::replay;
namespace ev = tidemark::events;

std::string growth_text(Growth g) {
  switch (g) {
    case Growth::constant:
      return "constant";
    case Growth::linear:
      return "∝x";
    case Growth::quadratic:
      return "∝x²";
    case Growth::affine:
      return "a+bx";
    case Growth::constant_quadratic:
      return "a+cx²";
    case Growth::linear_quadratic:
      return "bx+cx²";
    case Growth::full:
      return "a+bx+cx²";
  }
  return "constant";
}

namespace {

// ---- Fitting ----------------------------------------------------------------------------------

// The terms of each form, in the order Note [Prediction method] prefers them.
struct Form {
  Growth growth;
  bool t0, t1, t2;
  int terms() const { return int(t0) + int(t1) + int(t2); }
};
constexpr Form kForms[] = {
    {Growth::constant, true, false, false},
    {Growth::linear, false, true, false},
    {Growth::quadratic, false, false, true},
    {Growth::affine, true, true, false},
    {Growth::constant_quadratic, true, false, true},
    {Growth::linear_quadratic, false, true, true},
    {Growth::full, true, true, true},
};

// Least squares of `form` through `points` (normal equations, at most 3 unknowns; x scaled to
// about 1 so x^4 stays well conditioned).
std::optional<SizeFit> solve(const Form& form,
                             const std::vector<std::pair<double, double>>& points) {
  double scale = 0;
  for (const auto& [x, y] : points) scale = std::max(scale, std::fabs(x));
  if (scale == 0) scale = 1;
  std::vector<int> powers;
  if (form.t0) powers.push_back(0);
  if (form.t1) powers.push_back(1);
  if (form.t2) powers.push_back(2);
  const size_t k = powers.size();
  double a[3][4] = {};
  for (const auto& [x, y] : points) {
    const double u = x / scale;
    double basis[3];
    for (size_t i = 0; i < k; ++i) basis[i] = std::pow(u, powers[i]);
    for (size_t i = 0; i < k; ++i) {
      for (size_t j = 0; j < k; ++j) a[i][j] += basis[i] * basis[j];
      a[i][k] += basis[i] * y;
    }
  }
  // Gauss-Jordan with partial pivoting.
  for (size_t c = 0; c < k; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < k; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[pivot][c])) pivot = r;
    if (std::fabs(a[pivot][c]) < 1e-300) return std::nullopt;
    for (size_t j = 0; j <= k; ++j) std::swap(a[c][j], a[pivot][j]);
    for (size_t r = 0; r < k; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (size_t j = c; j <= k; ++j) a[r][j] -= f * a[c][j];
    }
  }
  SizeFit fit;
  fit.growth = form.growth;
  for (size_t i = 0; i < k; ++i) {
    const double coef = a[i][k] / a[i][i] / std::pow(scale, powers[i]);
    (powers[i] == 0 ? fit.c0 : powers[i] == 1 ? fit.c1 : fit.c2) = coef;
  }
  return fit;
}

bool passes(const SizeFit& f, const std::vector<std::pair<double, double>>& points) {
  for (const auto& [x, y] : points) {
    const double tolerance = std::max(0.5, 1e-5 * std::fabs(y));
    if (std::fabs(f.at(x) - y) > tolerance) return false;
  }
  return true;
}

}  // namespace

SizeFit fit_sizes(const std::vector<std::pair<double, double>>& points) {
  SizeFit best;
  if (points.empty()) return best;
  if (points.size() == 1) {
    best.c0 = points.front().second;
    return best;
  }
  const int n = static_cast<int>(points.size());
  // The sparsest form that more points than it has terms agree with.
  for (const Form& form : kForms) {
    if (form.terms() >= n) break;
    if (auto f = solve(form, points); f && passes(*f, points)) {
      f->exact = true;
      return *f;
    }
  }
  // None verified: as many terms as points, or the quadratic by least squares.
  if (n == 2) {
    if (auto f = solve(kForms[3], points)) return *f;
  } else if (auto f = solve(kForms[6], points)) {
    f->exact = false;
    return *f;
  }
  best.c0 = points.back().second;
  return best;
}

// ---- The model --------------------------------------------------------------------------------

namespace {

// Code generated for one size (torch.compile's Inductor output, named by a hash of the code
// and kept under torchinductor_<user>/; FX's `<eval_with_key>.N`, numbered per process): a
// recompile for another shape writes another file, so its frames key by function alone.
bool generated_code(std::string_view file) {
  if (file.find("torchinductor_") != std::string_view::npos ||
      file.find("<eval_with_key>") != std::string_view::npos)
    return true;
  const size_t slash = file.find_last_of('/');
  std::string_view base = slash == std::string_view::npos ? file : file.substr(slash + 1);
  if (base.ends_with(".py")) base.remove_suffix(3);
  return base.size() >= 32 && std::all_of(base.begin(), base.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
         });
}

// Note [Prediction method], step 1: a stack's key. The frames' functions and file names, and
// the lines of every frame outside the driver script (the outermost frame's file); frames of
// generated code by their function alone.
class Keys {
 public:
  explicit Keys(const an::Trace& trace) : trace_(trace) {}
  uint64_t of(uint64_t stack_id) {
    auto it = cache_.find(stack_id);
    if (it != cache_.end()) return it->second;
    const std::vector<store::ResolvedFrame> frames = trace_.resolved_frames(stack_id);
    std::string driver;
    for (auto f = frames.rbegin(); f != frames.rend(); ++f)
      if (!f->file.empty()) {
        driver = f->file;
        break;
      }
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](std::string_view s) {
      for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
      h = (h ^ 0xff) * 1099511628211ull;
    };
    if (frames.empty()) mix(stack_id == 0 ? "(no stack)" : fmt::format("0x{:x}", stack_id));
    for (const store::ResolvedFrame& f : frames) {
      mix(f.function);
      if (generated_code(f.file)) continue;
      const size_t slash = f.file.find_last_of('/');
      mix(slash == std::string::npos ? f.file : std::string_view(f.file).substr(slash + 1));
      if (f.file != driver) mix(std::to_string(f.line));
    }
    cache_.emplace(stack_id, h);
    return h;
  }

 private:
  const an::Trace& trace_;
  std::unordered_map<uint64_t, uint64_t> cache_;
};

struct RunPlan {
  double x = 0;
  const an::Trace* trace = nullptr;
  rp::Plan plan;
  std::vector<uint32_t> window;   // blocks in request order (alloc and failed)
  std::vector<uint32_t> initial;  // blocks live before the window, in address order
  std::vector<uint64_t> window_keys, initial_keys;
};

const rp::Plan& pick_plan(const std::vector<rp::Plan>& plans, const std::string& want) {
  if (!want.empty())
    for (const rp::Plan& p : plans)
      if (p.device.name == want) return p;
  const rp::Plan* best = &plans.front();
  for (const rp::Plan& p : plans)
    if (p.recorded_figures.peak_allocated > best->recorded_figures.peak_allocated) best = &p;
  return *best;
}

// Note [Peak phase]: what the program was doing when the requested peak was reached, from the
// allocation that reached it: its category where the trace names one that belongs to a phase,
// else its frames (a backward or autograd frame, or a frameless allocation of an imported
// snapshot, whose autograd threads have no Python frames: backward; an optimizer's step:
// optimizer; a module's forward: forward).
std::string phase_of(const an::Trace& trace, const rp::BlockRequest& b) {
  switch (b.category) {
    case ev::Category::activation:
      return "forward";
    case ev::Category::gradient:
      return "backward";
    case ev::Category::optimizer_state:
      return "optimizer";
    case ev::Category::parameter:
      return "setup (parameters)";
    case ev::Category::input:
      return "input";
    default:
      break;
  }
  const std::vector<store::ResolvedFrame> frames = trace.resolved_frames(b.stack_id);
  if (frames.empty()) return trace.imported_snapshot() ? "backward" : "unknown";
  for (const store::ResolvedFrame& f : frames) {
    if (f.function == "backward" || f.function.find("autograd::backward") != std::string::npos ||
        f.function.find("Engine::") != std::string::npos)
      return "backward";
    if (f.file.find("optim") != std::string::npos ||
        f.function.find("optim::") != std::string::npos)
      return "optimizer";
  }
  for (const store::ResolvedFrame& f : frames)
    if (f.function == "forward" || f.function.ends_with("::forward")) return "forward";
  return "unknown";
}

}  // namespace

struct Model::Impl {
  std::vector<RunPlan> runs;  // by x; runs.back() is the largest, the template
  // Per block of the template: the fit (aligned) or where its scaling comes from.
  std::vector<SizeFit> fits;
  std::vector<uint8_t> aligned;
  std::vector<int64_t>
      scaled_by;  // unaligned: the template block whose ratio it takes (-1: constant)
  std::vector<std::string> notes;
  uint64_t allocations = 0, aligned_count = 0;

  const RunPlan& tpl() const { return runs.back(); }

  // Sizes of every template block at x.
  std::vector<uint64_t> sizes_at(double x) const {
    const rp::Plan& p = tpl().plan;
    std::vector<uint64_t> out(p.blocks.size());
    for (size_t b = 0; b < out.size(); ++b) {
      double v;
      if (aligned[b]) {
        v = fits[b].at(x);
      } else if (scaled_by[b] >= 0) {
        const auto& r = p.blocks[static_cast<size_t>(scaled_by[b])];
        const double ratio =
            fits[static_cast<size_t>(scaled_by[b])].at(x) / std::max<double>(1, r.requested);
        v = static_cast<double>(p.blocks[b].requested) * ratio;
      } else {
        v = static_cast<double>(p.blocks[b].requested);
      }
      // At least a byte; at most a petabyte (a fit evaluated far past its runs, or a line of
      // negative slope), so every size is one the allocator can refuse as it would.
      out[b] = !(v >= 1)    ? 1
               : v > 0x1p50 ? uint64_t{1} << 50
                            : static_cast<uint64_t>(std::llround(v));
    }
    return out;
  }

  Growth growth_of(size_t b) const {
    if (aligned[b]) return fits[b].growth;
    if (scaled_by[b] >= 0) return fits[static_cast<size_t>(scaled_by[b])].growth;
    return Growth::constant;
  }

  // Target's sites, shares and the allocation that reached the peak: what the synthesised run
  // holds once its first `peak_at` requests are done.
  void describe_peak(Target& out, const rp::Plan& plan, const std::vector<uint64_t>& sizes,
                     size_t peak_at, int64_t peak_block, size_t limit) const {
    const RunPlan& t = tpl();
    const uint64_t peak = out.peak_requested;
    std::vector<uint8_t> live(plan.blocks.size(), 0);
    for (uint32_t b : plan.initial_blocks) live[b] = 1;
    for (uint32_t b : plan.initial_pending) live[b] = 0;
    for (size_t i = 0; i < peak_at; ++i) {
      const rp::Request& r = plan.requests[i];
      if (r.kind == rp::Request::Kind::alloc)
        live[r.block] = 1;
      else if (r.kind == rp::Request::Kind::free)
        live[r.block] = 0;
    }
    struct Acc {
      uint64_t bytes = 0, count = 0, largest = 0;
      std::map<Growth, uint64_t> by_growth;
    };
    std::map<std::string, Acc> by_site;
    uint64_t aligned_bytes = 0, exact_bytes = 0;
    for (size_t b = 0; b < live.size(); ++b) {
      if (!live[b]) continue;
      if (aligned[b]) {
        aligned_bytes += sizes[b];
        if (fits[b].exact) exact_bytes += sizes[b];
      }
      Acc& a = by_site[t.trace->site(plan.blocks[b].stack_id).label];
      a.bytes += sizes[b];
      ++a.count;
      a.largest += t.plan.blocks[b].requested;
      a.by_growth[growth_of(b)] += sizes[b];
    }
    out.aligned_share = peak ? static_cast<double>(aligned_bytes) / static_cast<double>(peak) : 0;
    out.exact_share = peak ? static_cast<double>(exact_bytes) / static_cast<double>(peak) : 0;
    if (peak_block >= 0) {
      const rp::BlockRequest& pb = plan.blocks[static_cast<size_t>(peak_block)];
      out.peak_site = t.trace->site(pb.stack_id).label;
      out.peak_phase = phase_of(*t.trace, pb);
    } else {
      out.peak_site = "(before the window)";
      out.peak_phase = "before the window";
    }
    for (auto& [site, a] : by_site) {
      SiteAtPeak s;
      s.site = site;
      s.bytes = a.bytes;
      s.count = a.count;
      s.largest_run_bytes = a.largest;
      uint64_t most = 0;
      for (const auto& [g, bytes] : a.by_growth)
        if (bytes > most) most = bytes, s.growth = g;
      out.sites.push_back(std::move(s));
    }
    std::sort(out.sites.begin(), out.sites.end(), [](const SiteAtPeak& a, const SiteAtPeak& b) {
      return a.bytes != b.bytes ? a.bytes > b.bytes : a.site < b.site;
    });
    if (out.sites.size() > limit) out.sites.resize(limit);
  }
};

Model::Model() : impl_(std::make_unique<Impl>()) {}
Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

Model Model::build(const std::vector<Run>& runs_in) {
  if (runs_in.size() < 2)
    throw PredictError("predict needs at least two runs of the program at different sizes");
  std::vector<Run> runs = runs_in;
  std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.x < b.x; });
  for (size_t i = 1; i < runs.size(); ++i)
    if (runs[i].x == runs[i - 1].x)
      throw PredictError(fmt::format("{} and {} are both at {}: give each size once",
                                     runs[i - 1].trace->path(), runs[i].trace->path(), runs[i].x));
  for (const Run& r : runs)
    if (!(r.x > 0))
      throw PredictError(
          fmt::format("{}: the size must be a positive number (got {})", r.trace->path(), r.x));

  Model m;
  Impl& impl = *m.impl_;
  // The largest run's device names the device of every run.
  std::string device = runs.back().device;
  for (size_t i = runs.size(); i-- > 0;) {
    std::vector<rp::Plan> plans;
    try {
      plans = rp::build_plans(*runs[i].trace);
    } catch (const rp::SettingsError& e) {
      throw PredictError(e.what());
    }
    RunPlan rp_;
    rp_.x = runs[i].x;
    rp_.trace = runs[i].trace;
    rp_.plan = pick_plan(plans, runs[i].device.empty() ? device : runs[i].device);
    if (device.empty()) device = rp_.plan.device.name;
    impl.runs.insert(impl.runs.begin(), std::move(rp_));
  }
  for (RunPlan& r : impl.runs) {
    Keys keys(*r.trace);
    for (const rp::Request& q : r.plan.requests)
      if (q.kind == rp::Request::Kind::alloc || q.kind == rp::Request::Kind::failed) {
        r.window.push_back(q.block);
        r.window_keys.push_back(keys.of(r.plan.blocks[q.block].stack_id));
      }
    // Blocks live before the window carry no order (their allocations are not in it) and
    // their addresses move with every size: largest first, so that per key the k-th largest
    // pairs with the k-th largest.
    r.initial = r.plan.initial_blocks;
    std::sort(r.initial.begin(), r.initial.end(), [&](uint32_t a, uint32_t b) {
      const rp::BlockRequest &x = r.plan.blocks[a], &y = r.plan.blocks[b];
      return x.requested != y.requested ? x.requested > y.requested : x.addr < y.addr;
    });
    for (uint32_t b : r.initial) r.initial_keys.push_back(keys.of(r.plan.blocks[b].stack_id));
  }

  // Step 1: partners from the end, per key.
  const RunPlan& t = impl.tpl();
  const size_t nblocks = t.plan.blocks.size();
  std::vector<std::vector<std::pair<double, double>>> points(nblocks);
  auto align = [&](const std::vector<uint32_t>& tb, const std::vector<uint64_t>& tk, auto member) {
    std::unordered_map<uint64_t, std::vector<uint32_t>> t_by_key;
    for (size_t i = 0; i < tb.size(); ++i) t_by_key[tk[i]].push_back(tb[i]);
    for (size_t r = 0; r + 1 < impl.runs.size(); ++r) {
      const RunPlan& o = impl.runs[r];
      const std::vector<uint32_t>& ob = o.*member.first;
      const std::vector<uint64_t>& ok = o.*member.second;
      std::unordered_map<uint64_t, std::vector<uint32_t>> o_by_key;
      for (size_t i = 0; i < ob.size(); ++i) o_by_key[ok[i]].push_back(ob[i]);
      for (auto& [key, mine] : t_by_key) {
        auto it = o_by_key.find(key);
        if (it == o_by_key.end()) continue;
        const std::vector<uint32_t>& theirs = it->second;
        const size_t n = std::min(mine.size(), theirs.size());
        for (size_t j = 1; j <= n; ++j)
          points[mine[mine.size() - j]].emplace_back(
              o.x, static_cast<double>(o.plan.blocks[theirs[theirs.size() - j]].requested));
      }
    }
  };
  align(t.window, t.window_keys, std::make_pair(&RunPlan::window, &RunPlan::window_keys));
  align(t.initial, t.initial_keys, std::make_pair(&RunPlan::initial, &RunPlan::initial_keys));

  // Step 2: fits.
  impl.fits.resize(nblocks);
  impl.aligned.assign(nblocks, 0);
  impl.scaled_by.assign(nblocks, -1);
  std::vector<uint32_t> tokens = t.initial;
  tokens.insert(tokens.end(), t.window.begin(), t.window.end());
  std::vector<uint64_t> token_keys = t.initial_keys;
  token_keys.insert(token_keys.end(), t.window_keys.begin(), t.window_keys.end());
  uint64_t inexact = 0;
  for (uint32_t b : tokens) {
    ++impl.allocations;
    if (points[b].empty()) continue;
    std::vector<std::pair<double, double>> pts = points[b];
    pts.emplace_back(t.x, static_cast<double>(t.plan.blocks[b].requested));
    std::sort(pts.begin(), pts.end());
    impl.fits[b] = fit_sizes(pts);
    impl.aligned[b] = 1;
    ++impl.aligned_count;
    if (!impl.fits[b].exact && pts.size() > 2) ++inexact;
  }
  // Unaligned blocks scale like their key's aligned ones, else their site's: the aligned block
  // whose ratio at twice the largest value is the median of the group.
  auto representative = [&](const std::vector<uint32_t>& group) -> int64_t {
    if (group.empty()) return -1;
    std::vector<std::pair<double, uint32_t>> ratios;
    for (uint32_t b : group)
      ratios.emplace_back(
          impl.fits[b].at(2 * t.x) / std::max<double>(1, t.plan.blocks[b].requested), b);
    std::nth_element(ratios.begin(), ratios.begin() + static_cast<long>(ratios.size() / 2),
                     ratios.end());
    return ratios[ratios.size() / 2].second;
  };
  std::unordered_map<uint64_t, std::vector<uint32_t>> by_key;
  std::unordered_map<std::string, std::vector<uint32_t>> by_site;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (impl.aligned[tokens[i]]) {
      by_key[token_keys[i]].push_back(tokens[i]);
      by_site[t.trace->site(t.plan.blocks[tokens[i]].stack_id).key].push_back(tokens[i]);
    }
  std::unordered_map<uint64_t, int64_t> key_rep;
  std::unordered_map<std::string, int64_t> site_rep;
  uint64_t unaligned = 0, scaled = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint32_t b = tokens[i];
    if (impl.aligned[b]) continue;
    ++unaligned;
    auto k = key_rep.find(token_keys[i]);
    if (k == key_rep.end())
      k = key_rep.emplace(token_keys[i], representative(by_key[token_keys[i]])).first;
    int64_t rep = k->second;
    if (rep < 0) {
      const std::string& site = t.trace->site(t.plan.blocks[b].stack_id).key;
      auto s = site_rep.find(site);
      if (s == site_rep.end()) s = site_rep.emplace(site, representative(by_site[site])).first;
      rep = s->second;
    }
    impl.scaled_by[b] = rep;
    if (rep >= 0) ++scaled;
  }
  if (impl.aligned_count == 0)
    throw PredictError(fmt::format(
        "{}: no allocation of it lines up with the other runs' (is it the same program?)",
        t.trace->path()));
  if (unaligned)
    impl.notes.push_back(
        fmt::format("{} of the largest run's {} allocations have no partner in another run: {} "
                    "scale like their site's "
                    "others, {} are kept constant",
                    unaligned, impl.allocations, scaled, unaligned - scaled));
  // Stacks cut short by the capture depth lose the frames that tell allocations apart: they
  // then share a key and may pair with the wrong partners.
  uint64_t truncated = 0;
  for (uint32_t b : tokens)
    if (t.trace->stack_truncated(t.plan.blocks[b].stack_id)) ++truncated;
  if (truncated * 10 > tokens.size())
    impl.notes.push_back(fmt::format(
        "{} of the largest run's {} allocations have stacks cut short by the capture depth ({} "
        "frames): "
        "allocations from different lines look alike to the alignment; record with --stacks 64",
        truncated, tokens.size(), t.trace->stack_depth()));
  if (inexact)
    impl.notes.push_back(fmt::format(
        "{} allocations fit no polynomial of degree 2 exactly (least squares)", inexact));
  if (!t.plan.initial.empty())
    impl.notes.push_back(
        "the largest run began mid-run: under its recorded settings the prediction starts from the "
        "segments it held then, its blocks resized; under others the state is rederived "
        "(docs/predict.md, "
        "\"Reserved before the window\")");
  return m;
}

Target Model::at(double x, const Options& options) const {
  const Impl& impl = *impl_;
  const RunPlan& t = impl.tpl();
  const std::vector<uint64_t> sizes = impl.sizes_at(x);
  rp::Plan plan = t.plan;
  for (size_t b = 0; b < plan.blocks.size(); ++b) {
    plan.blocks[b].requested = sizes[b];
    plan.blocks[b].size = tl::memory::CachingAllocator::round_size(sizes[b], plan.recorded.config);
  }
  Target out;
  out.at = x;

  // The requested peak of the synthesised sequence: live requested bytes, before the window
  // and after each request.
  std::vector<uint8_t> live(plan.blocks.size(), 0);
  uint64_t now = 0;
  for (uint32_t b : plan.initial_blocks) {
    live[b] = 1;
    now += sizes[b];
  }
  for (uint32_t b : plan.initial_pending)
    if (live[b]) live[b] = 0, now -= sizes[b];
  uint64_t peak = now;
  size_t peak_at = 0;  // requests done when the peak was reached
  int64_t peak_block = -1;
  for (size_t i = 0; i < plan.requests.size(); ++i) {
    const rp::Request& r = plan.requests[i];
    if (r.kind == rp::Request::Kind::alloc) {
      if (!live[r.block]) live[r.block] = 1, now += sizes[r.block];
      if (now > peak) peak = now, peak_at = i + 1, peak_block = r.block;
    } else if (r.kind == rp::Request::Kind::free) {
      if (live[r.block]) live[r.block] = 0, now -= sizes[r.block];
    }
  }
  out.peak_requested = peak;
  // What is live at the peak (the search's probes ask only whether it fits).
  if (!options.fit_only) impl.describe_peak(out, plan, sizes, peak_at, peak_block, options.sites);

  // Reserved: the synthesised requests through the allocator, from a rederived start.
  std::vector<rp::Settings> settings = options.settings;
  if (settings.empty()) {
    rp::Settings s;
    s.conf = plan.recorded;
    settings.push_back(s);
  }
  const std::optional<uint64_t> capacity = options.capacity ? options.capacity : plan.capacity;
  if (options.fit_only && capacity && peak > *capacity) {
    for (const rp::Settings& s : settings) {
      SettingsPeak sp;
      sp.settings = s.conf.text();
      sp.fits = false;
      out.settings.push_back(std::move(sp));
    }
    return out;
  }
  for (rp::Settings s : settings) {
    // Under a capacity the replay's allocator frees its cache and retries as PyTorch's does,
    // so whether it fits is the capacity's replay; what it would need when it does not, an
    // unlimited one's.
    s.start = rp::Start::automatic;  // Note [Reserved before the window]
    s.capacity = capacity ? *capacity : rp::kUnlimited;
    rp::Result r = rp::run(plan, s);
    const bool fits =
        r.figures.failed_requests == 0 && (!capacity || r.figures.peak_reserved <= *capacity);
    if (capacity && !fits && !options.fit_only) {
      s.capacity = rp::kUnlimited;
      r = rp::run(plan, s);
    }
    SettingsPeak sp;
    sp.settings = s.conf.text();
    sp.peak_reserved = r.figures.peak_reserved;
    sp.peak_allocated = r.figures.peak_allocated;
    sp.failed = r.figures.failed_requests;
    sp.rederived = r.rederived;
    if (capacity) sp.fits = fits;
    out.settings.push_back(std::move(sp));
  }
  return out;
}

std::vector<Model::Fitting> Model::largest_fitting(uint64_t capacity,
                                                   const Options& options) const {
  std::vector<rp::Settings> settings = options.settings;
  if (settings.empty()) {
    rp::Settings s;
    s.conf = impl_->tpl().plan.recorded;
    settings.push_back(s);
  }
  std::vector<Fitting> out;
  const double lo_run = impl_->runs.front().x, hi_run = impl_->tpl().x;
  for (const rp::Settings& s : settings) {
    Options one = options;
    one.settings = {s};
    one.capacity = capacity;
    one.sites = 0;
    one.fit_only = true;
    auto fits = [&](double x) {
      const Target t = at(x, one);
      return t.peak_requested <= capacity && t.settings.front().fits.value_or(false);
    };
    Fitting f;
    double lo, hi;
    if (fits(lo_run)) {
      lo = lo_run;
      hi = std::max(std::floor(hi_run), lo + 1);
      const double cap = 1024 * hi_run;
      while (fits(hi)) {
        lo = hi;
        if (hi >= cap) {
          f.capped = true;
          break;
        }
        hi = std::min(cap, hi * 2);
      }
    } else {
      if (!fits(1)) {
        out.push_back(f);
        continue;
      }
      lo = 1;
      hi = std::floor(lo_run);
    }
    if (!f.capped) {
      lo = std::floor(lo);
      while (hi - lo > 1) {
        const double mid = std::floor((lo + hi) / 2);
        (fits(mid) ? lo : hi) = mid;
      }
    }
    f.x = lo;
    out.push_back(f);
  }
  return out;
}

const std::string& Model::device() const {
  return impl_->tpl().plan.device.name;
}
double Model::largest_x() const {
  return impl_->tpl().x;
}
std::vector<double> Model::xs() const {
  std::vector<double> out;
  for (const RunPlan& r : impl_->runs) out.push_back(r.x);
  return out;
}
uint64_t Model::allocations() const {
  return impl_->allocations;
}
uint64_t Model::aligned_allocations() const {
  return impl_->aligned_count;
}
const replay::AllocConf& Model::recorded_settings() const {
  return impl_->tpl().plan.recorded;
}
std::optional<uint64_t> Model::recorded_capacity() const {
  return impl_->tpl().plan.capacity;
}
std::vector<std::string> Model::notes() const {
  return impl_->notes;
}

}  // namespace tidemark::predict
