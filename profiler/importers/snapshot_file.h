// Opening a snapshot file for the importer: refusing what is not a pickle before reading it
// whole, and mapping a large file so parsing can let the pages behind it go.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace tidemark::importers::detail {

// Refuses bytes that cannot start a pickle of protocol 2 to 5 (ImportError naming
// `source_name` and the common mistakes: a trace, a torch.save zip).
void check_pickle_start(std::string_view head, const std::string& source_name);

// The input of one conversion: its bytes, what keeps them alive, and (for a mapped file) how
// to let the parsed part go.
struct Input {
  std::string_view bytes;
  std::shared_ptr<const void> keep;
  std::function<void(uint64_t)> drop_before;
};

// The file's bytes: mapped when it can be (a regular file that starts with PROTO), else read
// with read_snapshot_file's checks (pytorch_snapshot.h). Throws ImportError.
Input open_snapshot_file(const std::string& path);

}  // namespace tidemark::importers::detail
