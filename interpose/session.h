// The recording inside someone else's process: started once, by whichever injection entry
// point runs first (NVTX's or CUDA's), with the recorder and trace format of tensorlib
// programs; stopped at exit after the CUPTI buffers were flushed.
#pragma once

#include <string>

namespace tidemark::interpose {

// Starts the recorder (idempotent, thread-safe, never throws). The trace is TIDEMARK_OUTPUT
// ("%p": the pid, "%r": the rank; Note [Output patterns]), default tidemark-<pid>.db. A process
// other than the one `tidemark record` started (TIDEMARK_ROOT_PID) writes <stem>-<pid><ext>
// (unless the name has %p or %r) and finalizes it itself. Returns false,
// having printed one line saying why, when recording is off.
bool ensure_recording() noexcept;

// The trace path this process uses (after ensure_recording()).
std::string trace_path();

// Native frames per stack of this recording (0: stacks off, or not recording).
int stack_depth() noexcept;

// Called at exit before the recorder stops (flushes CUPTI and drains its buffers).
void set_before_stop(void (*hook)()) noexcept;

// Prints the one line "tidemark: <message>" on stderr.
void warn(const std::string& message) noexcept;

}  // namespace tidemark::interpose
