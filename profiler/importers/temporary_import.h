// Note [Snapshots as traces]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every reader of a trace (the CLI's commands, tidemark-gui) also reads a PyTorch memory
// snapshot. A file that starts as a pickle (the PROTO opcode, 0x80) is imported, once per
// process, into a temporary trace named after it (`snapshot.pickle.db` in a directory of the
// process's own, `tidemark-import-XXXXXX` in the temporary directory), removed when the process
// ends -- also when it ends of SIGINT, SIGTERM or SIGHUP, whose default action is then to remove
// the directory first (a handler of the program's own is left as it is); `tidemark import`
// keeps one. Anything else is opened as a trace, so its errors stay the trace reader's ("not a
// Tidemark trace").
#pragma once

#include <string>

namespace tidemark::importers {

// Whether `path` is a regular file that starts as a pickle.
bool starts_as_pickle(const std::string& path);
// The trace snapshot `path` was imported into, importing it the first time this process asks.
// Throws ImportError naming `path` (a damaged snapshot, no room for the directory). Safe to
// call from several threads.
std::string imported_trace(const std::string& path);
// The trace to open for `path`: imported_trace(path) when it starts as a pickle, else itself.
std::string trace_file_for(const std::string& path);

}  // namespace tidemark::importers
