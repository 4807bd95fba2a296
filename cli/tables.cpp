// The tables the reporting commands print (cli/tables.h).
#include <fmt/core.h>

#include <iostream>
#include <map>
#include <optional>
#include <string>

#include "cli/common.h"
#include "cli/tables.h"
#include "profiler/analysis/flame.h"
#include "profiler/analysis/json.h"
#include "profiler/naming/units.h"
#include "profiler/record/recorder.h"
#include "profiler/store/meta_keys.h"

namespace tidemark::cli {

namespace an = analysis;
using nlohmann::json;

void print_json(const json& j) {
  std::cout << json_text(j) << '\n';
}

std::string pct(int64_t part, int64_t whole) {
  return whole > 0 ? fmt::format("{:5.1f}%",
                                 100.0 * static_cast<double>(part) / static_cast<double>(whole))
                   : "     -";
}

void print_groups(const std::vector<an::Group>& groups, int64_t total, uint64_t groups_total) {
  for (const an::Group& g : groups) {
    fmt::print("  {:>12} {} {:>7}  {}\n", an::format_bytes(g.bytes), pct(g.bytes, total), g.count,
               g.label);
    if (!g.frames.empty())
      for (size_t i = 1; i < g.frames.size() && i < 12; ++i)
        fmt::print("  {:>36}{}\n", "", g.frames[i]);
  }
  if (groups_total > groups.size()) fmt::print("  ... and {} more\n", groups_total - groups.size());
}

// "TITLE of DEVICE (BYTES in COUNT UNITS, T s), by site:" and the groups.
void print_breakdown(const char* title, const an::LiveBreakdown& b, const char* units,
                     bool synthetic_times) {
  fmt::print("\n{} of {} ({} in {} {}, {}), by site:\n", title, b.device, an::format_bytes(b.bytes),
             b.count, units, an::format_time_point(b.time_ns, synthetic_times));
  print_groups(b.groups, b.bytes, b.groups_total);
}

an::GroupBy group_by(const std::string& s) {
  auto g = an::parse_group_by(s);
  if (!g) throw UsageError("--by " + s + ": expected site, stack, scope or category");
  return *g;
}

std::optional<int64_t> device_id(const an::Trace& t, const std::string& spec) {
  if (spec.empty()) return std::nullopt;
  return select_devices(t, spec).front().id;
}

// Brendan Gregg's folded stacks, which flamegraph.pl, inferno and speedscope read: one line
// per stack, its frames outermost first joined by ';' (without the C runtime's start-up
// frames: analysis::startup_frames), a space, then its bytes. A ';' inside a
// frame would split it, so it becomes ','; an allocation without a stack is "(no stack)".
// With user frames (the default) each run of library frames is one frame, as in the GUI's
// flame graph (Note [Folded library frames]); `--frames all` keeps every frame.
std::string folded_stack(const an::Trace& t, const an::Group& g) {
  if (g.frames.empty()) return g.label;
  // A stack cut short by the capture depth lacks its outer callers: it hangs from one frame
  // that says so, rather than passing its outermost recorded frame off as a root.
  std::string line = an::group_truncated(t, g) ? an::cut_stack_frame(t.stack_depth()) + ";" : "";
  const size_t n = g.frames.size() - an::startup_frames(g.frames);
  auto frame = [&](size_t k) -> const std::string& {
    return g.frames[n - 1 - k];
  };  // outermost first
  std::vector<bool> library;
  for (size_t k = 0; k < n; ++k)
    library.push_back(n - 1 - k < g.library.size() && g.library[n - 1 - k]);
  const auto runs = t.frames_mode() == an::Frames::user ? an::library_runs(library)
                                                        : std::vector<std::pair<size_t, size_t>>{};
  auto put = [&](std::string_view f, bool first) {
    if (!first) line += ';';
    for (char c : f) line += c == ';' ? ',' : c;
  };
  auto run = runs.begin();
  for (size_t k = 0; k < n;) {
    if (run != runs.end() && run->first == k) {
      put(an::folded_frame_label(run->second - run->first, frame(k)), k == 0);
      k = run++->second;
    } else {
      put(frame(k), k == 0);
      ++k;
    }
  }
  return line;
}

void print_folded(const an::Trace& t, const std::vector<an::Group>& groups) {
  for (const an::Group& g : groups) fmt::print("{} {}\n", folded_stack(t, g), g.bytes);
}

}  // namespace tidemark::cli
