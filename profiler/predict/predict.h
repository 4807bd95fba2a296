// tidemark::predict: the memory peak of a program at a size it was not run at (`tidemark
// predict`, docs/predict.md), from two or more recorded runs of it that differ in one size
// (batch, sequence length, image side).
//
// Note [Prediction method]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A peak is not extrapolated: what sets it changes with size (weights at a short context, the
// attention scores of backward at a long one). Each allocation is.
//  1. Align. Every allocation of each run gets a key: its stack's frames (function, file,
//     line), without the lines of the frames in the outermost frame's file -- the driver
//     script, which is edited between runs -- and without the file and line of generated
//     code (torch.compile writes a file per compiled shape). Per key, the allocations of the
//     largest run are paired with the other runs' from the end: every run ends where the program
//     took its snapshot or exited, while the start moves (a ring buffer cut at another entry, more
//     warm-up steps, more steps of a smaller batch). Blocks live before the window are paired
//     among themselves, per key by size rank: they have no order in the window, and their
//     addresses move with every size.
//  2. Fit. Each allocation of the largest run, with its partners, is a size as a function of
//     the varied value x. Tensor sizes are products of dimensions, so the fit is the sparsest
//     polynomial of degree at most 2 that passes through every point (within half a byte, or 10
//     ppm: sizes are exact products of dimensions): constant, c*x, c*x^2, then two terms, then
//     three. A form is *exact* when more points than it has terms agree with it. Two points that
//     fit no one-term form are joined by a line (a + b*x, not exact); four or more that fit no form
//     get the least-squares quadratic. An allocation without partners (a workspace, a kernel path
//     only the largest run took) scales like the aligned allocations of its key, else of its site,
//     by their median ratio; else it is kept constant.
//  3. Synthesise and replay. The largest run's requests, in its order, with every size
//     evaluated at the target, are replayed through the caching allocator under the settings
//     asked (replay.h): the requested peak is the synthesised sequence's own, the reserved
//     peak the replay's (Note [Reserved before the window] for where it starts).
//
// Note [Reserved before the window]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A window that began mid-run starts with segments its process reserved earlier, and they stay
// reserved: the cache is returned only by empty_cache. Under the largest run's own settings
// the replay starts from them as recorded (Start::recorded), its blocks resized to the target;
// the window then reuses what its blocks fit in and reserves the rest, as the process would
// have after the same history -- its own warm-up, or other work before it (a sweep that ran
// another configuration first holds that configuration's segments in every later window).
// Under other settings that history is unknown, and the state is rederived (Note [Rederived
// start] in replay.h).
// The aligned share is the part of the predicted requested peak held by allocations with a
// partner in another run; what the method cannot see (data-dependent shapes, another kernel
// choice at the target) is said in docs/predict.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "profiler/analysis/trace.h"
#include "profiler/replay/replay.h"

namespace tidemark::predict {

// Runs that cannot be predicted from (fewer than two, one value twice, no allocations): the
// message names the run and the problem.
class PredictError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Run {
  double x = 0;                            // the varied size's value in this run
  const analysis::Trace* trace = nullptr;  // kept open while the model lives
  std::string device;                      // "" : the device with the highest requested peak
};

// How a size grows with x: c0 + c1*x + c2*x^2, the terms in `growth`.
enum class Growth : uint8_t {
  constant,
  linear,
  quadratic,
  affine,
  constant_quadratic,
  linear_quadratic,
  full
};
std::string growth_text(
    Growth g);  // "constant", "∝x", "∝x²", "a+bx", "a+cx²", "bx+cx²", "a+bx+cx²"

struct SizeFit {
  double c0 = 0, c1 = 0, c2 = 0;
  Growth growth = Growth::constant;
  bool exact = false;  // more points than terms, all on it
  double at(double x) const { return c0 + x * (c1 + x * c2); }
};
// The fit of step 2 (Note [Prediction method]) through (x, size) points with distinct x.
SizeFit fit_sizes(const std::vector<std::pair<double, double>>& points);

struct SiteAtPeak {
  std::string site;                  // Note [Allocation site] label
  Growth growth = Growth::constant;  // of most of its bytes at the peak
  uint64_t bytes = 0, count = 0;     // live at the predicted peak
  uint64_t largest_run_bytes = 0;    // the same blocks in the largest run
};

struct SettingsPeak {
  std::string settings;  // PYTORCH_CUDA_ALLOC_CONF text, "" for the defaults
  uint64_t peak_reserved = 0, peak_allocated = 0;
  uint64_t failed = 0;  // requests the replay could not serve under the capacity
  bool rederived = false;
  std::optional<bool> fits;  // with a capacity: peak reserved <= capacity, no failed request
};

struct Target {
  double at = 0;
  uint64_t peak_requested = 0;
  std::vector<SettingsPeak> settings;  // one per Settings asked, in order
  double aligned_share = 0;            // of peak_requested
  double exact_share = 0;              // of peak_requested, fitted exactly
  std::string peak_site;               // the allocation that reached the requested peak
  std::string peak_phase;              // forward, backward, optimizer, ... (Note [Peak phase])
  std::vector<SiteAtPeak> sites;       // most bytes at the peak first
};

struct Options {
  std::vector<replay::Settings> settings;  // empty: the largest run's recorded settings
  std::optional<uint64_t> capacity;        // else the largest run's, if it has one
  size_t sites = 8;                        // rows of Target::sites
  // Only whether it fits (largest_fitting's probes): no replay when the requested peak alone
  // exceeds the capacity, and no unlimited replay of a setting that does not fit.
  bool fit_only = false;
};

// The runs read and aligned once; evaluated at any x.
class Model {
 public:
  static Model build(const std::vector<Run>& runs);
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  Target at(double x, const Options& options) const;
  // Per settings, the largest whole x >= 1 whose reserved peak fits `capacity` with every
  // request served, found by doubling from the largest run's value to the first size that
  // does not fit, then bisecting: the first such boundary, not a larger size that fits again
  // (a request of 1-10 MiB takes a 20 MiB segment, one over 10 MiB a segment of its own size,
  // so fitting need not be monotonic). Empty: not even the smallest run's value fits (then
  // bisected below it from 1); the search stops at 1024 times the largest run's value and
  // says so through `capped`.
  struct Fitting {
    std::optional<double> x;
    bool capped = false;
  };
  std::vector<Fitting> largest_fitting(uint64_t capacity, const Options& options) const;

  const std::string& device() const;
  double largest_x() const;
  std::vector<double> xs() const;
  uint64_t allocations() const;          // of the largest run (window and before it)
  uint64_t aligned_allocations() const;  // ... with a partner in another run
  const replay::AllocConf& recorded_settings() const;
  std::optional<uint64_t> recorded_capacity() const;
  std::vector<std::string> notes() const;

 private:
  Model();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tidemark::predict
