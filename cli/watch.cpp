// tidemark watch: a recording as it happens, in the terminal (docs/cli.md, "watch"). Follows
// the trace file `tidemark record` is writing (analysis::LiveTrace reads the event blocks the
// recorder commits about every 50 ms), prints a line per interval with the steps completed since
// the last one, warns once when live memory grows step after step, and ends when the recording
// is finalized -- or reports a recording whose process is gone without finalizing.
#include <fmt/core.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "cli/commands.h"
#include "cli/common.h"
#include "profiler/analysis/follow.h"
#include "profiler/analysis/steps.h"
#include "profiler/naming/units.h"

namespace tidemark::cli {
namespace {

namespace an = analysis;
using nlohmann::json;

// Step boundaries the growth check fits (analysis::fit_growth skips the first as warm-up).
constexpr size_t kGrowthWindow = 10;

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) {
  g_interrupted = true;
}

// Will the trace still be finalized? While the recording process runs, or the process that
// finalizes it afterwards (Note [Live recordings]); on another host, maybe.
bool finalize_may_come(const an::LiveTrace& t) {
  const RecordingProcesses p = recording_processes(t.host(), t.pid(), t.finalizer_pid());
  return !p.known || p.alive_pid != 0;
}

class Watcher {
 public:
  Watcher(const WatchArgs& a, an::LiveTrace& t) : a_(a), t_(t) {}

  // Prints what the events read since the last call add; `final` once the trace is complete.
  void report(bool final) {
    if (!pick_device()) return;
    const auto& steps = t_.steps();
    // Steps [0, done) have ended: the next one began (or the recording did). Those printed are
    // the ones before printed_until_ (by time: a step read late from another thread's block
    // is merged in time order, so an index could shift).
    const size_t done = final ? steps.size() : (steps.empty() ? 0 : steps.size() - 1);
    const uint64_t now = t_.end_ns();
    const size_t first = static_cast<size_t>(
        std::lower_bound(steps.begin(), steps.end(), printed_until_,
                         [](const an::LiveTrace::Step& s, uint64_t t) { return s.ts < t; }) -
        steps.begin());
    if (done > first) {
      const uint64_t from = steps[first].ts;
      const uint64_t to = done < steps.size() ? steps[done].ts : now + 1;
      line(steps[first].number, steps[done - 1].number, t_.window(*device_, from, to), to);
      printed_until_ = steps[done - 1].ts + 1;
      check_growth(done);
    } else if (steps.empty() && (now != last_end_ || final) && t_.event_count() > 0) {
      // No steps recorded: a line per interval of what changed since the last.
      line(-1, -1, t_.window(*device_, last_end_ + (printed_any_ ? 1 : 0), now + 1), now + 1);
    }
    last_end_ = now;
  }

  // The last line; false when --device named a device the trace never had.
  bool finish(bool finalized) {
    if (!device_) {
      if (!a_.device.empty() && !t_.devices().empty()) {
        std::string names;
        for (const std::string& d : t_.devices()) names += (names.empty() ? "" : ", ") + d;
        std::fprintf(stderr,
                     "tidemark: %s: --device %s: the trace has no such device (it has %s)\n",
                     a_.file.c_str(), a_.device.c_str(), names.c_str());
        return false;
      }
      emit(json{{"event", "end"}, {"finalized", finalized}, {"device", nullptr}},
           fmt::format("{}: {} events, no memory events", a_.file, t_.event_count()));
      return true;
    }
    const std::optional<store::Peak> peak = t_.peak(*device_);
    const an::LiveTrace::Window all = t_.window(*device_, 0, t_.end_ns() + 1);
    const std::string& dev = t_.devices()[*device_];
    const int64_t peak_bytes = peak ? peak->bytes : 0;
    const uint64_t peak_ts = peak ? peak->ts_ns : t_.origin_ns();
    json j{{"event", "end"},
           {"finalized", finalized},
           {"device", dev},
           {"peak_allocated_bytes", peak_bytes},
           {"peak_allocated_time_ns", peak_ts - t_.origin_ns()},
           {"peak_reserved_bytes", all.reserved_peak},
           {"allocated_bytes", all.allocated_end},
           {"steps", t_.steps().size()}};
    std::string text = fmt::format(
        "{}: peak allocated {} at {}, peak reserved {}, {} allocated at the end, {} steps",
        finalized ? "finalized" : "stopped", an::format_bytes(peak_bytes), rel(peak_ts),
        an::format_bytes(all.reserved_peak), an::format_bytes(all.allocated_end),
        t_.steps().size());
    if (finalized) text += fmt::format("; tidemark summary {}", a_.file);
    emit(j, text);
    return true;
  }

 private:
  // The device to report: --device, else the first GPU once one appears (the CPU until then).
  bool pick_device() {
    const auto& devs = t_.devices();
    auto index_of = [&](auto match) -> std::optional<size_t> {
      const auto it = std::find_if(devs.begin(), devs.end(), match);
      return it == devs.end() ? std::nullopt : std::optional<size_t>(it - devs.begin());
    };
    std::optional<size_t> pick;
    if (!a_.device.empty()) {
      const std::string want = a_.device == "cuda" ? "cuda:0" : a_.device;
      pick = index_of([&](const std::string& d) { return d == want; });
    } else {
      pick = index_of([](const std::string& d) { return d != "cpu"; });
      if (!pick) pick = index_of([](const std::string& d) { return d == "cpu"; });
    }
    if (pick && pick != device_) {
      device_ = pick;
      if (!a_.json)
        fmt::print(a_.out, "{:>10} {:>13} {:>12} {:>12} {:>12}  ({})\n", "time", "steps",
                   "allocated", "peak", "reserved", devs[*device_]);
    }
    return device_.has_value();
  }

  void line(int64_t first_step, int64_t last_step, const an::LiveTrace::Window& w, uint64_t to) {
    printed_any_ = true;
    const uint64_t at = std::max(to, uint64_t{1}) - 1;
    json j{{"event", "update"},
           {"device", t_.devices()[*device_]},
           {"time_ns", at >= t_.origin_ns() ? at - t_.origin_ns() : 0},
           {"allocated_bytes", w.allocated_end},
           {"peak_allocated_bytes", w.allocated_peak},
           {"reserved_bytes", w.reserved_end},
           {"peak_reserved_bytes", w.reserved_peak}};
    std::string steps = "-";
    if (first_step >= 0) {
      j["first_step"] = first_step;
      j["last_step"] = last_step;
      steps = first_step == last_step ? fmt::format("{}", last_step)
                                      : fmt::format("{}-{}", first_step, last_step);
    }
    emit(j, fmt::format("{:>10} {:>13} {:>12} {:>12} {:>12}", rel(at), steps,
                        an::format_bytes(w.allocated_end), an::format_bytes(w.allocated_peak),
                        an::format_bytes(w.reserved_end)));
  }

  // Live bytes at the start of the last kGrowthWindow completed steps, fitted as `tidemark
  // steps` does -- reserved bytes on a device without blocks (an injected PyTorch run, whose
  // caching allocator reserves more segments as a leak fills its cache); warns once.
  void check_growth(size_t done) {
    if (warned_ || done < 5) return;
    const bool reserved = !t_.has_blocks(*device_);
    const an::Growth g = t_.step_growth(*device_, done, kGrowthWindow, reserved);
    if (!g.growing) return;
    warned_ = true;
    const int64_t slope = static_cast<int64_t>(g.slope_bytes_per_step);
    emit(json{{"event", "growing"},
              {"device", t_.devices()[*device_]},
              {"curve", reserved ? "reserved" : "allocated"},
              {"bytes_per_step", slope},
              {"r2", g.r2},
              {"first_step", g.boundaries.front().first},
              {"last_step", g.boundaries.back().first}},
         fmt::format("! {} memory at the start of a step grows by about {} per step (steps "
                     "{}-{}): something keeps memory alive across steps; run tidemark "
                     "diagnose {} once the recording ends",
                     reserved ? "reserved" : "live", an::format_bytes(slope),
                     g.boundaries.front().first, g.boundaries.back().first, a_.file));
  }

  std::string rel(uint64_t ts) const {
    const uint64_t r = ts >= t_.origin_ns() ? ts - t_.origin_ns() : 0;
    return fmt::format("{:.3f} s", static_cast<double>(r) / 1e9);
  }

  void emit(const json& j, const std::string& text) const {
    if (a_.json) {
      fmt::print(a_.out, "{}\n", json_text(j, -1));
    } else {
      fmt::print(a_.out, "{}\n", text);
    }
    std::fflush(a_.out);
  }

  const WatchArgs& a_;
  an::LiveTrace& t_;
  std::optional<size_t> device_;
  uint64_t printed_until_ = 0;  // the steps starting before this time are printed
  uint64_t last_end_ = 0;
  bool printed_any_ = false, warned_ = false;
};

}  // namespace

int run_watch(const WatchArgs& a) {
  const auto interval_ns = an::parse_duration_ns(a.interval);
  if (!interval_ns || *interval_ns < 10'000'000 || *interval_ns > 3'600'000'000'000)
    throw UsageError("--interval: expected a duration from 10ms to 1h (500ms, 2s), got '" +
                     a.interval + "'");
  const auto interval = std::chrono::nanoseconds(*interval_ns);
  const auto wait_ns = an::parse_duration_ns(a.wait);
  if (!wait_ns) throw UsageError("--wait: expected a duration (10s, 1m), got '" + a.wait + "'");

  auto stopped = [&] { return a.stop && a.stop->load(); };
  // The recording may not have created the file yet (inside record: as long as the program
  // runs).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::nanoseconds(*wait_ns);
  auto waited_out = [&] { return !a.stop && std::chrono::steady_clock::now() >= give_up; };
  while (!std::filesystem::exists(a.file) && !waited_out() && !stopped())
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (!std::filesystem::exists(a.file)) {
    if (stopped()) return kExitOk;  // the program wrote no trace: record says so
    throw UsageError(a.file + ": no such file (waited " + a.wait +
                     " for a recording to create it)");
  }

  // A recorder creating the file sets its application id a moment before it writes the schema
  // and meta data: until --wait runs out, an unreadable file may be one being created. Inside
  // record, a recording that started before the program is an earlier run's, until the
  // program replaces it.
  std::optional<an::LiveTrace> opened;
  while (!opened) {
    try {
      opened.emplace(a.file);
      if (opened->start_unix_ns() < a.not_before_unix_ns) opened.reset();
    } catch (const store::StoreError&) {
      if (a.once || waited_out()) throw;
    }
    if (opened) break;
    if (stopped()) return kExitOk;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  an::LiveTrace& trace = *opened;
  Watcher w(a, trace);
  if (!a.stop) {
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
  }

  int idle_polls = 0;
  while (true) {
    // Stopped, then finalized, are read before reading the events: record stops the watch only
    // after the finalize committed, so a stop seen here comes with a finalized trace, whose
    // events the poll below reads in full.
    const bool stop = stopped();
    const bool finalized = trace.finalized();
    const size_t read = trace.poll();
    if (finalized) {
      w.report(true);
      return w.finish(true) ? kExitOk : kExitUsage;
    }
    w.report(false);
    if (a.once || g_interrupted) return w.finish(false) ? kExitOk : kExitUsage;
    if (stop) return kExitOk;  // inside record: the recording ended and was not finalized
    idle_polls = read ? 0 : idle_polls + 1;
    // Checked again after the last poll: the finalizer may have finished in between.
    if (idle_polls >= 2 && !finalize_may_come(trace) && !trace.finalized()) {
      if (!w.finish(false)) return kExitUsage;
      std::fprintf(stderr,
                   "tidemark: %s: the recording process (pid %lld) ended without finalizing the "
                   "trace; `tidemark finalize %s` builds its tables\n",
                   a.file.c_str(), static_cast<long long>(trace.pid()), a.file.c_str());
      return kExitCheckFailed;
    }
    // Sleep in short slices so Ctrl-C ends the wait promptly.
    const auto until = std::chrono::steady_clock::now() + interval;
    while (!g_interrupted && !stopped() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(
          std::min<std::chrono::nanoseconds>(interval, std::chrono::milliseconds(20)));
  }
}

}  // namespace tidemark::cli
