// Note [Allocation site]'s rule over symbolized frames (trace.h states it): which frame of a
// stack is the user's allocation site. Trace::site_frame applies it to a trace's stacks; the
// testing helpers (tidemark/testing.h), which have no trace, to the stacks they capture.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "profiler/store/trace_format.h"

namespace tidemark::analysis {

// Which frames make a site (Note [Allocation site]): the user's (the default) or any.
enum class Frames : uint8_t { user, all };

// The qualified name of a demangled function: "void tl::f<int>(int)" -> "tl::f<int>".
// "(anonymous namespace)" is part of a name, not the start of the parameters.
std::string_view qualified_name(std::string_view function);

// The last component of a path, '/' or '\\' separated (PyTorch snapshots from Windows).
std::string file_basename(const std::string& path);

// Whether a resolved frame is library code rather than the user's (Note [Allocation site]).
// `by_path` false leaves the file out and judges by function and module only: for a program
// whose own sources may lie under a directory named like a library's (a user's tests under
// `profiler/`).
bool is_library_frame(const store::ResolvedFrame& f, bool by_path = true);

// Whether a frame is the autograd engine's own (PyTorch's engine thread and its execute,
// tensorlib's tl::autograd::backward): an allocation whose stack has one was made by backward.
bool is_autograd_engine_frame(const store::ResolvedFrame& f);

// Whether a frame is a call into backward: the engine's (is_autograd_engine_frame), or
// Python's `backward` of torch/_tensor.py or torch/autograd/ -- the program's
// `loss.backward()`, whose first allocation (the loss's gradient) a snapshot of Python frames
// shows, where the engine's thread that runs the rest has none.
bool is_backward_call_frame(const store::ResolvedFrame& f);

// Note [The recorder's own frames]
// The recorder captures a stack in its sink, which the producer called through
// events::dispatch. The capture skips the recorder's own frames, but the call into the sink is
// inlined in the producer's function (the allocator's `deliver`), so the innermost return
// address resolves to dispatch's inlined frames -- `tidemark::events::dispatch`, its loop over
// the sinks and its lambda -- above the producer's own (in an unoptimised build they are frames
// of their own, and so are the recorder's `tidemark::record::` ones). They are the profiler's,
// not the program's: Trace drops them from the innermost end of every stack, with either
// Frames mode, as folded stacks and flame graphs drop the C runtime's start-up frames from the
// outermost end.
bool is_recorder_frame(const store::ResolvedFrame& f);

// The frame Note [Allocation site] picks among a stack's frames (innermost first, inlined
// frames expanded; unresolved ones have an empty function); empty when none is resolved.
std::optional<store::ResolvedFrame> pick_site(std::span<const store::ResolvedFrame* const> frames,
                                              Frames mode);

}  // namespace tidemark::analysis
