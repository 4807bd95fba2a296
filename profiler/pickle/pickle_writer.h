// A minimal pickle writer (protocols 2-5): it writes the opcodes Python's pickler would for
// plain data. The snapshot export (profiler/analysis/export_snapshot.cpp) writes with it, and
// tests, the import benchmark and fuzz seeds build pickles with it; the importer does not use
// it. Header-only; the caller drives the opcodes (containers are EMPTY_* then MARK ...
// APPENDS / SETITEMS, as Python writes them).
#pragma once

#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <string_view>

namespace tidemark::importers::pickle {

class PickleWriter {
 public:
  explicit PickleWriter(int protocol = 4) : protocol_(protocol) {
    op(0x80);
    out_ += static_cast<char>(protocol);
  }

  PickleWriter& op(uint8_t b) {
    out_ += static_cast<char>(b);
    return *this;
  }
  PickleWriter& le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
    return *this;
  }
  PickleWriter& raw(std::string_view s) {
    out_ += s;
    return *this;
  }

  PickleWriter& none() { return op('N'); }
  PickleWriter& boolean(bool b) { return op(b ? 0x88 : 0x89); }
  PickleWriter& integer(int64_t v) {
    if (v >= 0 && v < 256) return op('K').le(static_cast<uint64_t>(v), 1);
    if (v >= 0 && v < 65536) return op('M').le(static_cast<uint64_t>(v), 2);
    if (v >= INT32_MIN && v <= INT32_MAX)
      return op('J').le(static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
    // LONG1: the fewest little-endian two's complement bytes.
    int n = 8;
    while (n > 1) {
      int64_t top =
          v >> (8 * (n - 1) - 1);  // the bits the top byte and the sign bit of the next hold
      if (top != 0 && top != -1) break;
      --n;
    }
    return op(0x8a).le(static_cast<uint64_t>(n), 1).le(static_cast<uint64_t>(v), n);
  }
  PickleWriter& floating(double d) {
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    op('G');
    for (int i = 7; i >= 0; --i) out_ += static_cast<char>((bits >> (8 * i)) & 0xff);
    return *this;
  }
  PickleWriter& str(std::string_view s) {
    if (protocol_ >= 4 && s.size() < 256) return op(0x8c).le(s.size(), 1).raw(s);
    if (s.size() <= UINT32_MAX) return op('X').le(s.size(), 4).raw(s);
    return op(0x8d).le(s.size(), 8).raw(s);
  }
  PickleWriter& bytes(std::string_view s) {  // protocol >= 3
    if (s.size() < 256) return op('C').le(s.size(), 1).raw(s);
    if (s.size() <= UINT32_MAX) return op('B').le(s.size(), 4).raw(s);
    return op(0x8e).le(s.size(), 8).raw(s);
  }
  PickleWriter& empty_list() { return op(']'); }
  PickleWriter& empty_dict() { return op('}'); }
  PickleWriter& empty_tuple() { return op(')'); }
  PickleWriter& mark() { return op('('); }
  PickleWriter& appends() { return op('e'); }
  PickleWriter& append() { return op('a'); }
  PickleWriter& setitems() { return op('u'); }
  PickleWriter& setitem() { return op('s'); }
  PickleWriter& tuple() { return op('t'); }  // after mark() and the items
  PickleWriter& tuple_n(int n) { return op(static_cast<uint8_t>(0x84 + n)); }  // TUPLE1..3
  // Memoizes the top of the stack; returns its memo index.
  uint32_t memoize() {
    uint32_t idx = memo_++;
    if (protocol_ >= 4) {
      op(0x94);
    } else if (idx < 256) {
      op('q').le(idx, 1);
    } else {
      op('r').le(idx, 4);
    }
    return idx;
  }
  PickleWriter& get(uint32_t idx) { return idx < 256 ? op('h').le(idx, 1) : op('j').le(idx, 4); }
  // Moves what was written so far to `os`, so a long pickle streams out in pieces (memo
  // indices carry on across pieces).
  void drain_to(std::ostream& os) {
    os.write(out_.data(), static_cast<std::streamsize>(out_.size()));
    out_.clear();
  }
  std::string finish() {
    op('.');
    return std::move(out_);
  }
  size_t size() const { return out_.size(); }
  int protocol() const { return protocol_; }

 private:
  int protocol_;
  uint32_t memo_ = 0;
  std::string out_;
};

}  // namespace tidemark::importers::pickle
