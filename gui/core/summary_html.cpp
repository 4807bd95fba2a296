#include "gui/core/summary_html.h"

#include "gui/core/table_models.h"

namespace tidemark::gui {

namespace {
QString esc(const std::string& s) {
  return QString::fromStdString(s).toHtmlEscaped();
}
}  // namespace

QString summary_html(const TraceData& data) {
  const analysis::Summary& s = data.summary;
  QString h;
  h += "<h2>" + esc(data.path) + "</h2>";
  h += QString("<p>%1 events over %2, %3 steps%4%5</p>")
           .arg(s.event_count)
           .arg(duration_text(s.duration_ns))
           .arg(s.step_count)
           .arg(s.dropped_count ? QString(", <b>%1 dropped</b>").arg(s.dropped_count) : "")
           .arg(s.clean_end ? "" : ", <b>the recording did not end cleanly</b>");
  if (!s.command_line.empty()) h += "<p><tt>" + esc(s.command_line) + "</tt></p>";
  h += "<table border=1 cellspacing=0 cellpadding=4><tr><th>device</th><th>peak allocated</th>"
       "<th>at</th><th>peak reserved</th><th>peak active</th><th>final allocated</th>"
       "<th>allocs</th><th>segments</th><th>syncs</th><th>leaked</th><th>OOMs</th></tr>";
  for (const analysis::DeviceSummary& d : data.device_summaries) {
    h += QString(
             "<tr><td>%1</td><td align=right>%2</td><td align=right>%3</td>"
             "<td align=right>%4</td><td align=right>%5</td><td align=right>%6</td>"
             "<td align=right>%7</td><td align=right>%8</td><td align=right>%9</td>"
             "<td align=right>%10</td><td align=right>%11</td></tr>")
             .arg(esc(d.description.empty() ? d.device : d.description))
             .arg(bytes_text(d.peak_allocated_bytes), duration_text(d.peak_allocated_time_ns),
                  bytes_text(d.peak_reserved_bytes), bytes_text(d.peak_active_bytes),
                  bytes_text(d.final_allocated_bytes))
             .arg(d.alloc_count)
             .arg(d.segment_alloc_count)
             .arg(d.sync_count)
             .arg(QString("%1 in %2").arg(bytes_text(d.leaked_bytes)).arg(d.leaked_count))
             .arg(d.oom_count);
  }
  h += "</table>";
  if (s.top_at_peak) {
    h += QString("<h3>Live at the %1 peak (%2, by site)</h3><ol>")
             .arg(esc(s.top_at_peak->device), bytes_text(s.top_at_peak->bytes));
    for (const analysis::Group& g : s.top_at_peak->groups)
      h += QString("<li>%1 in %2 &mdash; %3</li>")
               .arg(bytes_text(g.bytes))
               .arg(g.count)
               .arg(esc(g.label));
    h += "</ol>";
  }
  const analysis::Diagnosis& dx = data.diagnosis;
  h += QString("<h3>Findings (%1)</h3>").arg(dx.findings.size());
  if (dx.findings.empty()) h += "<p>No pitfall found.</p>";
  for (const analysis::Finding& f : dx.findings) {
    h += QString("<p><b>[%1] %2</b> (%3)").arg(esc(f.id), esc(f.title), esc(f.device));
    if (!f.site.empty()) h += "<br>at " + esc(f.site);
    h += "<ul>";
    for (const auto& [what, value] : f.evidence)
      h += "<li>" + esc(what) + ": " + esc(value) + "</li>";
    h += "</ul>Fix: " + esc(f.fix) + "</p>";
  }
  if (!dx.skipped.empty()) {
    h += "<p><i>Not checked:</i><ul>";
    for (const analysis::SkippedDetector& k : dx.skipped)
      h += "<li>" + esc(k.id) + ": " + esc(k.reason) + "</li>";
    h += "</ul></p>";
  }
  return h;
}

}  // namespace tidemark::gui
