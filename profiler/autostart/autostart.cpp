// Linked into a program through Tidemark::autostart: records the whole run when
// TIDEMARK_OUTPUT is set (what `tidemark record` does), and finalizes the trace at exit.
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "profiler/record/recorder.h"

namespace {

// Note [Recording up to a crash]: a program that dies of an uncaught exception (an
// OutOfMemoryError, most of all) never reaches atexit, and the events still in the recorder's
// buffers -- the `oom` event that explains the death among them -- would be lost. std::terminate
// runs this first: it commits what was emitted (the caller, `tidemark record`, finalizes the
// file after the process is gone), then lets the previous handler abort as it would have.
std::terminate_handler g_previous_terminate = nullptr;

[[noreturn]] void commit_then_terminate() {
  static bool once = false;  // a throw from inside flush must not loop back here
  if (!once) {
    once = true;
    try {
      tidemark::record::flush(true);
    } catch (...) {
    }
  }
  if (g_previous_terminate) g_previous_terminate();
  std::abort();
}

struct Autostart {
  Autostart() {
    const char* out = std::getenv("TIDEMARK_OUTPUT");
    if (!out || !*out) return;
    try {
      tidemark::record::start(tidemark::record::options_from_env());
      std::atexit([] { tidemark::record::stop(); });
      g_previous_terminate = std::set_terminate(commit_then_terminate);
    } catch (const std::exception& e) {
      // Recording is a diagnostic: say why it is off and let the program run.
      std::fprintf(stderr, "%s\n", e.what());
    }
  }
};

const Autostart g_autostart;

}  // namespace
