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

// The frame Note [Allocation site] picks among a stack's frames (innermost first, inlined
// frames expanded; unresolved ones have an empty function); empty when none is resolved.
std::optional<store::ResolvedFrame> pick_site(std::span<const store::ResolvedFrame* const> frames,
                                              Frames mode);

}  // namespace tidemark::analysis
