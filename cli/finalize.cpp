// tidemark finalize: builds a recorded trace's derived tables (docs/cli.md).
#include <fmt/core.h>

#include <iostream>
#include <map>
#include <optional>
#include <string>

#include "cli/commands.h"
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

int run_finalize(const std::string& file, bool force) {
  // Checks the file (its meta included) and names the problem before anything is written; a
  // trace of an older schema is upgraded.
  int version = 0;
  {
    const auto r = store::TraceReader::open(file, store::TraceReader::Require::upgradable);
    version = r.schema_version();
    const store::TraceMeta m = r.meta();
    // Finalizing a trace still being written would break the recording (Note [Live
    // recordings]); --force for a pid that now names another process.
    const RecordingProcesses p = recording_processes(m.host, m.pid, m.finalizer_pid);
    if (!force && !r.finalized() && p.alive_pid != 0) {
      throw UsageError(
          fmt::format("{}: still being recorded: {}; finalize it once that process has ended, "
                      "or with --force if pid {} is not it",
                      file, p.who(), p.alive_pid));
    }
  }
  {
    Progress p("finalizing " + file);
    record::finalize_trace(file);
  }
  an::Trace t = open_trace(file);
  fmt::print(
      "{}: finalized ({} events){}\n", file, t.reader().event_count(),
      version != store::kSchemaVersion
          ? fmt::format("; upgraded from schema version {} to {}", version, store::kSchemaVersion)
          : "");
  return kExitOk;
}

}  // namespace tidemark::cli
