// The one exception type of profiler/importers: every failure to read another tool's file
// (cannot open it, not a pickle, a hostile or truncated pickle, not a PyTorch snapshot) throws
// it, with a message naming the file and the problem.
#pragma once

#include <stdexcept>

namespace tidemark::importers {

class ImportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tidemark::importers
