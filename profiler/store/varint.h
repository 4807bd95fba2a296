// The varints of the trace's blob encodings (event blocks, memory_lod chunks): LEB128
// unsigned varints, zigzag for signed values, and a bounds-checked reader that throws a
// StoreError naming what it reads on truncated or overlong data (the input may be hostile).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "profiler/store/trace_format.h"

namespace tidemark::store::detail {

inline uint64_t zigzag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t unzigzag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}
// now - prev, wrapping, as a zigzag varint value: going backwards costs as much as forwards.
inline uint64_t delta(uint64_t now, uint64_t prev) {
  return zigzag(static_cast<int64_t>(now - prev));
}

// Writes `v` at `p` (at most 10 bytes) and returns the byte after it.
inline uint8_t* put_varint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v) | 0x80;
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}
inline constexpr size_t kMaxVarintBytes = 10;

class VarintReader {
 public:
  // `what` names the data in errors ("<file>: event block 12"); `kind` says what it is
  // ("event block"); both must outlive the reader.
  VarintReader(std::span<const uint8_t> d, const std::string& what, const char* kind)
      : p_(d.data()), end_(d.data() + d.size()), what_(what), kind_(kind) {}
  uint64_t var() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) fail("truncated");
      uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("varint longer than 10 bytes");
  }
  int64_t svar() { return unzigzag(var()); }
  uint8_t byte() {
    if (p_ == end_) fail("truncated");
    return *p_++;
  }
  bool done() const { return p_ == end_; }
  [[noreturn]] void fail(const char* why) const {
    throw StoreError(what_ + ": corrupt " + kind_ + " (" + why + ")");
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  const std::string& what_;
  const char* kind_;
};

}  // namespace tidemark::store::detail
