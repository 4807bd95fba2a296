// The data-only pickle reader (pickle.h). One pass over the input with Python's unpickling
// machine (a stack, a stack of MARK positions and a memo), building values into the
// Document's tables instead of Python objects.
#include "profiler/pickle/pickle.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <new>
#include <unordered_map>

#include <sys/mman.h>

namespace tidemark::importers::pickle {

namespace {

// Opcodes (Python's Lib/pickletools.py).
enum Op : uint8_t {
  MARK = '(',
  STOP = '.',
  POP = '0',
  POP_MARK = '1',
  DUP = '2',
  FLOAT = 'F',
  INT = 'I',
  BININT = 'J',
  BININT1 = 'K',
  LONG = 'L',
  BININT2 = 'M',
  NONE = 'N',
  PERSID = 'P',
  BINPERSID = 'Q',
  REDUCE = 'R',
  STRING = 'S',
  BINSTRING = 'T',
  SHORT_BINSTRING = 'U',
  UNICODE = 'V',
  BINUNICODE = 'X',
  APPEND = 'a',
  BUILD = 'b',
  GLOBAL = 'c',
  DICT = 'd',
  EMPTY_DICT = '}',
  APPENDS = 'e',
  GET = 'g',
  BINGET = 'h',
  INST = 'i',
  LONG_BINGET = 'j',
  LIST = 'l',
  EMPTY_LIST = ']',
  OBJ = 'o',
  PUT = 'p',
  BINPUT = 'q',
  LONG_BINPUT = 'r',
  SETITEM = 's',
  TUPLE = 't',
  EMPTY_TUPLE = ')',
  SETITEMS = 'u',
  BINFLOAT = 'G',
  PROTO = 0x80,
  NEWOBJ = 0x81,
  EXT1 = 0x82,
  EXT2 = 0x83,
  EXT4 = 0x84,
  TUPLE1 = 0x85,
  TUPLE2 = 0x86,
  TUPLE3 = 0x87,
  NEWTRUE = 0x88,
  NEWFALSE = 0x89,
  LONG1 = 0x8a,
  LONG4 = 0x8b,
  BINBYTES = 'B',
  SHORT_BINBYTES = 'C',
  SHORT_BINUNICODE = 0x8c,
  BINUNICODE8 = 0x8d,
  BINBYTES8 = 0x8e,
  EMPTY_SET = 0x8f,
  ADDITEMS = 0x90,
  FROZENSET = 0x91,
  NEWOBJ_EX = 0x92,
  STACK_GLOBAL = 0x93,
  MEMOIZE = 0x94,
  FRAME = 0x95,
  BYTEARRAY8 = 0x96,
  NEXT_BUFFER = 0x97,
  READONLY_BUFFER = 0x98,
};

struct OpName {
  uint8_t op;
  const char* name;
};
constexpr OpName kOpNames[] = {
    {MARK, "MARK"},
    {STOP, "STOP"},
    {POP, "POP"},
    {POP_MARK, "POP_MARK"},
    {DUP, "DUP"},
    {FLOAT, "FLOAT"},
    {INT, "INT"},
    {BININT, "BININT"},
    {BININT1, "BININT1"},
    {LONG, "LONG"},
    {BININT2, "BININT2"},
    {NONE, "NONE"},
    {PERSID, "PERSID"},
    {BINPERSID, "BINPERSID"},
    {REDUCE, "REDUCE"},
    {STRING, "STRING"},
    {BINSTRING, "BINSTRING"},
    {SHORT_BINSTRING, "SHORT_BINSTRING"},
    {UNICODE, "UNICODE"},
    {BINUNICODE, "BINUNICODE"},
    {APPEND, "APPEND"},
    {BUILD, "BUILD"},
    {GLOBAL, "GLOBAL"},
    {DICT, "DICT"},
    {EMPTY_DICT, "EMPTY_DICT"},
    {APPENDS, "APPENDS"},
    {GET, "GET"},
    {BINGET, "BINGET"},
    {INST, "INST"},
    {LONG_BINGET, "LONG_BINGET"},
    {LIST, "LIST"},
    {EMPTY_LIST, "EMPTY_LIST"},
    {OBJ, "OBJ"},
    {PUT, "PUT"},
    {BINPUT, "BINPUT"},
    {LONG_BINPUT, "LONG_BINPUT"},
    {SETITEM, "SETITEM"},
    {TUPLE, "TUPLE"},
    {EMPTY_TUPLE, "EMPTY_TUPLE"},
    {SETITEMS, "SETITEMS"},
    {BINFLOAT, "BINFLOAT"},
    {PROTO, "PROTO"},
    {NEWOBJ, "NEWOBJ"},
    {EXT1, "EXT1"},
    {EXT2, "EXT2"},
    {EXT4, "EXT4"},
    {TUPLE1, "TUPLE1"},
    {TUPLE2, "TUPLE2"},
    {TUPLE3, "TUPLE3"},
    {NEWTRUE, "NEWTRUE"},
    {NEWFALSE, "NEWFALSE"},
    {LONG1, "LONG1"},
    {LONG4, "LONG4"},
    {BINBYTES, "BINBYTES"},
    {SHORT_BINBYTES, "SHORT_BINBYTES"},
    {SHORT_BINUNICODE, "SHORT_BINUNICODE"},
    {BINUNICODE8, "BINUNICODE8"},
    {BINBYTES8, "BINBYTES8"},
    {EMPTY_SET, "EMPTY_SET"},
    {ADDITEMS, "ADDITEMS"},
    {FROZENSET, "FROZENSET"},
    {NEWOBJ_EX, "NEWOBJ_EX"},
    {STACK_GLOBAL, "STACK_GLOBAL"},
    {MEMOIZE, "MEMOIZE"},
    {FRAME, "FRAME"},
    {BYTEARRAY8, "BYTEARRAY8"},
    {NEXT_BUFFER, "NEXT_BUFFER"},
    {READONLY_BUFFER, "READONLY_BUFFER"},
};

std::string hex_byte(uint8_t b) {
  static const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[b >> 4] + digits[b & 15];
}

// The memo: dense for the indices MEMOIZE and ordinary PUTs give (0, 1, 2, ...), a hash map for
// the rest, so a hostile index (LONG_BINPUT 0xffffffff) costs one entry, not 4G. A PyTorch
// snapshot memoizes every dict, list and string it holds, and a file of distinct frames one slot
// per ~20 bytes: the dense slots take 8 bytes each (a Val's type and index, or a small integer;
// anything else in `wide_`), in chunks, so the memo never holds a copy of itself while it grows.
class Memo {
 public:
  void put(uint64_t idx, Val v) {
    if (idx < dense_.size()) {
      // Every dense slot was put: a put again replaces it (in wide_'s place, if it had one).
      if ((dense_[idx] & 15) == kWide && (v.type == Type::floating || v.type == Type::integer)) {
        wide_[dense_[idx] >> 4] = v;
      } else {
        dense_[idx] = pack(v);
      }
    } else if (idx == dense_.size()) {
      dense_.push_back(pack(v));
      ++count_;
      // Entries put beyond the dense end join it when the gap closes.
      for (auto it = sparse_.find(dense_.size()); it != sparse_.end();
           it = sparse_.find(dense_.size())) {
        dense_.push_back(pack(it->second));
        sparse_.erase(it);
      }
    } else {
      count_ += sparse_.insert_or_assign(idx, v).second;
    }
  }
  // The value put at `idx` into `out`; false when none was. (Written in place: a Val built in
  // pieces and copied whole would stall the store forwarding of every BINGET.)
  bool get(uint64_t idx, Val& out) const {
    if (idx < dense_.size()) {
      unpack(dense_[idx], out);
      return true;
    }
    if (sparse_.empty()) return false;
    auto it = sparse_.find(idx);
    if (it == sparse_.end()) return false;
    out = it->second;
    return true;
  }
  uint64_t size() const { return count_; }  // Python's len(memo): the index MEMOIZE uses
  // About what it takes (a sparse entry: its node and bucket).
  uint64_t bytes() const {
    return dense_.size() * 8 + wide_.size() * sizeof(Val) + sparse_.size() * 48;
  }

 private:
  // Low 4 bits: the Type, or kWide (the rest indexes wide_); above: the index, a boolean, or
  // an integer of 60 bits.
  static constexpr uint64_t kWide = 15;
  static constexpr int64_t kMaxSmall = int64_t{1} << 59;
  uint64_t pack(const Val& v) {
    const uint64_t t = static_cast<uint8_t>(v.type);
    switch (v.type) {
      case Type::none:
        return t;
      case Type::boolean:
        return t | static_cast<uint64_t>(v.i != 0) << 4;
      case Type::integer:
        if (v.i >= -kMaxSmall && v.i < kMaxSmall) return t | static_cast<uint64_t>(v.i) << 4;
        break;
      case Type::floating:
        break;
      default:
        return t | uint64_t{v.index} << 4;
    }
    wide_.push_back(v);
    return kWide | static_cast<uint64_t>(wide_.size() - 1) << 4;
  }
  void unpack(uint64_t bits, Val& v) const {
    if ((bits & 15) == kWide) {
      v = wide_[bits >> 4];
      return;
    }
    v.type = static_cast<Type>(bits & 15);
    const bool scalar = v.type == Type::boolean || v.type == Type::integer;
    v.index = scalar || v.type == Type::none ? 0 : static_cast<uint32_t>(bits >> 4);
    v.i = scalar ? static_cast<int64_t>(bits) >> 4 : 0;  // arithmetic: a negative one stays so
  }
  // Slots in chunks of a fixed size: what a deque does, without its branches on every get. The
  // chunks are mapped, not taken from the heap, where they would sit among the entries' items
  // the reader frees and keep the heap from shrinking.
  class Slots {
   public:
    Slots() = default;
    Slots(const Slots&) = delete;
    Slots& operator=(const Slots&) = delete;
    ~Slots() {
      for (uint64_t* c : chunks_) munmap(c, kChunkBytes);
    }
    size_t size() const { return size_; }
    uint64_t& operator[](size_t i) { return chunks_[i >> kShift][i & kMask]; }
    uint64_t operator[](size_t i) const { return chunks_[i >> kShift][i & kMask]; }
    void push_back(uint64_t v) {
      if ((size_ & kMask) == 0) {
        void* c =
            mmap(nullptr, kChunkBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (c == MAP_FAILED) throw std::bad_alloc();
        chunks_.push_back(static_cast<uint64_t*>(c));
      }
      chunks_.back()[size_++ & kMask] = v;
    }

   private:
    static constexpr int kShift = 16;  // 512 KiB a chunk
    static constexpr size_t kMask = (size_t{1} << kShift) - 1;
    static constexpr size_t kChunkBytes = (kMask + 1) * sizeof(uint64_t);
    std::vector<uint64_t*> chunks_;
    size_t size_ = 0;
  };
  Slots dense_;           // indices 0 .. size-1, every one put
  std::deque<Val> wide_;  // values too wide to pack (floats, integers of 60 bits or more)
  std::unordered_map<uint64_t, Val> sparse_;
  uint64_t count_ = 0;
};

}  // namespace

std::string_view opcode_name(uint8_t op) {
  for (const OpName& n : kOpNames)
    if (n.op == op) return n.name;
  return {};
}

std::string_view type_name(Type t) {
  switch (t) {
    case Type::none:
      return "None";
    case Type::boolean:
      return "bool";
    case Type::integer:
      return "int";
    case Type::floating:
      return "float";
    case Type::string:
      return "str";
    case Type::bytes:
      return "bytes";
    case Type::list:
      return "list";
    case Type::tuple:
      return "tuple";
    case Type::dict:
      return "dict";
    case Type::global:
      return "global";
  }
  return "?";
}

namespace {

// Note [Dropping replaced dicts]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A reader given as the AppendHook may put an equal dict (or a stand-in) in the place of a dict
// that goes into a list, and release the one it replaced; its place in the tables (a container
// of 32 bytes, the spans of the strings in it) would stay, and a file of frames the reader
// leaves out or merges costs that much for every ~20 bytes of pickle. The parser drops such a
// dict from the tables when nothing else can refer to it: it is among the newest containers, no
// copy of it was made (DUP, BINGET), at most one memo slot names it (that slot then names its
// replacement, an equal value for the reader), and nothing made since it escaped into an older
// container. It knows that from a window over the ops: EMPTY_DICT opens it (at the first of the
// dicts it may drop), and it stays open only through the ops Python's pickler writes for flat
// dicts going into a list (scalars, strings, MARK, memo puts and gets, SETITEM(S) into those
// dicts, EMPTY_DICT); the APPEND(S) into an older list drops what it can and closes it; any
// other op closes it. Dicts are dropped from the top of the batch down, while each is the newest
// container, replaced by an older one, and flat; the strings made since the lowest of them go
// too, except those a memo slot names (string_floor). The hook is told (dropped()), since the
// indices are given again to the values made next.
struct DropWindow {
  static constexpr uint64_t kNoSlot = std::numeric_limits<uint64_t>::max();
  struct Dict {
    uint32_t strings;  // strings_ size when the dict was made: its strings are at or past it
    uint64_t slot;     // the memo slot naming it, or kNoSlot
  };
  bool open = false;
  uint32_t first = 0;         // containers_ index of its first dict: dicts[j] is first + j
  uint32_t strings = 0;       // strings_ size when it opened
  uint32_t string_floor = 0;  // strings below it may not be dropped (a memo slot names them)
  std::vector<Dict> dicts;
  void close() {
    open = false;
    dicts.clear();
  }
  bool holds_dict(const Val& v) const { return open && v.type == Type::dict && v.index >= first; }
  bool holds_string(const Val& v) const {
    return open && (v.type == Type::string || v.type == Type::bytes) && v.index >= strings;
  }
};

// Whether `op` keeps a DropWindow open (its own checks may still close it).
bool keeps_window(uint8_t op) {
  switch (op) {
    case PROTO:
    case FRAME:
    case MARK:
    case NONE:
    case NEWTRUE:
    case NEWFALSE:
    case BININT:
    case BININT1:
    case BININT2:
    case LONG1:
    case LONG4:
    case BINFLOAT:
    case SHORT_BINUNICODE:
    case BINUNICODE:
    case BINUNICODE8:
    case SHORT_BINSTRING:
    case BINSTRING:
    case SHORT_BINBYTES:
    case BINBYTES:
    case BINBYTES8:
    case BYTEARRAY8:
    case EMPTY_DICT:
    case MEMOIZE:
    case BINPUT:
    case LONG_BINPUT:
    case BINGET:
    case LONG_BINGET:
    case SETITEM:
    case SETITEMS:
    case APPEND:
    case APPENDS:
      return true;
    default:
      return false;
  }
}

}  // namespace

class Parser {
 public:
  Parser(std::string_view data, std::shared_ptr<const void> keep, const Limits& limits,
         AppendHook* hook)
      : limits_(limits), hook_(hook) {
    doc_.keep_ = std::move(keep);
    doc_.data_ = data;
    p_ = reinterpret_cast<const uint8_t*>(doc_.data_.data());
    n_ = doc_.data_.size();
    budget_ = std::max(limits_.min_memory,
                       n_ > UINT64_MAX / std::max<uint64_t>(limits_.max_memory_per_byte, 1)
                           ? UINT64_MAX
                           : n_ * limits_.max_memory_per_byte);
  }

  Document run() {
    for (;;) {
      if (pos_ >= n_) {
        throw PickleError("pickle: offset " + std::to_string(pos_) +
                              ": input ends before the STOP opcode (truncated pickle)",
                          pos_, -1);
      }
      op_pos_ = pos_;
      if (pos_ >= next_check_) periodic();
      op_ = p_[pos_++];
      if (window_.open && !keeps_window(op_)) window_.close();
      if (op_ == STOP) {
        if (reachable() == 0) fail("the stack is empty: no value to return");
        doc_.root_ = stack_.back();
        return std::move(doc_);
      }
      step();
    }
  }

 private:
  // Every kCheckStep bytes: the memory budget (Limits::max_memory_per_byte), and the hook told
  // what the parser will not read again.
  void periodic() {
    next_check_ = pos_ + kCheckStep;
    const uint64_t held =
        doc_.containers_.capacity() * sizeof(Document::Container) + doc_.items_ * sizeof(Val) +
        doc_.strings_.capacity() * sizeof(Document::Span) +
        doc_.globals_.capacity() * sizeof(doc_.globals_[0]) + stack_.capacity() * sizeof(Val) +
        marks_.capacity() * sizeof(size_t) + memo_.bytes();
    if (held > budget_) {
      throw PickleError("pickle: offset " + std::to_string(pos_) + ": its values take " +
                            std::to_string(held >> 20) + " MiB of memory, more than the " +
                            std::to_string(budget_ >> 20) + " MiB allowed (" +
                            std::to_string(limits_.max_memory_per_byte) +
                            " bytes for each byte of the pickle, at least " +
                            std::to_string(limits_.min_memory >> 20) +
                            " MiB; no PyTorch snapshot needs that: a damaged or hostile file?)",
                        pos_, -1);
    }
    if (hook_ && pos_ - consumed_ >= kConsumedStep) hook_->consumed(consumed_ = pos_);
  }

  [[noreturn]] void fail(const std::string& what) const {
    std::string name(opcode_name(op_));
    std::string op = name.empty() ? "opcode " + hex_byte(op_) : name + " (" + hex_byte(op_) + ")";
    throw PickleError("pickle: offset " + std::to_string(op_pos_) + ": " + op + ": " + what,
                      op_pos_, op_);
  }

  // ---- Reading the argument bytes ---------------------------------------------------------
  const uint8_t* take(uint64_t k) {
    if (k > n_ - pos_) {
      fail("truncated: needs " + std::to_string(k) + " bytes, " + std::to_string(n_ - pos_) +
           " left");
    }
    const uint8_t* q = p_ + pos_;
    pos_ += k;
    return q;
  }
  // A little-endian integer of K bytes; a constant K makes the copy one load, not a byte loop.
  template <size_t K>
  uint64_t le() {
    static_assert(std::endian::native == std::endian::little && K <= 8);
    uint64_t v = 0;
    std::memcpy(&v, take(K), K);
    return v;
  }
  // A declared length, which cannot exceed what is left of the input.
  uint64_t length(uint64_t declared) {
    if (declared > n_ - pos_) {
      fail("declared length " + std::to_string(declared) + " exceeds the " +
           std::to_string(n_ - pos_) + " bytes left");
    }
    return declared;
  }
  // A newline-terminated text argument (GLOBAL).
  Document::Span line() {
    const void* nl = std::memchr(p_ + pos_, '\n', n_ - pos_);
    if (!nl) fail("truncated: no newline ends the text argument");
    uint64_t end = static_cast<uint64_t>(static_cast<const uint8_t*>(nl) - p_);
    Document::Span s{pos_, end - pos_};
    pos_ = end + 1;
    return s;
  }

  // ---- Values -------------------------------------------------------------------------------
  void push(Val v) { stack_.push_back(v); }
  void push_int(int64_t i) {
    Val v;
    v.type = Type::integer;
    v.i = i;
    push(v);
  }
  void push_span(Type t, uint64_t size) {
    Val v;
    v.type = t;
    v.index = table_index(doc_.strings_.size());
    doc_.strings_.push_back({pos_, size});
    pos_ += size;
    push(v);
  }
  uint32_t table_index(size_t n) {
    if (n >= std::numeric_limits<uint32_t>::max()) fail("too many values");
    return static_cast<uint32_t>(n);
  }
  Val new_container(Type t) {
    Val v;
    v.type = t;
    v.index = table_index(doc_.containers_.size());
    doc_.containers_.push_back({t, false, 1, {}});
    return v;
  }
  static bool is_container(Type t) {
    return t == Type::list || t == Type::tuple || t == Type::dict;
  }

  // Items below the innermost MARK are out of reach until it is popped (as in Python).
  size_t fence() const { return marks_.empty() ? 0 : marks_.back(); }
  size_t reachable() const { return stack_.size() - fence(); }

  Val pop() {
    if (reachable() == 0) fail("stack underflow");
    Val v = stack_.back();
    stack_.pop_back();
    return v;
  }
  // Position of the innermost MARK; pops it.
  size_t pop_mark() {
    if (marks_.empty()) fail("no MARK is open");
    size_t m = marks_.back();
    marks_.pop_back();
    if (m > stack_.size()) fail("stack underflow below the MARK");
    return m;
  }

  // `child` goes into `parent`: the child becomes immutable (a container never changes once
  // nested, so no structure can contain itself) and the parent's height grows.
  void adopt(Document::Container& parent, Val child) {
    if (!is_container(child.type)) return;
    Document::Container& c = doc_.containers_[child.index];
    c.sealed = true;
    if (c.height + 1 > parent.height) {
      parent.height = c.height + 1;
      if (parent.height > limits_.max_depth)
        fail("containers nested deeper than " + std::to_string(limits_.max_depth));
    }
  }
  Document::Container& mutable_container(Val v, Type want) {
    if (v.type != want) {
      fail("expects a " + std::string(type_name(want)) + " below its items, found " +
           std::string(type_name(v.type)));
    }
    Document::Container& c = doc_.containers_[v.index];
    if (c.sealed) {
      fail("modifies a " + std::string(type_name(want)) +
           " already nested in another container (a self-referencing structure)");
    }
    return c;
  }
  void check_key(Val k) {
    if (k.type != Type::string && k.type != Type::integer)
      fail("dict key of type " + std::string(type_name(k.type)) +
           " (only str and int keys are supported)");
  }

  void append_items(size_t from) {  // stack[from..] into the list at stack[from - 1]
    if (from == 0 || from - 1 < fence()) fail("stack underflow: no list below the items");
    // Take the list's index first: adopt() and push_back may not invalidate it (containers_
    // does not grow here), but the reference must be re-fetched per item anyway.
    Document::Container& list = mutable_container(stack_[from - 1], Type::list);
    // Geometric growth: reserving exactly the batch would copy a long list (a trace, appended
    // 1000 items at a time) once per batch, quadratic in its length.
    const size_t need = list.items.size() + (stack_.size() - from);
    if (need > list.items.capacity()) list.items.reserve(std::max(need, list.items.capacity() * 2));
    for (size_t i = from; i < stack_.size(); ++i) {
      // Sealing before the append: a list appended to itself fails here.
      Val item = stack_[i];
      if (is_container(item.type) && item.index == stack_[from - 1].index) {
        fail("appends a list to itself (a self-referencing structure)");
      }
      adopt(list, item);
      list.items.push_back(item);
    }
    doc_.items_ += stack_.size() - from;
    // The hook may release the items (not the list: it is not sealed), never add containers,
    // and may put an equal flat dict in an item's place.
    if (hook_) {
      const size_t first =
          doc_.containers_[stack_[from - 1].index].items.size() - (stack_.size() - from);
      for (size_t i = from; i < stack_.size(); ++i) {
        if (stack_[i].type != Type::dict) continue;
        const Val kept = hook_->dict_appended(doc_, stack_[i]);
        if (kept.type == Type::dict && kept.index == stack_[i].index) continue;
        if (kept.type != Type::dict || kept.index >= doc_.containers_.size() ||
            doc_.containers_[kept.index].height != 1 || !doc_.containers_[kept.index].sealed)
          fail("internal error: the reader put a value that is not a flat dict in a list");
        doc_.containers_[stack_[from - 1].index].items[first + (i - from)] = kept;
      }
      if (window_.open) drop_replaced(from, first);
    }
    window_.close();
    stack_.resize(from);
  }
  // Note [Dropping replaced dicts]: the dicts of stack_[from..] the hook replaced, from the top
  // down while each is the newest container; their list's items start at `first`.
  void drop_replaced(size_t from, size_t first) {
    const Val list = stack_[from - 1];
    if (list.index >= window_.first) return;
    auto& containers = doc_.containers_;
    const size_t before = containers.size();
    uint32_t strings_to = static_cast<uint32_t>(doc_.strings_.size());
    for (size_t i = stack_.size(); i-- > from;) {
      const Val item = stack_[i];
      if (!window_.holds_dict(item) || item.index + size_t{1} != containers.size()) break;
      const Val now = containers[list.index].items[first + (i - from)];
      if (now.index >= item.index || containers[item.index].height != 1) break;
      const DropWindow::Dict& d = window_.dicts[item.index - window_.first];
      if (d.slot != DropWindow::kNoSlot) memo_.put(d.slot, now);
      strings_to = d.strings;
      doc_.items_ -= containers.back().items.size();
      containers.pop_back();
      window_.dicts.pop_back();
    }
    if (containers.size() == before) return;
    strings_to = std::max(strings_to, window_.string_floor);
    if (strings_to < doc_.strings_.size()) doc_.strings_.resize(strings_to);
    hook_->dropped(containers.size(), before, doc_.strings_.size());
  }
  void set_items(size_t from) {  // key/value pairs stack[from..] into the dict at stack[from - 1]
    if (from == 0 || from - 1 < fence()) fail("stack underflow: no dict below the items");
    if ((stack_.size() - from) % 2) fail("odd number of items: a key without a value");
    Document::Container& dict = mutable_container(stack_[from - 1], Type::dict);
    if (window_.open) watch_set_items(stack_[from - 1], from);
    const size_t need = dict.items.size() + (stack_.size() - from);
    if (need > dict.items.capacity()) dict.items.reserve(std::max(need, dict.items.capacity() * 2));
    for (size_t i = from; i < stack_.size(); i += 2) {
      check_key(stack_[i]);
      Val value = stack_[i + 1];
      if (is_container(value.type) && value.index == stack_[from - 1].index) {
        fail("puts a dict into itself (a self-referencing structure)");
      }
      adopt(dict, value);
      dict.items.push_back(stack_[i]);
      dict.items.push_back(value);
    }
    doc_.items_ += stack_.size() - from;
    stack_.resize(from);
  }
  // Note [Dropping replaced dicts]: a container put into a dict of the window closes it (the
  // dicts it drops are flat); a string of the window put into an older dict stays.
  void watch_set_items(Val dict, size_t from) {
    const bool inside = window_.holds_dict(dict);
    for (size_t i = from; i < stack_.size(); ++i) {
      const Val v = stack_[i];
      if (is_container(v.type) && (inside || window_.holds_dict(v))) return window_.close();
      if (!inside && window_.holds_string(v))
        window_.string_floor = std::max(window_.string_floor, v.index + 1);
    }
  }
  void watch_memo_put(uint64_t idx, Val v) {
    if (Val old; memo_.get(idx, old) && window_.holds_dict(old)) return window_.close();
    if (window_.holds_dict(v)) {
      DropWindow::Dict& d = window_.dicts[v.index - window_.first];
      if (d.slot != DropWindow::kNoSlot) return window_.close();
      d.slot = idx;
    } else if (window_.holds_string(v)) {
      window_.string_floor = std::max(window_.string_floor, v.index + 1);
    }
  }
  void watch_new_dict(Val v) {
    if (window_.open && v.index != window_.first + window_.dicts.size()) window_.close();
    if (!window_.open) {
      window_.open = true;
      window_.first = v.index;
      window_.strings = window_.string_floor = table_index(doc_.strings_.size());
    }
    window_.dicts.push_back({table_index(doc_.strings_.size()), DropWindow::kNoSlot});
  }

  void make_tuple(size_t from) {
    Val t = new_container(Type::tuple);
    Document::Container& c = doc_.containers_[t.index];
    for (size_t i = from; i < stack_.size(); ++i) adopt(c, stack_[i]);
    c.items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(from), stack_.end());
    doc_.items_ += c.items.size();
    c.sealed = true;
    stack_.resize(from);
    push(t);
  }
  void make_from_mark(Type t) {  // LIST, DICT: a new container of the items above the MARK
    size_t m = pop_mark();
    Val v = new_container(t);
    stack_.insert(stack_.begin() + static_cast<std::ptrdiff_t>(m), v);
    if (t == Type::list)
      append_items(m + 1);
    else
      set_items(m + 1);
  }

  void push_long(uint64_t nbytes) {
    const uint8_t* q = take(length(nbytes));
    if (nbytes == 0) return push_int(0);
    const bool negative = q[nbytes - 1] & 0x80;
    // Drop sign-extension bytes: a value that fits 8 bytes is an int64.
    uint64_t k = nbytes;
    const uint8_t ext = negative ? 0xff : 0x00;
    while (k > 1 && q[k - 1] == ext && ((q[k - 2] & 0x80) != 0) == negative) --k;
    if (k <= 8) {
      uint64_t u = negative ? ~uint64_t{0} : 0;
      for (uint64_t i = 0; i < k; ++i) {
        u &= ~(uint64_t{0xff} << (8 * i));
        u |= uint64_t{q[i]} << (8 * i);
      }
      return push_int(static_cast<int64_t>(u));
    }
    // Wider than int64: the nearest double (documented), of the magnitude for a negative value
    // (two's complement: -(~v + 1)).
    double d = 0;
    for (uint64_t i = k; i-- > 0;) d = d * 256 + (negative ? static_cast<uint8_t>(~q[i]) : q[i]);
    if (negative) d = -(d + 1);
    Val v;
    v.type = Type::floating;
    v.d = d;
    push(v);
  }

  void step() {
    switch (op_) {
      case PROTO: {
        uint8_t version = *take(1);
        if (version > 5)
          fail("unsupported pickle protocol " + std::to_string(version) + " (2 to 5 are)");
        doc_.protocol_ = version;
        break;
      }
      case FRAME: {
        uint64_t size = le<8>();
        if (size > n_ - pos_) {
          fail("truncated pickle: a frame of " + std::to_string(size) + " bytes, but only " +
               std::to_string(n_ - pos_) + " bytes are left (the file was cut short)");
        }
        break;  // frames only group opcodes; the reader does not need them
      }
      case MARK:
        if (marks_.size() >= limits_.max_depth)
          fail("MARKs nested deeper than " + std::to_string(limits_.max_depth));
        marks_.push_back(stack_.size());
        break;
      case POP:
        if (!marks_.empty() && marks_.back() == stack_.size()) {
          marks_.pop_back();  // Python pops the MARK when it is on top
        } else {
          pop();
        }
        break;
      case POP_MARK:
        stack_.resize(pop_mark());
        break;
      case DUP:
        if (reachable() == 0) fail("stack underflow");
        push(stack_.back());
        break;
      case NONE:
        push(Val{});
        break;
      case NEWTRUE:
      case NEWFALSE: {
        Val v;
        v.type = Type::boolean;
        v.i = op_ == NEWTRUE;
        push(v);
        break;
      }
      case BININT:
        push_int(static_cast<int32_t>(static_cast<uint32_t>(le<4>())));
        break;
      case BININT1:
        push_int(static_cast<int64_t>(le<1>()));
        break;
      case BININT2:
        push_int(static_cast<int64_t>(le<2>()));
        break;
      case LONG1:
        push_long(le<1>());
        break;
      case LONG4: {
        int32_t n = static_cast<int32_t>(static_cast<uint32_t>(le<4>()));
        if (n < 0) fail("negative length " + std::to_string(n));
        push_long(static_cast<uint64_t>(n));
        break;
      }
      case BINFLOAT: {
        uint64_t bits = 0;
        const uint8_t* q = take(8);
        for (int i = 0; i < 8; ++i) bits = bits << 8 | q[i];  // big-endian
        Val v;
        v.type = Type::floating;
        std::memcpy(&v.d, &bits, sizeof bits);
        push(v);
        break;
      }
      case SHORT_BINUNICODE:
        push_span(Type::string, length(le<1>()));
        break;
      case BINUNICODE:
        push_span(Type::string, length(le<4>()));
        break;
      case BINUNICODE8:
        push_span(Type::string, length(le<8>()));
        break;
      case SHORT_BINSTRING:
        push_span(Type::string, length(le<1>()));
        break;  // Python 2 str
      case BINSTRING: {
        int32_t n = static_cast<int32_t>(static_cast<uint32_t>(le<4>()));
        if (n < 0) fail("negative length " + std::to_string(n));
        push_span(Type::string, length(static_cast<uint64_t>(n)));
        break;
      }
      case SHORT_BINBYTES:
        push_span(Type::bytes, length(le<1>()));
        break;
      case BINBYTES:
        push_span(Type::bytes, length(le<4>()));
        break;
      case BINBYTES8:
      case BYTEARRAY8:
        push_span(Type::bytes, length(le<8>()));
        break;
      case EMPTY_LIST:
        push(new_container(Type::list));
        break;
      case EMPTY_DICT: {
        const Val v = new_container(Type::dict);
        if (hook_) watch_new_dict(v);
        push(v);
        break;
      }
      case EMPTY_TUPLE:
        make_tuple(stack_.size());
        break;
      case TUPLE1:
      case TUPLE2:
      case TUPLE3: {
        size_t k = static_cast<size_t>(op_ - TUPLE1 + 1);
        if (reachable() < k) fail("stack underflow: needs " + std::to_string(k) + " items");
        make_tuple(stack_.size() - k);
        break;
      }
      case TUPLE:
        make_tuple(pop_mark());
        break;
      case LIST:
        make_from_mark(Type::list);
        break;
      case DICT:
        make_from_mark(Type::dict);
        break;
      case APPEND:
        if (reachable() < 2) fail("stack underflow: needs a list and an item");
        append_items(stack_.size() - 1);
        break;
      case APPENDS:
        append_items(pop_mark());
        break;
      case SETITEM:
        if (reachable() < 3) fail("stack underflow: needs a dict, a key and a value");
        set_items(stack_.size() - 2);
        break;
      case SETITEMS:
        set_items(pop_mark());
        break;
      case MEMOIZE:
        if (reachable() == 0) fail("stack underflow: nothing to memoize");
        if (window_.open) watch_memo_put(memo_.size(), stack_.back());
        memo_.put(memo_.size(), stack_.back());
        break;
      case BINPUT:
      case LONG_BINPUT: {
        uint64_t idx = op_ == BINPUT ? le<1>() : le<4>();
        if (reachable() == 0) fail("stack underflow: nothing to memoize");
        if (window_.open) watch_memo_put(idx, stack_.back());
        memo_.put(idx, stack_.back());
        break;
      }
      case BINGET:
      case LONG_BINGET: {
        uint64_t idx = op_ == BINGET ? le<1>() : le<4>();
        Val& v = stack_.emplace_back();
        if (!memo_.get(idx, v)) {
          stack_.pop_back();
          fail("memo entry " + std::to_string(idx) + " is not defined");
        }
        if (window_.holds_dict(v)) window_.close();
        break;
      }
      case GLOBAL: {
        Document::Span module = line();
        Document::Span name = line();
        push_global(module, name);
        break;
      }
      case STACK_GLOBAL: {
        Val name = pop(), module = pop();
        if (name.type != Type::string || module.type != Type::string)
          fail("expects two str (module, name) on the stack");
        push_global(doc_.strings_[module.index], doc_.strings_[name.index]);
        break;
      }
      case REDUCE:
      case BUILD:
      case NEWOBJ:
      case NEWOBJ_EX:
      case INST:
      case OBJ:
      case PERSID:
      case BINPERSID:
      case EXT1:
      case EXT2:
      case EXT4:
        fail(
            "would construct or call a Python object; this data-only reader refuses it "
            "(a PyTorch memory snapshot holds plain data only)");
      case EMPTY_SET:
      case ADDITEMS:
      case FROZENSET:
        fail("sets are not supported by this reader (a PyTorch memory snapshot has none)");
      case NEXT_BUFFER:
      case READONLY_BUFFER:
        fail("out-of-band buffers are not supported");
      case INT:
      case LONG:
      case FLOAT:
      case STRING:
      case UNICODE:
      case GET:
      case PUT:
        fail("text opcode of pickle protocol 0 is not supported (protocols 2 to 5 are)");
      default:
        fail("unknown opcode");
    }
  }

  void push_global(Document::Span module, Document::Span name) {
    Val v;
    v.type = Type::global;
    v.index = table_index(doc_.globals_.size());
    doc_.globals_.push_back({module, name});
    push(v);
  }

  static constexpr uint64_t kConsumedStep = uint64_t{64} << 20;
  static constexpr uint64_t kCheckStep = uint64_t{1} << 20;
  uint64_t next_check_ = 0, budget_ = 0;
  Limits limits_;
  AppendHook* hook_;
  uint64_t consumed_ = 0;
  Document doc_;
  const uint8_t* p_ = nullptr;
  uint64_t n_ = 0, pos_ = 0, op_pos_ = 0;
  uint8_t op_ = 0;
  std::vector<Val> stack_;
  std::vector<size_t> marks_;
  Memo memo_;
  DropWindow window_;  // Note [Dropping replaced dicts]; opened only with a hook
};

Document parse(std::string data, const Limits& limits, AppendHook* hook) {
  // On the heap, so the Document's view of it survives moves (a short string's bytes would not).
  auto owned = std::make_shared<const std::string>(std::move(data));
  const std::string_view view = *owned;
  return Parser(view, std::move(owned), limits, hook).run();
}
Document parse(std::string_view data, std::shared_ptr<const void> keep, const Limits& limits,
               AppendHook* hook) {
  return Parser(data, std::move(keep), limits, hook).run();
}

void Document::release(Val v) {
  if (v.type != Type::list && v.type != Type::tuple && v.type != Type::dict) return;
  Container& c = containers_[v.index];
  if (!c.sealed) return;
  items_ -= c.items.size();
  std::vector<Val>().swap(c.items);
}

// ---- Ref ------------------------------------------------------------------------------------

std::optional<bool> Ref::as_bool() const {
  if (v_.type != Type::boolean) return std::nullopt;
  return v_.i != 0;
}
std::optional<int64_t> Ref::as_int() const {
  if (v_.type != Type::integer) return std::nullopt;
  return v_.i;
}
std::optional<double> Ref::as_double() const {
  if (v_.type == Type::floating) return v_.d;
  if (v_.type == Type::integer) return static_cast<double>(v_.i);
  return std::nullopt;
}
std::optional<std::string_view> Ref::as_string() const {
  if (v_.type != Type::string) return std::nullopt;
  return doc_->text(doc_->strings_[v_.index]);
}
std::optional<std::string_view> Ref::as_bytes() const {
  if (v_.type != Type::bytes) return std::nullopt;
  return doc_->text(doc_->strings_[v_.index]);
}
std::optional<std::pair<std::string_view, std::string_view>> Ref::as_global() const {
  if (v_.type != Type::global) return std::nullopt;
  const auto& g = doc_->globals_[v_.index];
  return std::pair{doc_->text(g.first), doc_->text(g.second)};
}

size_t Ref::size() const {
  if (v_.type == Type::list || v_.type == Type::tuple)
    return doc_->containers_[v_.index].items.size();
  if (v_.type == Type::dict) return doc_->containers_[v_.index].items.size() / 2;
  return 0;
}
Ref Ref::operator[](size_t i) const {
  return {doc_, doc_->containers_[v_.index].items[i]};
}
Ref Ref::key(size_t i) const {
  return {doc_, doc_->containers_[v_.index].items[2 * i]};
}
Ref Ref::value(size_t i) const {
  return {doc_, doc_->containers_[v_.index].items[2 * i + 1]};
}

std::optional<Ref> Ref::get(std::string_view key) const {
  if (v_.type != Type::dict) return std::nullopt;
  const auto& items = doc_->containers_[v_.index].items;
  for (size_t i = items.size(); i >= 2; i -= 2) {
    const Val& k = items[i - 2];
    if (k.type == Type::string && doc_->text(doc_->strings_[k.index]) == key)
      return Ref{doc_, items[i - 1]};
  }
  return std::nullopt;
}
std::optional<Ref> Ref::get(int64_t key) const {
  if (v_.type != Type::dict) return std::nullopt;
  const auto& items = doc_->containers_[v_.index].items;
  for (size_t i = items.size(); i >= 2; i -= 2) {
    const Val& k = items[i - 2];
    if (k.type == Type::integer && k.i == key) return Ref{doc_, items[i - 1]};
  }
  return std::nullopt;
}

uint32_t Ref::identity() const {
  if (v_.type == Type::list || v_.type == Type::tuple || v_.type == Type::dict) return v_.index;
  return std::numeric_limits<uint32_t>::max();
}

namespace {
void repr_into(const Ref& r, std::string& out, size_t max_chars, int depth) {
  if (out.size() > max_chars) return;
  auto quoted = [&](std::string_view s, const char* prefix) {
    out += prefix;
    out += '\'';
    for (char c : s.substr(0, max_chars)) {
      if (c == '\'' || c == '\\') out += '\\';
      out += static_cast<unsigned char>(c) < 0x20 ? '?' : c;
    }
    out += '\'';
  };
  switch (r.type()) {
    case Type::none:
      out += "None";
      break;
    case Type::boolean:
      out += *r.as_bool() ? "True" : "False";
      break;
    case Type::integer:
      out += std::to_string(*r.as_int());
      break;
    case Type::floating: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", *r.as_double());
      out += buf;
      break;
    }
    case Type::string:
      quoted(*r.as_string(), "");
      break;
    case Type::bytes:
      quoted(*r.as_bytes(), "b");
      break;
    case Type::global: {
      auto [m, n] = *r.as_global();
      out += "<global ";
      out += m;
      out += '.';
      out += n;
      out += '>';
      break;
    }
    case Type::list:
    case Type::tuple:
    case Type::dict: {
      const bool dict = r.type() == Type::dict;
      out += dict ? '{' : r.type() == Type::list ? '[' : '(';
      if (depth > 8) {
        out += "...";
      } else {
        for (size_t i = 0; i < r.size() && out.size() <= max_chars; ++i) {
          if (i) out += ", ";
          if (dict) {
            repr_into(r.key(i), out, max_chars, depth + 1);
            out += ": ";
            repr_into(r.value(i), out, max_chars, depth + 1);
          } else {
            repr_into(r[i], out, max_chars, depth + 1);
          }
        }
        if (r.type() == Type::tuple && r.size() == 1) out += ',';
      }
      out += dict ? '}' : r.type() == Type::list ? ']' : ')';
      break;
    }
  }
}
}  // namespace

std::string Ref::repr(size_t max_chars) const {
  std::string out;
  repr_into(*this, out, max_chars, 0);
  if (out.size() > max_chars) {
    out.resize(max_chars);
    out += "...";
  }
  return out;
}

}  // namespace tidemark::importers::pickle
