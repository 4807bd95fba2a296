// A data-only reader of Python pickles (protocols 2-5), enough for the plain data a PyTorch
// memory snapshot holds. It never executes anything: GLOBAL / STACK_GLOBAL become inert
// `global` values naming a module and a name; opcodes that would call or build objects
// (REDUCE, BUILD, NEWOBJ, INST, OBJ, PERSID, EXT*) are refused. See docs/importers.md.
//
// Every failure — unknown or refused opcode, truncated input, memo misuse, stack underflow,
// lengths longer than the input left, nesting deeper than Limits::max_depth, self-referencing
// containers — throws PickleError naming the byte offset and the opcode. Memory use is
// proportional to the input size.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tidemark::importers::pickle {

// The pickle library depends on nothing of the importers': the importer that parses a file
// turns this into its ImportError, naming the file (pytorch_snapshot.cpp).
class PickleError : public std::runtime_error {
 public:
  // `opcode` -1: the error is not about one opcode (end of input).
  PickleError(const std::string& message, uint64_t offset, int opcode)
      : std::runtime_error(message), offset_(offset), opcode_(opcode) {}
  uint64_t offset() const { return offset_; }
  int opcode() const { return opcode_; }

 private:
  uint64_t offset_;
  int opcode_;
};

// The value model. `integer` is int64: LONG1/LONG4 integers that do not fit become `floating`
// (the nearest double), documented in docs/importers.md. `dict` keys are str or int.
enum class Type : uint8_t {
  none,
  boolean,
  integer,
  floating,
  string,
  bytes,
  list,
  tuple,
  dict,
  global
};
std::string_view type_name(Type t);

// Name of an opcode byte ("BINGET"), or "" for an unknown one.
std::string_view opcode_name(uint8_t op);

struct Limits {
  // Deepest nesting of containers (a list in a list in a dict: 3), and of open MARKs.
  uint32_t max_depth = 256;
  // The most memory the values may take (tables, items, stack and memo), in bytes for each byte
  // of input, and at least `min_memory` bytes: a pickle past it is refused before it exhausts
  // the machine (one byte of EMPTY_DICT is 48 bytes of values, and 80 resident). Read by the
  // snapshot importer, which lets entries and frames go as it parses, a PyTorch snapshot takes
  // under 2 for each byte, and about 5 when a whole trace goes into its list in one APPENDS;
  // plain data of small dicts read with no hook, about 10.
  uint32_t max_memory_per_byte = 16;
  uint64_t min_memory = uint64_t{256} << 20;
};

class Document;
class AppendHook;

// A value inside a Document: 16 bytes, cheap to copy, valid while its Document lives.
struct Val {
  Type type = Type::none;
  uint32_t index = 0;  // string, bytes, container or global: index into the document's tables
  union {
    int64_t i;
    double d;
  };
  Val() : i(0) {}
};

// A value and its document: what users of the reader handle.
class Ref {
 public:
  Ref(const Document* doc, Val v) : doc_(doc), v_(v) {}

  Type type() const { return v_.type; }
  bool is_none() const { return v_.type == Type::none; }
  std::optional<bool> as_bool() const;
  std::optional<int64_t> as_int() const;              // integer only
  std::optional<double> as_double() const;            // floating or integer
  std::optional<std::string_view> as_string() const;  // str only
  std::optional<std::string_view> as_bytes() const;   // bytes only
  // The module and name of a `global`.
  std::optional<std::pair<std::string_view, std::string_view>> as_global() const;

  // list, tuple: items; dict: entries (key(i), value(i)); 0 for every other type.
  size_t size() const;
  Ref operator[](size_t i) const;  // list or tuple item, i < size()
  Ref key(size_t i) const;         // dict entry i
  Ref value(size_t i) const;
  // Dict lookup (the last entry with that key, as Python's dict keeps); empty when absent or
  // when this is not a dict.
  std::optional<Ref> get(std::string_view key) const;
  std::optional<Ref> get(int64_t key) const;

  // Containers: a number equal for two Refs to the same object (memo-shared), distinct for
  // different ones, below Document::container_count(). Other types: UINT32_MAX. (While
  // parsing with an AppendHook, a dropped dict's number is given to a new container.)
  uint32_t identity() const;

  // A short Python-like rendering, depth- and length-limited (for messages and tests).
  std::string repr(size_t max_chars = 200) const;

  Val val() const { return v_; }

 private:
  const Document* doc_;
  Val v_;
};

// The parsed pickle. Refs point to it: moving a Document invalidates them.
class Document {
 public:
  Document() = default;
  Document(Document&&) noexcept = default;
  Document& operator=(Document&&) noexcept = default;

  Ref root() const { return {this, root_}; }
  // Frees the items of a container nested in another (immutable): it reads as empty from then
  // on, its identity unchanged. For a reader that took what it needs while parsing (AppendHook).
  void release(Val v);
  int protocol() const { return protocol_; }  // 0 without a PROTO opcode
  size_t container_count() const { return containers_.size(); }

 private:
  friend class Ref;
  friend class Parser;
  struct Container {
    Type type;
    bool sealed = false;     // nested in another container: immutable from then on
    uint32_t height = 1;     // 1 + the deepest child container's height
    std::vector<Val> items;  // dict: key, value, key, value, ...
  };
  struct Span {
    uint64_t offset, size;
  };
  std::string_view text(Span s) const { return data_.substr(s.offset, s.size); }
  std::shared_ptr<const void> keep_;  // what keeps the input alive (a string, a file mapping)
  std::string_view data_;             // the input: strings and bytes are spans of it
  std::vector<Span> strings_;
  std::vector<Container> containers_;
  std::vector<std::pair<Span, Span>> globals_;  // module, name
  uint64_t items_ = 0;  // items in the containers, released ones not counted (the memory budget)
  Val root_;
  int protocol_ = 0;
};

// Told of each dict as it goes into a list (complete and immutable from then on), so a reader can
// take what it needs while the rest is parsed and release the dict (Document::release): a
// snapshot's trace entries then never all exist as pickle values at once.
class AppendHook {
 public:
  virtual ~AppendHook() = default;
  // Returns what the list holds in the dict's place: the dict itself, or a dict already in the
  // document with the same content (keys and values) and no container inside (so the list's
  // nesting is unchanged), for a reader that keeps one dict per content (the duplicate it may
  // then release).
  virtual Val dict_appended(Document& doc, Val dict) = 0;
  // The parser dropped dicts the reader replaced, and the strings inside them (Note [Dropping
  // replaced dicts] in pickle.cpp): the containers [`first`, `end`) and the strings from index
  // `first_string` on are gone, and new values take those indices. A reader that keeps anything
  // by a container's identity or a string's index in them forgets it.
  virtual void dropped(size_t first, size_t end, size_t first_string) = 0;
  // The parser reads no byte before `offset` again (every 64 MiB): a mapped input may let the
  // pages go (strings in them are read again from the file when used).
  virtual void consumed(uint64_t offset) { (void)offset; }
};

// Parses a whole pickle (up to its STOP opcode; bytes after it are ignored). Throws PickleError.
Document parse(std::string data, const Limits& limits = {}, AppendHook* hook = nullptr);
// The same over bytes that `keep` keeps alive (a read-only file mapping) as long as the Document.
Document parse(std::string_view data, std::shared_ptr<const void> keep, const Limits& limits = {},
               AppendHook* hook = nullptr);

}  // namespace tidemark::importers::pickle
