// Two checks with two jobs: TL_CHECK reports bad user input as tl::Error with a message that
// says what was expected and what was seen; TL_INTERNAL_ASSERT guards tensorlib's own
// invariants (a failure is a tensorlib bug).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace tl {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A check on an argument (shape, dtype, index): PyTorch raises these as IndexError, etc.
class IndexError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <typename... Args>
std::string str(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
[[noreturn]] void check_fail(const char* file, int line, const std::string& msg);
[[noreturn]] void index_fail(const std::string& msg);
[[noreturn]] void internal_assert_fail(const char* cond, const char* file, int line,
                                       const std::string& msg);
}  // namespace detail

}  // namespace tl

#define TL_CHECK(cond, ...)                                                         \
  do {                                                                              \
    if (__builtin_expect(!(cond), 0))                                               \
      ::tl::detail::check_fail(__FILE__, __LINE__, ::tl::detail::str(__VA_ARGS__)); \
  } while (0)

#define TL_CHECK_INDEX(cond, ...)                                                               \
  do {                                                                                          \
    if (__builtin_expect(!(cond), 0)) ::tl::detail::index_fail(::tl::detail::str(__VA_ARGS__)); \
  } while (0)

#define TL_INTERNAL_ASSERT(cond, ...)                                                       \
  do {                                                                                      \
    if (__builtin_expect(!(cond), 0))                                                       \
      ::tl::detail::internal_assert_fail(#cond, __FILE__, __LINE__,                         \
                                         ::tl::detail::str("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
