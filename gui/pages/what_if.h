// What-if (Tools > What-if replay, docs/gui.md): a trace replayed through the caching allocator
// under other PYTORCH_CUDA_ALLOC_CONF settings or another capacity (profiler/replay), written
// as a trace the window opens in Compare with the recording, so the replayed reserved curve
// lies over the recorded one and the differences are listed.
#pragma once

#include <QString>

namespace tidemark::gui {

struct WhatIf {
  QString alloc_conf;  // PYTORCH_CUDA_ALLOC_CONF syntax; empty: the recorded settings
  QString capacity;    // a size ("80GB"); empty: the recorded device's
};

// Replays `trace` under `settings` into `output` (replacing it). Returns "" on success, else
// the problem on one line (a setting PyTorch refuses, an unreadable trace, a trace without
// allocations). Blocks: the window runs it off the GUI thread.
QString replay_to_file(const QString& trace, const WhatIf& settings, const QString& output);

}  // namespace tidemark::gui
