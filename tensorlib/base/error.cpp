#include "tensorlib/base/error.h"

namespace tl::detail {

void check_fail(const char* /*file*/, int /*line*/, const std::string& msg) {
  throw Error(msg);
}

void index_fail(const std::string& msg) {
  throw IndexError(msg);
}

void internal_assert_fail(const char* cond, const char* file, int line, const std::string& msg) {
  throw Error(str("internal assert failed: ", cond, " at ", file, ":", line,
                  msg.empty() ? "" : " (", msg, msg.empty() ? "" : ")",
                  "; this is a tensorlib bug, please report it"));
}

}  // namespace tl::detail
