#include "gui/pages/source_lines.h"

#include <QComboBox>
#include <QHeaderView>
#include <QLabel>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>

#include "profiler/analysis/memory.h"

namespace tidemark::gui {

std::vector<std::pair<std::string, int64_t>> files_at_peak(const analysis::Trace& trace,
                                                           int64_t device) {
  const std::optional<analysis::TimePoint> at = analysis::peak_point(trace, device);
  if (!at) return {};
  std::map<std::string, int64_t> bytes;
  for (const store::AllocationRow& a : analysis::live_allocations(trace, device, *at)) {
    const std::optional<store::ResolvedFrame> f = trace.site_frame(a.stack_id);
    if (f && !f->file.empty()) bytes[f->file] += static_cast<int64_t>(a.size);
  }
  std::vector<std::pair<std::string, int64_t>> out(bytes.begin(), bytes.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

SourceLines source_lines(analysis::Trace& trace, int64_t device, const std::string& file) {
  SourceLines out;
  out.file = file;
  if (const analysis::DeviceRef* d = trace.device_by_id(device)) out.device = d->name;
  const std::optional<analysis::TimePoint> at = analysis::peak_point(trace, device);
  if (!at || file.empty()) return out;
  // GroupBy::line under the file (Note [Source lines]); the trace's own setting is restored.
  const std::string before = trace.source_file();
  trace.set_source_file(file);
  analysis::LiveBreakdown live;
  try {
    live = analysis::live_at(trace, device, *at, analysis::GroupBy::line, 0);
  } catch (...) {
    trace.set_source_file(before);
    throw;
  }
  trace.set_source_file(before);
  out.peak_bytes = live.bytes;
  std::map<int, SourceLineRow> by_line;
  for (const analysis::Group& g : live.groups) {
    // The key is "base:line", or "(not in FILE)" for what has no frame in the file.
    const size_t colon = g.key.rfind(':');
    int line = 0;
    const char* end = g.key.data() + g.key.size();
    if (colon == std::string::npos ||
        std::from_chars(g.key.data() + colon + 1, end, line).ptr != end || line <= 0) {
      out.outside_bytes += g.bytes;
      continue;
    }
    SourceLineRow& r = by_line[line];
    r.line = line;
    r.bytes += g.bytes;
    r.count += g.count;
    if (r.function.empty()) r.function = g.label.substr(0, g.label.rfind(" ("));
  }
  std::ifstream in(file);
  if (in) {
    out.text_read = true;
    int n = 0;
    for (std::string text; std::getline(in, text);) {
      auto it = by_line.find(++n);
      SourceLineRow r = it != by_line.end() ? it->second : SourceLineRow{};
      r.line = n;
      r.text = std::move(text);
      out.rows.push_back(std::move(r));
      if (it != by_line.end()) by_line.erase(it);
    }
  }
  // Lines the file does not have (it changed since the run), or every line when unread.
  for (auto& [line, r] : by_line) out.rows.push_back(std::move(r));
  return out;
}

namespace {
QString text(const std::string& s) {
  return QString::fromStdString(s);
}
}  // namespace

SourceLinesPanel::SourceLinesPanel(QueryModePtr mode, QWidget* parent)
    : QWidget(parent), query_(std::move(mode), [this](Answer a) { show(std::move(a)); }) {
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(0, 0, 0, 0);
  files_ = new QComboBox;
  files_->setEditable(true);  // any file, as --file takes it: a path or its last components
  files_->setToolTip(
      tr("The source file whose lines are shown: the files of the sites live at the peak, "
         "or any path or file name the frames name"));
  note_ = new QLabel;
  note_->setWordWrap(true);
  std::vector<TableColumn<SourceLineRow>> cols = {
      {tr("Line"), [](const SourceLineRow& r) { return QVariant(r.line); },
       [](const SourceLineRow& r) { return QVariant(r.line); }},
      {tr("Bytes"),
       [](const SourceLineRow& r) { return r.bytes ? QVariant(bytes_text(r.bytes)) : QVariant(); },
       [](const SourceLineRow& r) { return QVariant(qlonglong(r.bytes)); }},
      {tr("Count"),
       [](const SourceLineRow& r) { return r.count ? QVariant(qulonglong(r.count)) : QVariant(); },
       [](const SourceLineRow& r) { return QVariant(qulonglong(r.count)); }},
      {tr("Source"),
       [](const SourceLineRow& r) { return QVariant(text(r.text.empty() ? r.function : r.text)); },
       {}},
  };
  model_ = new RowTableModel<SourceLineRow>(
      std::move(cols),
      [](const SourceLineRow&) { return std::make_pair(uint64_t(0), uint64_t(0)); }, this);
  table_ = new QTableView;
  QTableView* table = table_;
  table->setModel(model_);
  table->verticalHeader()->hide();
  table->verticalHeader()->setDefaultSectionSize(table->fontMetrics().height() + 2);
  table->setWordWrap(false);
  table->horizontalHeader()->setStretchLastSection(true);
  table->setSelectionBehavior(QAbstractItemView::SelectRows);
  QFont mono("monospace");
  mono.setStyleHint(QFont::TypeWriter);
  table->setFont(mono);
  table->verticalHeader()->setDefaultSectionSize(QFontMetrics(mono).height() + 2);
  l->addWidget(files_);
  l->addWidget(note_);
  l->addWidget(table);
  connect(files_, &QComboBox::textActivated, this, &SourceLinesPanel::showFile);
}

void SourceLinesPanel::setData(const TraceDataPtr& data) {
  data_ = data;
  if (!data || data->stage == Stage::opened || !data->session || data->devices.empty()) return;
  query_.request([data](const auto&) {
    return data->session->with_mutable([&](analysis::Trace& trace) {
      trace.set_frames(data->frames);
      Answer a;
      // The device the commands show by default: the highest allocated peak.
      const analysis::DeviceRef* d = analysis::busiest_device(trace);
      if (d == nullptr) return a;
      const int64_t device = d->id;
      a.files = files_at_peak(trace, device);
      a.lines =
          source_lines(trace, device, a.files.empty() ? std::string() : a.files.front().first);
      return a;
    });
  });
}

void SourceLinesPanel::showFile(const QString& file) {
  if (!data_ || !data_->session || file.isEmpty()) return;
  const TraceDataPtr data = data_;
  const std::string want = file.toStdString();
  int64_t device = data->devices.empty() ? 0 : data->devices.front().id;
  for (const analysis::DeviceRef& d : data->devices)
    if (d.name == shown_.device) device = d.id;
  query_.request([data, device, want](const auto&) {
    return data->session->with_mutable([&](analysis::Trace& trace) {
      trace.set_frames(data->frames);
      Answer a;
      a.lines = source_lines(trace, device, want);
      return a;
    });
  });
}

void SourceLinesPanel::show(Answer a) {
  if (!a.files.empty() || files_->count() == 0) {
    const QSignalBlocker quiet(files_);
    files_->clear();
    for (const auto& [file, bytes] : a.files)
      files_->addItem(text(file), QVariant(qlonglong(bytes)));
  }
  shown_ = std::move(a.lines);
  if (shown_.file.empty()) {
    note_->setText(tr("No allocation live at the peak has a source file."));
  } else {
    const QString base = text(shown_.file).section('/', -1);
    QString n = tr("%1 of %2 live at the %3 peak allocated under %4")
                    .arg(bytes_text(shown_.peak_bytes - shown_.outside_bytes),
                         bytes_text(shown_.peak_bytes), text(shown_.device), base);
    note_->setToolTip(text(shown_.file));
    if (!shown_.text_read)
      n += tr("; its text is not here, so only the lines with bytes are listed");
    note_->setText(n);
    const QSignalBlocker quiet(files_);
    files_->setCurrentText(text(shown_.file));
  }
  model_->setRows(shown_.rows);
  table_->resizeColumnsToContents();
  // The first line that holds bytes, in view.
  for (size_t i = 0; i < shown_.rows.size(); ++i)
    if (shown_.rows[i].bytes > 0) {
      table_->scrollTo(model_->index(int(i), 0), QAbstractItemView::PositionAtTop);
      break;
    }
}

}  // namespace tidemark::gui
