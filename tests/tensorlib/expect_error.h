// EXPECT_ERROR(statement, text): the statement throws a tl::Error whose message contains text.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include <tensorlib/base/error.h>

namespace tl_test {

// The message of the tl::Error `f` throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const tl::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace tl_test

#define EXPECT_ERROR(stmt, text)                                            \
  EXPECT_NE(tl_test::error_of([&] { stmt; }).find(text), std::string::npos) \
      << tl_test::error_of([&] { stmt; })
