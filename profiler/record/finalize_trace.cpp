// finalize_trace: store::finalize with stacks symbolized from the module list in the file.
#include <algorithm>
#include <memory>

#include "profiler/record/recorder.h"
#include "profiler/record/stacks.h"
#include "profiler/store/trace_reader.h"
#include "profiler/store/trace_writer.h"

namespace tidemark::record {

void finalize_trace(const std::string& path) {
  // An older trace finalize upgrades is accepted: the module list is a raw table.
  std::vector<store::ModuleInfo> modules =
      store::TraceReader::open(path, store::TraceReader::Require::upgradable).modules();
  // Modules are stored at start and again at stop (for libraries loaded meanwhile).
  std::sort(modules.begin(), modules.end(), [](const auto& a, const auto& b) {
    return std::tie(a.start, a.end, a.path) < std::tie(b.start, b.end, b.path);
  });
  modules.erase(std::unique(modules.begin(), modules.end(),
                            [](const auto& a, const auto& b) {
                              return a.start == b.start && a.end == b.end && a.path == b.path;
                            }),
                modules.end());
  store::FinalizeOptions options;
  if (!modules.empty()) {
    auto symbolizer = std::make_shared<Symbolizer>(std::move(modules));
    options.symbolize = [symbolizer](uint64_t ip) { return symbolizer->resolve(ip); };
  }
  store::finalize(path, options);
}

}  // namespace tidemark::record
