#include "gui/models/summary_html.h"

#include "gui/models/table_models.h"

namespace tidemark::gui {

namespace {
QString esc(const std::string& s) {
  return QString::fromStdString(s).toHtmlEscaped();
}

// Tensors as a table, `highlight` (the one that kept a block alive longest) marked.
template <class Rel>
QString tensor_table(const std::vector<analysis::TensorRecord>& tensors,
                     std::optional<size_t> highlight, const Rel& rel) {
  if (tensors.empty()) return {};
  QString h =
      "<table border=1 cellspacing=0 cellpadding=2><tr><th>tensor</th><th>view of</th>"
      "<th>op</th><th>sizes</th><th>dtype</th><th>created</th><th>released</th>"
      "<th>site</th></tr>";
  for (size_t i = 0; i < tensors.size(); ++i) {
    const analysis::TensorRecord& t = tensors[i];
    h += QString(
             "<tr%1><td>%2</td><td>%3</td><td>%4</td><td>%5</td><td>%6</td><td>%7</td>"
             "<td>%8</td><td>%9</td></tr>")
             .arg(highlight && *highlight == i ? " bgcolor=#ffe8a0" : "")
             .arg(t.tensor_id)
             .arg(t.is_view() ? QString::number(t.base_id) : QString("-"))
             .arg(esc(t.op), esc(t.sizes), esc(t.dtype), rel(t.create_ts),
                  t.release_ts ? rel(*t.release_ts) : QString("never"), esc(t.site));
  }
  return h + "</table>";
}

}  // namespace

QString summary_html(const TraceData& data) {
  const analysis::Summary& s = data.summary;
  QString h;
  h += "<h2>" + esc(data.shown_path()) + "</h2>";
  if (data.stage == Stage::opened)
    return h + "<p><i>computing the summary, tables and findings…</i></p>";
  h += QString("<p>%1 events over %2, %3 steps%4%5</p>")
           .arg(s.event_count)
           .arg(s.synthetic_times ? QString("a snapshot without times (events in order)")
                                  : duration_text(s.duration_ns))
           .arg(s.step_count)
           .arg(s.dropped_count ? QString(", <b>%1 dropped</b>").arg(s.dropped_count) : "")
           .arg(s.clean_end ? "" : ", <b>the recording did not end cleanly</b>");
  if (!s.command_line.empty()) h += "<p><tt>" + esc(s.command_line) + "</tt></p>";
  if (!s.estimated.empty())  // every figure is an estimate: said first
    h += "<p><b>" + esc(analysis::estimate_label(s.estimated)) + "</b></p>";
  h += "<table border=1 cellspacing=0 cellpadding=4><tr><th>device</th><th>peak allocated</th>"
       "<th>at</th><th>peak reserved</th><th>peak active</th><th>final allocated</th>"
       "<th>allocs</th><th>segments</th><th>syncs</th><th>" +
       QString(s.imported_snapshot ? "live at the end of the snapshot" : "leaked") +
       "</th><th>OOMs</th></tr>";
  for (const analysis::DeviceSummary& d : data.summary.devices) {
    h += QString(
             "<tr><td>%1</td><td align=right>%2</td><td align=right>%3</td>"
             "<td align=right>%4</td><td align=right>%5</td><td align=right>%6</td>"
             "<td align=right>%7</td><td align=right>%8</td><td align=right>%9</td>"
             "<td align=right>%10</td><td align=right>%11</td></tr>")
             .arg(esc(d.description.empty() ? d.device : d.description))
             .arg(bytes_text(d.peak_allocated_bytes) +
                      (d.peak_allocated_estimated_blocks ? QString(" (estimated)") : QString()),
                  QString::fromStdString(data.time_text(d.peak_allocated_time_ns)),
                  bytes_text(d.peak_reserved_bytes), bytes_text(d.peak_active_bytes),
                  bytes_text(d.final_allocated_bytes))
             .arg(d.alloc_count)
             .arg(d.segment_alloc_count)
             .arg(d.sync_count)
             .arg(QString("%1 in %2").arg(bytes_text(d.leaked_bytes)).arg(d.leaked_count))
             .arg(d.oom_count);
  }
  h += "</table>";
  // The sites of a peak, as `tidemark summary` lists them.
  auto sites = [&](const QString& title, const analysis::LiveBreakdown& b, const QString& unit) {
    // Note [Frames in the GUI]: under All frames a site may be a library's innermost frame.
    h += QString("<h3>%1 (%2, by site%3)</h3><ol>")
             .arg(title, bytes_text(b.bytes),
                  data.frames == analysis::Frames::all ? ", the innermost of all frames" : "");
    for (const analysis::Group& g : b.groups)
      h += QString("<li>%1 in %2 %3 &mdash; %4</li>")
               .arg(bytes_text(g.bytes))
               .arg(g.count)
               .arg(unit, esc(g.label));
    h += "</ol>";
  };
  if (s.top_at_peak)
    sites(QString("Live at the %1 peak").arg(esc(s.top_at_peak->device)), *s.top_at_peak,
          "allocations");
  if (s.categories_at_peak) {  // what kind of memory the peak is, as `tidemark summary` says
    QStringList parts;
    for (const analysis::Group& g : s.categories_at_peak->groups)
      parts << QString("%1 %2").arg(esc(g.label), bytes_text(g.bytes));
    h += "<p>By category: " + parts.join(", ") + "</p>";
    if (data.category_rules)  // custom categories (Note [Category rules]) say whose they are
      h += "<p><i>Categories by the rules of " + esc(data.category_rules->source()) + ".</i></p>";
    else if (!s.categories_inferred.empty())  // an imported snapshot's: Note [Inferred categories]
      h += "<p><i>Categories inferred, not recorded: from " + esc(s.categories_inferred) +
           ".</i></p>";
  }
  // What made reserved memory grow: for a CUDA-injected trace (PyTorch's segments only) the
  // one list of sites there is.
  if (s.reserved_at_peak)
    sites(QString("Reserved at the %1 reserved peak").arg(esc(s.reserved_at_peak->device)),
          *s.reserved_at_peak, "segments");
  if (!data.late_error.empty())
    h += "<p><b>Could not compute everything:</b> " + esc(data.late_error) + "</p>";
  if (data.stage == Stage::tables) h += "<h3>Findings</h3><p><i>computing…</i></p>";
  if (data.stage != Stage::complete) return h;
  const diagnose::Diagnosis& dx = data.diagnosis;
  h += QString("<h3>Findings (%1)</h3>").arg(dx.findings.size());
  if (dx.findings.empty()) h += "<p>No pitfall found.</p>";
  for (const diagnose::Finding& f : dx.findings) {
    h += QString("<p><b>[%1] %2</b> (%3; %4)")
             .arg(esc(f.id), esc(f.title), esc(f.device),
                  esc(std::string(diagnose::severity_name(f.severity))));
    if (!f.site.empty()) h += "<br>at " + esc(f.site);
    h += "<ul>";
    for (const auto& [what, value] : f.evidence)
      h += "<li>" + esc(what) + ": " + esc(value) + "</li>";
    h += "</ul>Fix: " + esc(f.fix) + "</p>";
  }
  if (dx.minor_hidden)
    h += QString(
             "<p><i>%1 minor finding%2 not shown: little at stake against the peak or the "
             "run (<tt>tidemark diagnose --all</tt> shows them).</i></p>")
             .arg(dx.minor_hidden)
             .arg(dx.minor_hidden == 1 ? "" : "s");
  if (!dx.skipped.empty()) {
    h += "<p><i>Not checked:</i><ul>";
    for (const diagnose::SkippedDetector& k : dx.skipped)
      h += "<li>" + esc(k.id) + ": " + esc(k.reason) + "</li>";
    h += "</ul></p>";
  }
  return h;
}

QString follow_html(const TraceData& data) {
  QString h = "<h2>" + esc(data.path) + "</h2>";
  h += QString("<p><b>Following a recording in progress</b>: %1 so far.</p><ul>")
           .arg(duration_text(data.end_ns - data.origin_ns));
  for (size_t d = 0; d < data.devices.size(); ++d) {
    if (d >= data.peaks.size() || !data.peaks[d]) continue;
    h += QString("<li>%1: allocated peak %2 at %3")
             .arg(esc(data.devices[d].name), bytes_text(data.peaks[d]->bytes),
                  duration_text(data.peaks[d]->ts_ns - data.origin_ns));
    if (d < data.live_growth.size() && data.live_growth[d].growing) {
      const analysis::Growth& g = data.live_growth[d];
      const bool reserved = d < data.live_growth_reserved.size() && data.live_growth_reserved[d];
      h += QString(
               "<br><b>%1 memory at the start of a step grows by about %2 per step</b> "
               "(steps %3 to %4): something keeps memory alive across steps")
               .arg(reserved ? "reserved" : "live")
               .arg(bytes_text(int64_t(g.slope_bytes_per_step)))
               .arg(g.boundaries.front().first)
               .arg(g.boundaries.back().first);
    }
    h += "</li>";
  }
  if (!data.steps.empty())
    h += QString("<li>%1 steps so far (the timeline marks them)</li>").arg(data.steps.size());
  return h +
         "</ul><p>The tables, the findings and the allocator state appear once the recording "
         "is finalized (when it stops, or <tt>tidemark finalize FILE</tt> after a crash).</p>";
}

QString details_html(const analysis::AllocationDetails& d, uint64_t origin_ns) {
  const store::AllocationRow& r = d.row;
  auto rel = [&](uint64_t ts) { return duration_text(ts >= origin_ns ? ts - origin_ns : 0); };
  QString h = QString("<h3>Allocation of %1 at 0x%2 (%3)</h3><table>")
                  .arg(bytes_text(int64_t(r.size)), QString::number(r.addr, 16), esc(d.device));
  auto row = [&](const QString& k, const QString& v) {
    h += "<tr><td><b>" + k + "</b></td><td>" + v + "</td></tr>";
  };
  row("requested", bytes_text(int64_t(r.requested_size)));
  row("rounded",
      bytes_text(int64_t(r.size)) + (r.size > r.requested_size
                                         ? QString(" (%1 lost to rounding)")
                                               .arg(bytes_text(int64_t(r.size - r.requested_size)))
                                         : QString()));
  row("allocated at", rel(r.alloc_ts));
  row("freed at", r.free_requested_ts ? rel(*r.free_requested_ts) : QString("never (leaked)"));
  if (r.free_completed_ts && r.free_requested_ts && *r.free_completed_ts > *r.free_requested_ts)
    row("reusable at", rel(*r.free_completed_ts));
  row("lifetime", d.lifetime_ns ? duration_text(*d.lifetime_ns) : QString("to the end"));
  row("stream", QString::number(r.stream));
  row("pool", r.pool == events::Pool::large ? "large" : "small");
  row("category", esc(std::string(events::category_name(r.category))));
  row("scope", r.scope.empty() ? QString("(none)") : esc(r.scope));
  row("site", esc(d.site.label));
  h += "</table><h4>Stack</h4><ol>";
  for (const std::string& f : d.frames) h += "<li>" + esc(f) + "</li>";
  if (d.frames.empty()) h += "<li><i>no stack recorded</i></li>";
  h += "</ol>";
  h += QString("<h4>Tensors and views sharing its storage (%1)</h4>").arg(d.tensors.size());
  if (d.kept_alive_by) {
    const analysis::TensorRecord& k = d.tensors[*d.kept_alive_by];
    h += QString("<p>Kept alive longest by <b>%1 %2</b> %3 %4%5, released %6.</p>")
             .arg(k.is_view() ? "view" : "tensor")
             .arg(k.tensor_id)
             .arg(esc(k.op), esc(k.sizes))
             .arg(k.is_view() ? QString(" (a view of tensor %1)").arg(k.base_id) : QString())
             .arg(k.release_ts ? "at " + rel(*k.release_ts) : QString("never"));
  }
  if (d.tensors.empty()) h += "<p><i>No tensor recorded in this block.</i></p>";
  h += tensor_table(d.tensors, d.kept_alive_by, rel);
  return h;
}

QString tensor_details_html(const analysis::TensorDetails& d, uint64_t origin_ns) {
  const analysis::TensorRecord& t = d.tensor;
  auto rel = [&](uint64_t ts) { return duration_text(ts >= origin_ns ? ts - origin_ns : 0); };
  QString h = QString("<h3>%1 %2: %3 %4 (%5)</h3><table>")
                  .arg(t.is_view() ? "View" : "Tensor")
                  .arg(t.tensor_id)
                  .arg(esc(t.dtype), esc(t.sizes), esc(d.device));
  auto row = [&](const QString& k, const QString& v) {
    h += "<tr><td><b>" + k + "</b></td><td>" + v + "</td></tr>";
  };
  row("sizes", esc(t.sizes));
  row("strides", esc(t.strides));
  row("storage offset", QString::number(t.storage_offset));
  row("dtype", esc(t.dtype));
  row("created by", esc(t.op));
  if (t.is_view()) row("view of", QString("tensor %1").arg(t.base_id));
  row("created at", rel(t.create_ts));
  row("released at", t.release_ts ? rel(*t.release_ts) : QString("never (alive at the end)"));
  row("lifetime", d.lifetime_ns ? duration_text(*d.lifetime_ns) : QString("to the end"));
  row("storage", QString("%1 at 0x%2 (storage %3)")
                     .arg(bytes_text(int64_t(d.storage_nbytes)))
                     .arg(QString::number(d.storage_addr, 16))
                     .arg(t.storage_id));
  if (d.allocation) {
    const store::AllocationRow& a = d.allocation->row;
    row("allocation",
        QString("%1 block at 0x%2, allocated at %3, %4")
            .arg(bytes_text(int64_t(a.size)), QString::number(a.addr, 16), rel(a.alloc_ts),
                 a.free_requested_ts ? "freed at " + rel(*a.free_requested_ts)
                                     : QString("never freed")));
    row("category", esc(std::string(events::category_name(a.category))));
    row("scope", a.scope.empty() ? QString("(none)") : esc(a.scope));
    row("stream", QString::number(a.stream));
  } else {
    row("allocation", "<i>not found (no storage event, or lost events)</i>");
  }
  row("site", esc(t.site));
  h += "</table><h4>Stack (creation)</h4><ol>";
  for (const std::string& f : d.frames) h += "<li>" + esc(f) + "</li>";
  if (d.frames.empty()) h += "<li><i>no stack recorded</i></li>";
  h += "</ol>";
  h += QString("<h4>Views of it (%1)</h4>").arg(d.views.size());
  if (d.views.empty()) h += "<p><i>none</i></p>";
  h += tensor_table(d.views, std::nullopt, rel);
  if (d.allocation) {
    h += QString("<h4>Tensors and views sharing its block (%1)</h4>")
             .arg(d.allocation->tensors.size());
    h += tensor_table(d.allocation->tensors, d.allocation->kept_alive_by, rel);
  }
  return h;
}

}  // namespace tidemark::gui
