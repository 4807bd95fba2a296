// tidemark report: one self-contained HTML file a user can send (docs/cli.md, "report").
//
// Note [The HTML report]
// ~~~~~~~~~~~~~~~~~~~~~~
// One file that opens anywhere, offline: no scripts, no fonts, no style sheets or images from
// elsewhere. The charts are inline SVG drawn here (each band and line has a <title>, so a
// browser shows its name on hover), the styles one inline <style>. Per device: the peaks, the
// allocated memory over time stacked by category with the reserved and requested curves over
// it, what was live at the allocated peak by category and by site (the user's frames), the
// steps, and the allocator's segments at the reserved peak; then the diagnoses with their
// evidence and fixes. Every number a script may check carries `data-key` and its exact value in
// `data-value` (bytes, counts), the same values `summary --json` gives. The size is bounded by
// the chart's width and the tables' limits, not by the trace: a 1M-event trace's report is
// tens of kilobytes.
#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "profiler/analysis/allocator_state.h"
#include "profiler/analysis/bands.h"
#include "profiler/analysis/memory.h"
#include "profiler/analysis/output_file.h"
#include "profiler/analysis/steps.h"
#include "profiler/diagnose/diagnose.h"
#include "profiler/naming/units.h"

namespace tidemark::cli {

namespace an = tidemark::analysis;

namespace {

std::string esc(std::string_view s) {
  return markup_escape(s);
}

std::string bytes(int64_t b) {
  return an::format_bytes(b);
}

// A cell whose exact value a script can read.
std::string num(const std::string& key, int64_t value, const std::string& shown) {
  return fmt::format("<td class=\"n\" data-key=\"{}\" data-value=\"{}\">{}</td>", esc(key), value,
                     esc(shown));
}

const char* category_color(std::string_view c) {
  if (c == "parameter") return "#4e79a7";
  if (c == "gradient") return "#f28e2b";
  if (c == "optimizer_state") return "#e15759";
  if (c == "activation") return "#76b7b2";
  if (c == "input") return "#59a14f";
  if (c == "temporary") return "#edc948";
  if (c == "comm_buffer") return "#b07aa1";
  return "#bab0ac";
}

constexpr size_t kWidth = 960;
constexpr double kHeight = 260, kLeft = 72, kBottom = 22;

// The allocated bands stacked by category, with reserved (solid) and requested (dashed) over.
std::string timeline_svg(const an::Trace& t, const an::DeviceRef& d) {
  an::TimelineRequest req;
  req.width = kWidth;
  const an::Timeline tl = an::timeline(t, d.id, req);
  const size_t w = tl.width();
  if (w == 0) return "<p>No memory events on this device.</p>";
  const an::Bands bands = an::allocated_bands(t, d.id, an::BandBy::category);
  const an::BandColumns cols = bands.columns(tl.from_ts, tl.to_ts, w, tl.level_width_ns);
  int64_t top = 1;
  for (size_t i = 0; i < w; ++i)
    top = std::max({top, tl.reserved.max[i], tl.allocated.max[i], tl.requested.max[i]});
  auto x = [&](size_t i) { return kLeft + static_cast<double>(i); };
  auto y = [&](int64_t v) {
    return kHeight - static_cast<double>(v) / static_cast<double>(top) * (kHeight - 16);
  };
  std::ostringstream s;
  s << fmt::format(
      "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "role=\"img\" aria-label=\"memory of {} over time\">",
      static_cast<double>(w) + kLeft + 12, kHeight + kBottom, esc(d.name));
  s << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>";
  // Stacked areas, bottom band first.
  std::vector<int64_t> base(w, 0);
  for (size_t b = 0; b < bands.size() && b < cols.values.size(); ++b) {
    std::string path = fmt::format("M{:.1f},{:.1f}", x(0), y(base[0]));
    for (size_t i = 0; i < w; ++i)
      path += fmt::format(" L{:.1f},{:.1f}", x(i + 1), y(base[i] + cols.values[b][i]));
    for (size_t i = w; i-- > 0;) path += fmt::format(" L{:.1f},{:.1f}", x(i), y(base[i]));
    path += " Z";
    s << fmt::format(
        "<path class=\"band\" data-band=\"{0}\" d=\"{1}\" fill=\"{2}\"><title>{0}</title></path>",
        esc(bands.labels()[b]), path, category_color(bands.labels()[b]));
    for (size_t i = 0; i < w; ++i) base[i] += cols.values[b][i];
  }
  auto line = [&](const an::CurveColumns& c, const char* name, const char* color,
                  const char* dash) {
    std::string path;
    for (size_t i = 0; i < w; ++i)
      path += fmt::format("{}{:.1f},{:.1f} L{:.1f},{:.1f}", i == 0 ? "M" : " L", x(i), y(c.max[i]),
                          x(i + 1), y(c.max[i]));
    s << fmt::format(
        "<path class=\"curve\" data-curve=\"{0}\" d=\"{1}\" fill=\"none\" stroke=\"{2}\" "
        "stroke-width=\"1.5\" "
        "stroke-dasharray=\"{3}\"><title>{0}</title></path>",
        name, path, color, dash);
  };
  line(tl.reserved, "reserved", "#1f1f1f", "none");
  line(tl.requested, "requested", "#7b3294", "4,3");
  s << fmt::format("<text x=\"4\" y=\"{:.1f}\" font-size=\"11\">{}</text>", y(top) + 10,
                   esc(bytes(top)));
  s << fmt::format("<text x=\"4\" y=\"{:.1f}\" font-size=\"11\">0</text>", kHeight);
  s << fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\">{}</text>", kLeft,
                   kHeight + 16, esc(t.time_text(tl.from_ts)));
  s << fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">{}</text>",
                   x(w), kHeight + 16, esc(t.time_text(tl.to_ts)));
  s << "</svg>";
  // Legend.
  s << "<p class=\"legend\">";
  for (const std::string& l : bands.labels())
    s << fmt::format("<span><i style=\"background:{}\"></i>{}</span>", category_color(l), esc(l));
  s << "<span><i class=\"solid\"></i>reserved</span><span><i "
       "class=\"dashed\"></i>requested</span></p>";
  return s.str();
}

std::string groups_table(const std::string& key, const std::vector<an::Group>& groups,
                         int64_t total, const char* what) {
  std::ostringstream s;
  s << fmt::format(
      "<table class=\"groups\" "
      "data-table=\"{}\"><tr><th>{}</th><th>bytes</th><th>share</th><th>blocks</th></tr>",
      esc(key), what);
  for (const an::Group& g : groups)
    s << "<tr><td>" << esc(g.label) << "</td>" << num(key + ":" + g.key, g.bytes, bytes(g.bytes))
      << fmt::format(
             "<td class=\"n\">{:.1f}%</td>",
             total > 0 ? 100.0 * static_cast<double>(g.bytes) / static_cast<double>(total) : 0.0)
      << num(key + ":" + g.key + ":count", static_cast<int64_t>(g.count), std::to_string(g.count))
      << "</tr>";
  s << "</table>";
  return s.str();
}

std::string device_section(const an::Trace& t, const an::DeviceRef& d) {
  const an::DeviceSummary sum = an::summarize_device(t, d);
  std::ostringstream s;
  s << fmt::format("<section class=\"device\" data-device=\"{0}\"><h2>{0}</h2>", esc(d.name));
  if (!d.description.empty() && d.description != d.name)
    s << "<p class=\"sub\">" << esc(d.description) << "</p>";
  s << "<table class=\"peaks\"><tr><th>peak allocated</th><th>peak reserved</th><th>peak "
       "requested</th>"
       "<th>allocations</th><th>at the end</th></tr><tr>"
    << num("peak_allocated_bytes", sum.peak_allocated_bytes, bytes(sum.peak_allocated_bytes))
    << num("peak_reserved_bytes", sum.peak_reserved_bytes, bytes(sum.peak_reserved_bytes))
    << num("peak_requested_bytes", sum.peak_requested_bytes, bytes(sum.peak_requested_bytes))
    << num("alloc_count", static_cast<int64_t>(sum.alloc_count), std::to_string(sum.alloc_count))
    << num("final_allocated_bytes", sum.final_allocated_bytes, bytes(sum.final_allocated_bytes))
    << "</tr></table>";
  if (sum.peak_allocated_estimated_blocks)
    s << fmt::format(
        "<p class=\"note\">The allocated peak is estimated: {} blocks live then were freed before "
        "the "
        "snapshot ended, their sizes rounded from the requests.</p>",
        sum.peak_allocated_estimated_blocks);
  s << "<h3>Memory over time</h3>" << timeline_svg(t, d);
  if (auto at = an::peak_point(t, d.id)) {
    const an::LiveBreakdown cat = an::live_at(t, d.id, *at, an::GroupBy::category, 0);
    const an::LiveBreakdown site = an::live_at(t, d.id, *at, an::GroupBy::site, 15);
    s << fmt::format("<h3>Live at the allocated peak ({}, {})</h3>", esc(bytes(cat.bytes)),
                     esc(t.time_text(at->ts)));
    if (const an::CategoryRules* rules = t.category_rules())
      s << "<p class=\"note\">Categories by the rules of " << esc(rules->source()) << "</p>";
    else if (!t.categories_inferred().empty())
      s << "<p class=\"note\">Categories inferred, not recorded: " << esc(t.categories_inferred())
        << "</p>";
    s << "<div class=\"pair\">" << groups_table("category", cat.groups, cat.bytes, "category")
      << groups_table("site", site.groups, site.bytes, "site (your code)") << "</div>";
    if (site.groups_total > site.groups.size())
      s << fmt::format("<p class=\"note\">and {} more sites</p>",
                       site.groups_total - site.groups.size());
  }
  const std::vector<an::StepStats> steps = an::step_stats(t, d.id);
  if (!steps.empty()) {
    s << fmt::format(
        "<h3>Steps ({})</h3><table class=\"steps\"><tr><th>step</th><th>start</th><th>duration</th>"
        "<th>live at start</th><th>peak allocated</th><th>allocations</th><th>syncs</th></tr>",
        steps.size());
    const size_t shown = std::min<size_t>(steps.size(), 100);
    for (size_t i = 0; i < shown; ++i) {
      const an::StepStats& st = steps[i];
      s << "<tr><td>" << st.number << "</td><td>" << esc(an::format_duration(st.start_ns))
        << "</td><td>"
        << esc(t.synthetic_times() ? std::string("-") : an::format_duration(st.duration_ns))
        << "</td>"
        << num("step:" + std::to_string(st.number) + ":allocated_at_start",
               st.allocated_at_start_bytes, bytes(st.allocated_at_start_bytes))
        << num("step:" + std::to_string(st.number) + ":peak_allocated", st.peak_allocated_bytes,
               bytes(st.peak_allocated_bytes))
        << "<td class=\"n\">" << st.alloc_count << "</td><td class=\"n\">" << st.sync_count
        << "</td></tr>";
    }
    s << "</table>";
    if (shown < steps.size())
      s << fmt::format("<p class=\"note\">and {} more steps</p>", steps.size() - shown);
  }
  if (auto rp = an::peak(t, d.id, store::Curve::reserved); rp && rp->bytes > 0) {
    const an::AllocatorState st = an::allocator_state(t, d.id, rp->ts_ns);
    uint64_t reserved = 0, allocated = 0, pending = 0, largest_free = 0;
    std::map<std::string, std::pair<uint64_t, uint64_t>> pools;  // count, bytes
    for (const an::SegmentState& seg : st.segments) {
      reserved += seg.size;
      allocated += seg.allocated_bytes();
      pending += seg.pending_bytes();
      auto& p = pools[seg.pool + " " + seg.kind];
      ++p.first;
      p.second += seg.size;
      uint64_t cursor = seg.addr;
      std::vector<std::pair<uint64_t, uint64_t>> blocks;
      for (const an::BlockState& b : seg.blocks) blocks.emplace_back(b.addr, b.addr + b.size);
      std::sort(blocks.begin(), blocks.end());
      for (const auto& [lo, hi] : blocks) {
        if (lo > cursor) largest_free = std::max(largest_free, lo - cursor);
        cursor = std::max(cursor, hi);
      }
      if (seg.addr + seg.size > cursor)
        largest_free = std::max(largest_free, seg.addr + seg.size - cursor);
    }
    const uint64_t cached = reserved - std::min(reserved, allocated + pending);
    s << fmt::format("<h3>The allocator at the reserved peak ({})</h3>",
                     esc(t.time_text(rp->ts_ns)))
      << "<table "
         "class=\"allocator\"><tr><th>segments</th><th>reserved</th><th>allocated</th><th>cached, "
         "free</th>"
         "<th>largest free block</th></tr><tr>"
      << num("segments", static_cast<int64_t>(st.segments.size()),
             std::to_string(st.segments.size()))
      << num("reserved_at_peak", static_cast<int64_t>(reserved),
             bytes(static_cast<int64_t>(reserved)))
      << num("allocated_at_reserved_peak", static_cast<int64_t>(allocated),
             bytes(static_cast<int64_t>(allocated)))
      << num("cached_at_reserved_peak", static_cast<int64_t>(cached),
             bytes(static_cast<int64_t>(cached)))
      << num("largest_free_block", static_cast<int64_t>(largest_free),
             bytes(static_cast<int64_t>(largest_free)))
      << "</tr></table><p class=\"note\">";
    for (const auto& [name, p] : pools)
      s << esc(fmt::format("{}: {} of {}; ", name, p.first, bytes(static_cast<int64_t>(p.second))));
    s << "</p>";
  }
  s << "</section>";
  return s.str();
}

std::string findings_section(const diagnose::Diagnosis& dx) {
  std::ostringstream s;
  s << fmt::format("<section class=\"findings\"><h2>Diagnoses ({})</h2>", dx.findings.size());
  if (dx.findings.empty())
    s << "<p>No finding: nothing Tidemark checks for is wrong with this run's memory.</p>";
  for (const diagnose::Finding& f : dx.findings) {
    s << fmt::format(
        "<article class=\"finding {}\" data-id=\"{}\"><h3><span class=\"sev\">{}</span> {}</h3>",
        diagnose::severity_name(f.severity), esc(f.id), diagnose::severity_name(f.severity),
        esc(f.title));
    s << "<p class=\"sub\"><code>" << esc(f.id) << "</code> on " << esc(f.device);
    if (!f.site.empty()) s << " &middot; " << esc(f.site);
    s << "</p>";
    if (!f.evidence.empty()) {
      s << "<table class=\"evidence\">";
      for (const auto& [k, v] : f.evidence)
        s << "<tr><td>" << esc(k) << "</td><td>" << esc(v) << "</td></tr>";
      s << "</table>";
    }
    if (!f.fix.empty()) s << "<p class=\"fix\"><b>Fix:</b> " << esc(f.fix) << "</p>";
    s << "</article>";
  }
  if (dx.minor_hidden)
    s << fmt::format(
        "<p class=\"note\">{} minor findings left out (<code>tidemark diagnose --all</code>).</p>",
        dx.minor_hidden);
  s << "</section>";
  return s.str();
}

const char* kStyle = R"(
body{font:14px/1.45 -apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:24px auto;max-width:1040px;color:#1f1f1f;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 6px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}.sub,.note{color:#666;margin:2px 0 8px}
table{border-collapse:collapse;margin:4px 0 8px}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
th{font-weight:600;color:#444;background:#fafafa}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.pair{display:flex;gap:24px;flex-wrap:wrap}.legend span{margin-right:14px;white-space:nowrap}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}
.legend i.solid{border-top:2px solid #1f1f1f;height:0}.legend i.dashed{border-top:2px dashed #7b3294;height:0}
article.finding{border-left:4px solid #bab0ac;padding:2px 12px;margin:10px 0;background:#fcfcfc}
article.major{border-color:#d73027}article.moderate{border-color:#fc8d59}.sev{text-transform:uppercase;font-size:11px;color:#666}
code{font-family:"DejaVu Sans Mono",monospace;font-size:12px}
)";

}  // namespace

int run_report(const ReportArgs& a) {
  an::OutputFile out(a.output, {a.file});  // Note [Output files]
  an::Trace t = open_trace(a.file);
  std::vector<an::DeviceRef> devices = select_devices(t, a.device);
  diagnose::Diagnosis dx;
  {
    Progress p("diagnosing " + a.file);
    dx = diagnose::diagnose(t);
  }
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
       << "<meta name=\"generator\" content=\"tidemark report\">"
       << "<title>Tidemark report: " << esc(a.file) << "</title><style>" << kStyle
       << "</style></head><body>";
  html << "<h1>Memory report: " << esc(a.file) << "</h1>";
  if (!t.estimated().empty())  // every figure below is an estimate: said first
    html << "<p class=\"note\"><b>" << esc(an::estimate_label(t.estimated())) << "</b></p>";
  const std::string command = t.meta_text("command_line");
  html << "<p class=\"sub\">"
       << (command.empty() ? std::string() : "<code>" + esc(command) + "</code> &middot; ")
       << esc(t.synthetic_times() ? std::string("no times in the file")
                                  : an::format_duration(t.duration_ns()))
       << " &middot; " << t.devices().size() << " device" << (t.devices().size() == 1 ? "" : "s")
       << "</p>";
  {
    Progress p("drawing " + a.output);
    for (const an::DeviceRef& d : devices) {
      const an::DeviceSummary s = an::summarize_device(t, d);
      if (s.alloc_count == 0 && s.peak_reserved_bytes == 0) continue;
      html << device_section(t, d);
    }
  }
  html << findings_section(dx);
  html << "<p class=\"note\">Written by <code>tidemark report</code>. Every figure is also in "
          "<code>tidemark summary --json</code> and <code>tidemark diagnose "
          "--json</code>.</p></body></html>\n";
  out.stream() << html.str();
  out.commit();
  fmt::print("{}: wrote {} ({})\n", a.file, a.output,
             an::format_bytes(static_cast<int64_t>(html.str().size())));
  return kExitOk;
}

}  // namespace tidemark::cli
