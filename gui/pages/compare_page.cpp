#include "gui/pages/compare_page.h"

#include <QFileInfo>
#include <QVBoxLayout>

namespace tidemark::gui {

ComparePage::ComparePage(ViewSelection* selection, QueryModePtr mode)
    : Page(selection),
      open_(mode, [this](Compared c) { showOpened(std::move(c)); }),
      diff_(mode, [this](Compared c) { showDifferences(std::move(c)); }) {
  setTitle(tr("Compare"));
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(0, 0, 0, 0);
  label_ = new QLabel;
  label_->setWordWrap(true);
  l->addWidget(label_);
  model_ = make_diff_model(this);
  l->addWidget(new TablePage(QString(), model_, 5, selection));
  // The sites of the differences and the flame graphs, under the new rule.
  connect(selection, &ViewSelection::framesChanged, this, [this] {
    if (other_) differ();
  });
}

void ComparePage::compareWith(const QString& path) {
  label_->setText(tr("Opening %1…").arg(path));
  model_->setRows({});
  diff_.cancel();  // the differences with the trace compared before
  open_.request([path](const auto&) -> Compared {
    try {
      if (!QFileInfo::exists(path)) throw std::runtime_error("no such file");
      return {open_trace_data(path.toStdString()), {}, {}, {}};
    } catch (const std::exception& e) {
      const QString m = QString::fromStdString(e.what());
      return {nullptr, {}, m.contains(path) ? m : path + ": " + m, {}};
    }
  });
}

void ComparePage::showOpened(Compared c) {
  if (!c.data) {
    label_->setText(c.error);
    emit failed(c.error);
    return;
  }
  other_ = c.data;
  selection_->setCompared(other_);
  differ();
}

void ComparePage::differ() {
  // analysis::diff on connections of its own (A's path, B's path), off the GUI thread, both
  // naming sites under the view's rule (Note [Frames in the GUI]).
  const TraceDataPtr& mine = selection_->data();
  const std::string a = mine ? mine->path : std::string(), b = other_->path;
  label_->setText(
      tr("Comparing with %1: computing the differences…").arg(QString::fromStdString(b)));
  diff_.request([a, b, frames = selection_->frames()](const auto&) -> Compared {
    try {
      analysis::Trace ta = analysis::Trace::open(a), tb = analysis::Trace::open(b);
      ta.set_frames(frames);
      tb.set_frames(frames);
      Compared c{nullptr, diff_rows(analysis::diff(ta, tb)), {}, {}};
      for (const analysis::DeviceMatch& m : analysis::match_devices(ta, tb))
        if (m.a && m.b) {
          const analysis::FlameNode fa = analysis::flame_at_peak(ta, m.a->id),
                                    fb = analysis::flame_at_peak(tb, m.b->id);
          c.flames.push_back({m.name, analysis::flame_diff(fa, fb), analysis::flame_diff(fb, fa)});
        }
      return c;
    } catch (const std::exception& e) {
      return {nullptr, {}, QString::fromStdString(e.what()), {}};
    }
  });
}

void ComparePage::showDifferences(Compared c) {
  if (!c.error.isEmpty()) {
    label_->setText(c.error);
    return;
  }
  model_->setRows(std::move(c.rows));
  const TraceDataPtr& mine = selection_->data();
  label_->setText(
      tr("<b>A</b> %1 (solid) vs <b>B</b> %2 (dashed): what grew or shrank at the allocated "
         "peak, B - A (as <tt>tidemark diff</tt>).")
          .arg(QString::fromStdString(mine ? mine->path : std::string()).toHtmlEscaped(),
               QString::fromStdString(other_ ? other_->path : std::string()).toHtmlEscaped()));
  selection_->setFlameDiffs(std::move(c.flames));
}

}  // namespace tidemark::gui
