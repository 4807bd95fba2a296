// The Summary view's content: peaks and counts per device (analysis::summarize) and the
// findings of analysis::diagnose() -- the same as `tidemark summary` and `tidemark diagnose`.
#pragma once

#include <QString>

#include "gui/core/trace_data.h"

namespace tidemark::gui {

QString summary_html(const TraceData& data);

}  // namespace tidemark::gui
