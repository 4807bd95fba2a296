#include "gui/pages/what_if.h"

#include <QObject>
#include <exception>

#include "profiler/analysis/trace.h"
#include "profiler/naming/units.h"
#include "profiler/replay/replay.h"

namespace tidemark::gui {

QString replay_to_file(const QString& trace_path, const WhatIf& what, const QString& output) {
  try {
    analysis::Trace trace = analysis::Trace::open(trace_path.toStdString());
    std::vector<replay::Plan> plans = replay::build_plans(trace);
    replay::Settings settings;
    settings.conf = what.alloc_conf.trimmed().isEmpty()
                        ? plans.front().recorded
                        : replay::parse_alloc_conf(what.alloc_conf.toStdString());
    if (!what.capacity.trimmed().isEmpty()) {
      auto bytes = analysis::parse_size(what.capacity.trimmed().toStdString());
      if (!bytes)
        return QObject::tr("capacity %1: expected a size such as 80GB or 40GiB").arg(what.capacity);
      settings.capacity = *bytes;
    }
    replay::write_replayed_trace(trace, plans, settings, output.toStdString());
    return {};
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what()).replace('\n', ' ');
  }
}

}  // namespace tidemark::gui
