// JSON for the analysis results (nlohmann::json), as `tidemark ... --json` prints them. The
// field names are the contract documented in docs/cli.md; times ending in `_ns` are relative
// to the trace origin unless they end in `_ts_ns` (absolute event-clock time).
#pragma once

#include <nlohmann/json.hpp>

#include "profiler/analysis/diff.h"
#include "profiler/analysis/memory.h"
#include "profiler/analysis/steps.h"

namespace tidemark::analysis {

// Of the JSON output, not the trace. 2: `diagnose` gives each finding a severity and a share
// and leaves minor findings out unless --all (docs/cli.md).
inline constexpr int kJsonSchemaVersion = 2;

void to_json(nlohmann::json& j, const Group& g);
void to_json(nlohmann::json& j, const LiveBreakdown& b);
void to_json(nlohmann::json& j, const LeakReport& r);
void to_json(nlohmann::json& j, const DeviceSummary& s);
void to_json(nlohmann::json& j, const Summary& s);
void to_json(nlohmann::json& j, const StepStats& s);
void to_json(nlohmann::json& j, const Growth& g);
void to_json(nlohmann::json& j, const SyncReport& r);
void to_json(nlohmann::json& j, const Timeline& t);
void to_json(nlohmann::json& j, const TraceDiff& d);

}  // namespace tidemark::analysis
