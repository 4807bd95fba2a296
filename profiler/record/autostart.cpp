// Linked into a program through Tidemark::autostart: records the whole run when
// TIDEMARK_OUTPUT is set (what `tidemark record` does), and finalizes the trace at exit.
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "profiler/record/recorder.h"

namespace {

struct Autostart {
  Autostart() {
    const char* out = std::getenv("TIDEMARK_OUTPUT");
    if (!out || !*out) return;
    try {
      tidemark::record::start(tidemark::record::options_from_env());
      std::atexit([] { tidemark::record::stop(); });
    } catch (const std::exception& e) {
      // Recording is a diagnostic: say why it is off and let the program run.
      std::fprintf(stderr, "%s\n", e.what());
    }
  }
};

const Autostart g_autostart;

}  // namespace
