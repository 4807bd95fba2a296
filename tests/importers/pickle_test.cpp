// The data-only pickle reader: every opcode it supports, pickles Python itself wrote with
// protocols 2-5, and hostile input (truncation at every offset, unknown and refused opcodes,
// memo misuse, stack underflow, absurd lengths, deep nesting, self-reference), which must give
// a PickleError naming the offset and opcode, never a crash (the ASan build runs these).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "first_of_each_content.h"
#include "profiler/pickle/pickle.h"
#include "profiler/pickle/pickle_writer.h"

namespace {

namespace pk = tidemark::importers::pickle;
using pk::PickleError;
using pk::PickleWriter;
using pk::Type;

const std::filesystem::path kData = std::filesystem::path(__FILE__).parent_path() / "data";

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s += static_cast<char>(x);
  return s;
}

// Parses and returns the error message ("" when it parsed).
std::string error_of(const std::string& data, const pk::Limits& limits = {}) {
  try {
    pk::parse(data, limits);
  } catch (const PickleError& e) {
    return e.what();
  }
  return "";
}

// ---- Pickles written by Python ----------------------------------------------------------------

void check_reference(const pk::Document& doc, bool with_bytes) {
  pk::Ref root = doc.root();
  ASSERT_EQ(root.type(), Type::dict);
  ASSERT_EQ(root.size(), 4u);
  auto ints = root.get("ints");
  ASSERT_TRUE(ints);
  const int64_t expected[] = {0,
                              1,
                              255,
                              256,
                              65535,
                              65536,
                              -1,
                              -70000,
                              INT32_MAX,
                              INT32_MIN,
                              int64_t{1} << 40,
                              -(int64_t{1} << 40),
                              INT64_MAX,
                              INT64_MIN};
  ASSERT_EQ(ints->size(), 16u);
  for (size_t i = 0; i < std::size(expected); ++i) {
    EXPECT_EQ((*ints)[i].as_int(), expected[i]) << i;
  }
  // Wider than int64: the nearest double (documented).
  EXPECT_EQ((*ints)[14].type(), Type::floating);
  EXPECT_DOUBLE_EQ(*(*ints)[14].as_double(), 18446744073709551616.0);
  EXPECT_DOUBLE_EQ(*(*ints)[15].as_double(), -18446744073709551621.0);

  auto misc = root.get("misc");
  ASSERT_TRUE(misc);
  ASSERT_EQ(misc->size(), with_bytes ? 13u : 11u);
  EXPECT_DOUBLE_EQ(*(*misc)[0].as_double(), 1.5);
  EXPECT_TRUE((*misc)[1].is_none());
  EXPECT_EQ((*misc)[2].as_bool(), true);
  EXPECT_EQ((*misc)[3].as_bool(), false);
  EXPECT_EQ((*misc)[4].as_string(), "h\xc3\xa9llo");
  EXPECT_EQ((*misc)[5].as_string(), std::string(300, 's'));
  for (size_t n = 1; n <= 4; ++n) {
    pk::Ref t = (*misc)[5 + n];
    ASSERT_EQ(t.type(), Type::tuple);
    ASSERT_EQ(t.size(), n);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(t[i].as_int(), static_cast<int64_t>(i + 1));
  }
  EXPECT_EQ((*misc)[10].type(), Type::tuple);
  EXPECT_EQ((*misc)[10].size(), 0u);
  if (with_bytes) {
    EXPECT_EQ((*misc)[11].as_bytes(), std::string("\x00\x01", 2));
    EXPECT_EQ((*misc)[12].as_bytes(), std::string(300, 'b'));
    EXPECT_FALSE((*misc)[11].as_string());
  }
  // A memo-shared dict is one object.
  auto shared = root.get("shared");
  ASSERT_TRUE(shared);
  ASSERT_EQ(shared->size(), 2u);
  EXPECT_EQ((*shared)[0].identity(), (*shared)[1].identity());
  EXPECT_EQ((*shared)[0].get("k")->as_string(), "v");
  EXPECT_EQ(root.get(int64_t{7})->as_string(), "int key");
  EXPECT_FALSE(root.get("missing"));
}

TEST(Pickle, ReadsWhatPythonWritesWithEachProtocol) {
  for (int protocol : {2, 3, 4, 5}) {
    SCOPED_TRACE("protocol " + std::to_string(protocol));
    std::string data = read_file(kData / ("reference_p" + std::to_string(protocol) + ".pkl"));
    ASSERT_FALSE(data.empty());
    pk::Document doc = pk::parse(data);
    EXPECT_EQ(doc.protocol(), protocol);
    check_reference(doc, protocol > 2);
  }
}

TEST(Pickle, Protocol2BytesAreACallAndRefused) {
  // Python 3 pickles bytes with protocol 2 as _codecs.encode(...) through REDUCE.
  std::string msg = error_of(read_file(kData / "reference_p2_bytes.pkl"));
  EXPECT_NE(msg.find("REDUCE (0x52)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("data-only"), std::string::npos) << msg;
  EXPECT_NE(msg.find("offset "), std::string::npos) << msg;
}

// ---- One opcode at a time ---------------------------------------------------------------------

pk::Document parse_ops(const std::string& body, int protocol = 4) {
  return pk::parse(bytes({0x80, protocol}) + body + ".");
}

TEST(Pickle, Scalars) {
  EXPECT_TRUE(parse_ops("N").root().is_none());
  EXPECT_EQ(parse_ops(bytes({0x88})).root().as_bool(), true);
  EXPECT_EQ(parse_ops(bytes({0x89})).root().as_bool(), false);
  EXPECT_EQ(parse_ops(bytes({'K', 200})).root().as_int(), 200);                    // BININT1
  EXPECT_EQ(parse_ops(bytes({'M', 0x34, 0x12})).root().as_int(), 0x1234);          // BININT2
  EXPECT_EQ(parse_ops(bytes({'J', 0xfe, 0xff, 0xff, 0xff})).root().as_int(), -2);  // BININT
  EXPECT_EQ(parse_ops(bytes({0x8a, 0})).root().as_int(), 0);                       // LONG1 empty
  EXPECT_EQ(parse_ops(bytes({0x8a, 1, 0xff})).root().as_int(), -1);
  EXPECT_EQ(parse_ops(bytes({0x8a, 2, 0xff, 0x00})).root().as_int(), 255);
  // LONG1 of a 6-byte address, as snapshots hold them.
  EXPECT_EQ(parse_ops(bytes({0x8a, 6, 0x00, 0x00, 0xa0, 0x44, 0x44, 0x7f})).root().as_int(),
            int64_t{0x7f4444a00000});
  // Redundant sign bytes still fit an int64.
  EXPECT_EQ(parse_ops(bytes({0x8a, 10, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}))
                .root()
                .as_int(),
            -2);
  EXPECT_EQ(parse_ops(bytes({0x8b, 2, 0, 0, 0, 0x01, 0x01})).root().as_int(), 257);  // LONG4
  // 2^64 - 1 (9 bytes): a double.
  pk::Document big =
      parse_ops(bytes({0x8a, 9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00}));
  EXPECT_EQ(big.root().type(), Type::floating);
  EXPECT_DOUBLE_EQ(*big.root().as_double(), 18446744073709551615.0);
  EXPECT_DOUBLE_EQ(*parse_ops(bytes({'G', 0x3f, 0xf8, 0, 0, 0, 0, 0, 0})).root().as_double(), 1.5);
}

TEST(Pickle, StringsAndBytes) {
  EXPECT_EQ(parse_ops(bytes({0x8c, 2}) + "ab").root().as_string(), "ab");  // SHORT_BINUNICODE
  EXPECT_EQ(parse_ops(bytes({'X', 3, 0, 0, 0}) + "abc").root().as_string(), "abc");  // BINUNICODE
  EXPECT_EQ(parse_ops(bytes({0x8d, 1, 0, 0, 0, 0, 0, 0, 0}) + "z").root().as_string(),
            "z");                                                            // BINUNICODE8
  EXPECT_EQ(parse_ops(bytes({'U', 2}) + "py", 2).root().as_string(), "py");  // SHORT_BINSTRING
  EXPECT_EQ(parse_ops(bytes({'T', 1, 0, 0, 0}) + "q", 2).root().as_string(), "q");  // BINSTRING
  EXPECT_EQ(parse_ops(bytes({'C', 2, 0, 1})).root().as_bytes(),
            std::string("\0\1", 2));                                          // SHORT_BINBYTES
  EXPECT_EQ(parse_ops(bytes({'B', 1, 0, 0, 0, 7})).root().as_bytes(), "\7");  // BINBYTES
  EXPECT_EQ(parse_ops(bytes({0x8e, 1, 0, 0, 0, 0, 0, 0, 0, 9})).root().as_bytes(),
            "\t");  // BINBYTES8
  EXPECT_EQ(parse_ops(bytes({0x96, 1, 0, 0, 0, 0, 0, 0, 0, 9}), 5).root().as_bytes(),
            "\t");  // BYTEARRAY8
  EXPECT_EQ(parse_ops(bytes({0x8c, 0})).root().as_string(), "");
}

TEST(Pickle, Containers) {
  // [1, 2, 3] with APPEND and APPENDS; {'a': 1, 'b': 2} with SETITEM and SETITEMS.
  pk::Document l = parse_ops(bytes({']', 'K', 1, 'a', '(', 'K', 2, 'K', 3, 'e'}));
  ASSERT_EQ(l.root().type(), Type::list);
  ASSERT_EQ(l.root().size(), 3u);
  EXPECT_EQ(l.root()[2].as_int(), 3);
  pk::Document d =
      parse_ops(bytes({'}', 0x8c, 1, 'a', 'K', 1, 's', '(', 0x8c, 1, 'b', 'K', 2, 'u'}));
  ASSERT_EQ(d.root().type(), Type::dict);
  EXPECT_EQ(d.root().size(), 2u);
  EXPECT_EQ(d.root().get("b")->as_int(), 2);
  EXPECT_EQ(d.root().key(0).as_string(), "a");
  // A repeated key: the last value wins, as in Python.
  pk::Document dup = parse_ops(bytes({'}', '(', 0x8c, 1, 'a', 'K', 1, 0x8c, 1, 'a', 'K', 2, 'u'}));
  EXPECT_EQ(dup.root().get("a")->as_int(), 2);
  // LIST and DICT (MARK-based), TUPLE, EMPTY_TUPLE, TUPLE1-3.
  EXPECT_EQ(parse_ops(bytes({'(', 'K', 1, 'K', 2, 'l'})).root().size(), 2u);
  EXPECT_EQ(parse_ops(bytes({'(', 'K', 1, 'K', 2, 'd'})).root().get(int64_t{1})->as_int(), 2);
  EXPECT_EQ(parse_ops(bytes({'(', 'K', 1, 'K', 2, 'K', 3, 'K', 4, 't'})).root().size(), 4u);
  EXPECT_EQ(parse_ops(bytes({')'})).root().type(), Type::tuple);
  for (int n = 1; n <= 3; ++n) {
    std::string body;
    for (int i = 0; i < n; ++i) body += bytes({'K', i});
    pk::Document t = parse_ops(body + bytes({0x84 + n}));
    ASSERT_EQ(t.root().type(), Type::tuple);
    EXPECT_EQ(t.root().size(), static_cast<size_t>(n));
  }
  EXPECT_EQ(parse_ops(bytes({'(', 'K', 1, 't'})).root().repr(), "(1,)");
}

TEST(Pickle, StackOpcodes) {
  // POP, POP_MARK, DUP.
  EXPECT_EQ(parse_ops(bytes({'K', 1, 'K', 2, '0'})).root().as_int(), 1);
  EXPECT_EQ(parse_ops(bytes({'K', 1, '(', 'K', 2, 'K', 3, '1'})).root().as_int(), 1);
  pk::Document dup = parse_ops(bytes({']', '2', 'K', 5, 'a', '0'}));  // DUP the list, append, pop
  EXPECT_EQ(dup.root().size(), 1u);
  // POP right after MARK pops the MARK (as Python does).
  EXPECT_EQ(parse_ops(bytes({'K', 9, '(', '0'})).root().as_int(), 9);
}

TEST(Pickle, MemoAndFrames) {
  // FRAME; MEMOIZE (implicit indices 0, 1); BINGET / LONG_BINGET; BINPUT / LONG_BINPUT.
  std::string body = bytes({0x95, 5,    0,   0,   0,    0, 0, 0,   0,  // FRAME (a hint only)
                            ']',  0x94,                                // [] -> memo 0
                            '(',  0x8c, 1,   'x', 0x94,                // 'x' -> memo 1
                            'h',  1,    'j', 1,   0,    0, 0, 'e',     // APPENDS 'x', 'x', 'x'
                            'q',  5,    'r', 6,   0,    0, 0, '0',     // list -> memo 5, 6; POP
                            'h',  5,    'j', 6,   0,    0, 0, 0x86});  // (memo 5, memo 6)
  pk::Document doc = parse_ops(body);
  pk::Ref t = doc.root();
  ASSERT_EQ(t.type(), Type::tuple);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].identity(), t[1].identity());
  ASSERT_EQ(t[0].size(), 3u);
  EXPECT_EQ(t[0][2].as_string(), "x");
  EXPECT_EQ(t.repr(), "(['x', 'x', 'x'], ['x', 'x', 'x'])");
  // Protocol 2/3 memo: BINPUT then BINGET, and a MEMOIZE after sparse puts uses len(memo).
  pk::Document p2 = parse_ops(bytes({'K', 1,    'q', 0,   '0', 'K', 2, 'q', 9, '0', 'K',
                                     3,   0x94, '0', 'h', 0,   'h', 9, 'h', 2, 0x87}),
                              2);
  EXPECT_EQ(p2.root().repr(), "(1, 2, 3)");
  // Every kind of value through the memo, the wide ones (floats, integers of 60 bits or more)
  // included, and a slot put again.
  PickleWriter m(4);
  m.mark();
  const std::vector<std::string> reprs = {"None",
                                          "True",
                                          "-1",
                                          "-576460752303423488",
                                          "576460752303423488",
                                          "9223372036854775807",
                                          "-9223372036854775808",
                                          "0.5",
                                          "'s'",
                                          "b'b'",
                                          "[]"};
  m.none().memoize();
  m.boolean(true).memoize();
  m.integer(-1).memoize();
  m.integer(-(int64_t{1} << 59)).memoize();
  m.integer(int64_t{1} << 59).memoize();
  m.integer(INT64_MAX).memoize();
  m.integer(INT64_MIN).memoize();
  m.floating(0.5).memoize();
  m.str("s").memoize();
  m.bytes("b").memoize();
  m.empty_list().memoize();
  m.op('0');  // the items memoized stay on the stack; the list goes
  for (uint32_t i = 0; i < reprs.size(); ++i) m.get(i);
  m.floating(2.5).op('q').le(7, 1).op('0').get(7);  // slot 7 (0.5) put again
  m.integer(3).op('q').le(5, 1).op('0').get(5);     // slot 5 (wide) now a small integer
  m.tuple();
  std::string first, again;
  for (const std::string& r : reprs) {
    if (r != "[]") first += r + ", ";  // the list was popped
    again += r + ", ";
  }
  const std::string want = "(" + first + again + "2.5, 3)";
  EXPECT_EQ(pk::parse(m.finish()).root().repr(4096), want);
}

// AppendHook: told of each dict as it goes into a list, complete; a released dict reads as
// empty and keeps its identity (the memo still names it).
TEST(Pickle, AppendHookSeesDictsAsTheyGoIntoLists) {
  struct Hook : pk::AppendHook {
    std::vector<std::string> seen;
    pk::Val dict_appended(pk::Document& doc, pk::Val dict) override {
      seen.push_back(pk::Ref(&doc, dict).repr());
      if (pk::Ref(&doc, dict).get("drop")) doc.release(dict);
      return dict;
    }
    void dropped(size_t, size_t, size_t) override {}
  } hook;
  PickleWriter w(4);
  w.empty_list().mark();
  w.empty_dict().mark().str("drop").integer(1).setitems();
  const uint32_t dropped = w.memoize();
  w.empty_dict().mark().str("keep").integer(2).setitems();
  w.appends().mark().get(dropped).appends();  // the released dict again, through the memo
  w.empty_dict().append();                    // not appended as a dict with items: still seen
  pk::Document doc = pk::parse(w.finish(), {}, &hook);
  EXPECT_EQ(hook.seen, (std::vector<std::string>{"{'drop': 1}", "{'keep': 2}", "{}", "{}"}));
  pk::Ref l = doc.root();
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l[0].size(), 0u);  // released
  EXPECT_FALSE(l[0].get("drop"));
  EXPECT_EQ(l[0].identity(), l[2].identity());
  EXPECT_EQ(l[1].get("keep")->as_int(), 2);
  EXPECT_EQ(l.repr(), "[{}, {'keep': 2}, {}, {}]");
}

// The hook may put an equal flat dict already in the document in an appended dict's place: the
// list then holds that one (same identity), and the duplicate may be released.
TEST(Pickle, AppendHookMayKeepOneDictPerContent) {
  struct Hook : pk::AppendHook {
    std::map<std::string, pk::Val> first;
    pk::Val dict_appended(pk::Document& doc, pk::Val dict) override {
      auto [it, fresh] = first.try_emplace(pk::Ref(&doc, dict).repr(), dict);
      if (!fresh) doc.release(dict);
      return it->second;
    }
    void dropped(size_t, size_t, size_t) override {}
  } hook;
  PickleWriter w(4);
  w.empty_list().mark();
  for (int i = 0; i < 3; ++i) {
    w.empty_list().mark();
    w.empty_dict().mark().str("line").integer(7).setitems();
    w.empty_dict().mark().str("line").integer(8 + i % 2).setitems();
    w.appends();
  }
  w.appends();
  pk::Document doc = pk::parse(w.finish(), {}, &hook);
  pk::Ref l = doc.root();
  EXPECT_EQ(l.repr(),
            "[[{'line': 7}, {'line': 8}], [{'line': 7}, {'line': 9}], [{'line': 7}, {'line': 8}]]");
  EXPECT_EQ(l[0][0].identity(), l[1][0].identity());
  EXPECT_EQ(l[0][0].identity(), l[2][0].identity());
  EXPECT_EQ(l[0][1].identity(), l[2][1].identity());
  EXPECT_NE(l[0][1].identity(), l[1][1].identity());

  // A hook that answers with a dict holding a container would change the nesting: refused.
  struct Nested : pk::AppendHook {
    pk::Val outer;
    pk::Val dict_appended(pk::Document& doc, pk::Val dict) override {
      if (pk::Ref(&doc, dict).get("inner")) outer = dict;
      return outer.type == pk::Type::dict ? outer : dict;
    }
    void dropped(size_t, size_t, size_t) override {}
  } nested;
  PickleWriter n(4);
  n.empty_list().mark();
  n.empty_dict().mark().str("inner").empty_list().setitems();
  n.empty_dict().mark().str("x").integer(1).setitems();
  n.appends();
  EXPECT_THROW(pk::parse(n.finish(), {}, &nested), pk::PickleError);
}

using pk::testing::FirstOfEachContent;

// Note [Dropping replaced dicts]: a replaced dict nothing else names leaves the document's
// tables, with the strings in it; the memo slot that named it names its replacement.
TEST(Pickle, ReplacedDictsAreDroppedFromTheTables) {
  PickleWriter w(4);
  w.empty_list().memoize();
  w.mark();
  uint32_t slot = 0;
  for (int i = 0; i < 100; ++i) {
    w.empty_list().memoize();
    w.mark();
    for (int k = 0; k < 10; ++k) {
      w.empty_dict();
      const uint32_t m = w.memoize();
      if (i == 50 && k == 3) slot = m;
      w.mark().str("filename").str("model.py").str("line").integer(k).setitems();
    }
    w.appends();
  }
  w.get(slot);  // the dict of memo `slot` was dropped: its replacement, equal
  w.appends();
  const std::string data = w.finish();
  const pk::Document plain = pk::parse(data);
  FirstOfEachContent hook;
  const pk::Document doc = pk::parse(data, {}, &hook);
  EXPECT_EQ(doc.root().repr(1 << 20), plain.root().repr(1 << 20));
  EXPECT_EQ(plain.container_count(), 1u + 100u * 11u);
  EXPECT_EQ(doc.container_count(), 1u + 100u + 10u);  // the lists and the 10 distinct frames
  EXPECT_EQ(hook.dropped_dicts, 99u * 10u);
  EXPECT_EQ(hook.empty_drops, 0u);
  const pk::Ref l = doc.root();
  ASSERT_EQ(l.size(), 101u);
  EXPECT_EQ(l[100].repr(), "{'filename': 'model.py', 'line': 3}");
  EXPECT_EQ(l[100].identity(), l[0][3].identity());
  EXPECT_EQ(l[50][3].identity(), l[0][3].identity());
}

// What else names a dict keeps it: a copy (DUP, BINGET), a second memo slot, a kept dict above
// it, or a container inside it; a string a memo slot names stays when its dict goes.
TEST(Pickle, DictsNamedElsewhereAreKept) {
  auto frame = [](PickleWriter& w, int line) {
    w.empty_dict().mark().str("line").integer(line).setitems();
  };
  auto run = [](const std::string& data) {
    FirstOfEachContent hook;
    const pk::Document doc = pk::parse(data, {}, &hook);
    EXPECT_EQ(doc.root().repr(1 << 20), pk::parse(data).root().repr(1 << 20));
    EXPECT_EQ(hook.empty_drops, 0u);
    return hook.dropped_dicts;
  };
  // (first, second, after...): `first` a list of the frame {'line': 1}, `second` a list of what
  // `batch` writes; `after` may add items.
  auto two_lists = [&](const std::function<void(PickleWriter&)>& batch,
                       const std::function<void(PickleWriter&)>& after = {}) {
    PickleWriter w(4);
    w.mark().empty_list().mark();
    frame(w, 1);
    w.appends().empty_list().mark();
    batch(w);
    w.appends();
    if (after) after(w);
    return w.tuple().finish();
  };
  auto memoized = [](PickleWriter& w) {  // the frame {'line': 1}, memoized; its slot
    w.empty_dict();
    const uint32_t m = w.memoize();
    w.mark().str("line").integer(1).setitems();
    return m;
  };
  // The same frame again: the second dropped.
  EXPECT_EQ(run(two_lists([&](PickleWriter& w) { frame(w, 1); })), 1u);
  // ... DUP'd: kept.
  EXPECT_EQ(run(two_lists([&](PickleWriter& w) { frame(w, 1), w.op('2'); })), 0u);
  // ... got from the memo before it goes in: kept.
  EXPECT_EQ(run(two_lists([&](PickleWriter& w) { w.get(memoized(w)); })), 0u);
  // ... in two memo slots: kept.
  EXPECT_EQ(run(two_lists([&](PickleWriter& w) {
              w.empty_dict();
              w.memoize();
              w.memoize();
              w.mark().str("line").integer(1).setitems();
            })),
            0u);
  // ... its memo slot put again while it is made: kept (the slot no longer names it).
  {
    PickleWriter w(4);
    w.mark().empty_list().mark().empty_dict().mark().str("line").integer(1).str("x").integer(5);
    w.setitems().appends().empty_list().mark().empty_dict();
    const uint32_t m = w.memoize();
    w.mark().str("line").integer(1).str("x").integer(5).op('q').le(m, 1).setitems().appends();
    EXPECT_EQ(run(w.get(m).tuple().finish()), 0u);
  }
  // A new frame above it in the batch: kept (it is not the newest container).
  EXPECT_EQ(run(two_lists([&](PickleWriter& w) { frame(w, 1), frame(w, 2); })), 0u);
  // A string above it in the batch: kept.
  EXPECT_EQ(run(two_lists([&](PickleWriter& w) { frame(w, 1), w.str("x"); })), 0u);
  {  // a new string inside it that the memo names: the dict goes, the string stays
    PickleWriter w(4);
    w.empty_list().mark();
    w.empty_dict().mark().str("name").str("f").setitems();
    w.appends().empty_list().mark();
    w.empty_dict().mark().str("name").str("f");
    const uint32_t m = w.memoize();
    w.setitems().appends().get(m).str("after").tuple_n(3).tuple_n(2);
    const std::string data = w.finish();
    EXPECT_EQ(run(data), 1u);
    FirstOfEachContent hook;
    EXPECT_EQ(pk::parse(data, {}, &hook).root().repr(),
              "([{'name': 'f'}], ([{'name': 'f'}], 'f', 'after'))");
  }
}

// Random pickles of the shapes the window watches (frame dicts into lists, memo puts and gets,
// copies, strings, nested lists, tuples and DICTs that close it): read with a hook that replaces
// equal dicts, each must read as it does with no hook, or fail the same way. Dropping a dict
// something still names would show as a different value.
TEST(Pickle, DroppingNeverChangesWhatAPickleReads) {
  std::mt19937 rng(20261206);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  size_t dropped = 0, cases = 0, failures = 0;
  for (int c = 0; c < 5000; ++c) {
    PickleWriter w(pick(4) ? 4 : 2);
    std::vector<uint32_t> dicts, strings, lists;  // memo slots (lists: complete ones)
    uint32_t memo = 0;
    auto memoize = [&](std::vector<uint32_t>& into) {
      if (w.protocol() >= 4) {
        w.op(0x94);
      } else {
        w.op('r').le(memo, 4);
      }
      into.push_back(memo++);
    };
    auto value = [&] {
      switch (pick(6)) {
        case 0:
          w.str("s" + std::to_string(pick(3)));
          if (pick(2)) memoize(strings);
          break;
        case 1:
          if (!strings.empty()) {
            w.get(strings[static_cast<size_t>(pick(static_cast<int>(strings.size())))]);
            break;
          }
          [[fallthrough]];
        case 2:
          if (!lists.empty() && pick(4) == 0) {  // a container: the frame is not flat
            w.get(lists[static_cast<size_t>(pick(static_cast<int>(lists.size())))]);
            break;
          }
          [[fallthrough]];
        default:
          w.integer(pick(2));
      }
    };
    auto frame = [&] {
      w.empty_dict();
      if (pick(4)) memoize(dicts);
      if (pick(8) == 0) memoize(dicts);
      w.mark();
      for (int k = pick(2); k >= 0; --k) {
        w.str(std::string(1, static_cast<char>('a' + pick(2))));
        value();
      }
      w.setitems();
    };
    std::function<void(int)> list = [&](int depth) {
      w.empty_list();
      std::vector<uint32_t> mine;
      if (pick(2)) memoize(mine);
      w.mark();
      for (int i = pick(8); i >= 0; --i) {
        switch (pick(16)) {
          case 0:
            if (depth < 2) list(depth + 1);
            break;
          case 1:
            w.str("x");
            break;
          case 2: {
            const auto& from = pick(2) ? dicts : lists;
            if (!from.empty())
              w.get(from[static_cast<size_t>(pick(static_cast<int>(from.size())))]);
            break;
          }
          case 3:
            frame();
            w.op('2');  // DUP
            break;
          case 4:
            frame();
            if (!dicts.empty() && pick(2))  // a memo slot put again
              w.op('r').le(dicts[static_cast<size_t>(pick(static_cast<int>(dicts.size())))], 4);
            break;
          case 5:
            w.mark().str("k").integer(pick(2)).op('d');  // DICT
            break;
          case 6:
            frame();
            w.tuple_n(1);
            break;
          default:
            frame();
        }
      }
      w.appends();
      lists.insert(lists.end(), mine.begin(), mine.end());
    };
    w.mark();
    for (int i = pick(4); i >= 0; --i) list(0);
    w.tuple();
    const std::string data = w.finish();
    std::string plain, hooked;
    try {
      plain = pk::parse(data).root().repr(1 << 20);
    } catch (const PickleError& e) {
      plain = std::string("error: ") + e.what();
    }
    FirstOfEachContent hook;
    try {
      hooked = pk::parse(data, {}, &hook).root().repr(1 << 20);
    } catch (const PickleError& e) {
      hooked = std::string("error: ") + e.what();
    }
    ASSERT_EQ(hooked, plain) << "case " << c;
    dropped += hook.dropped_dicts;
    ASSERT_EQ(hook.empty_drops, 0u) << "case " << c;
    ++cases;
    failures += plain.starts_with("error: ");
    if (plain.starts_with("error: ") && failures < 10) ADD_FAILURE() << plain;
  }
  // Not vacuous: most cases parse, and many dicts were dropped.
  EXPECT_LT(failures, cases / 4);
  EXPECT_GT(dropped, cases / 4);
}

TEST(Pickle, GlobalsAreInertValues) {
  // GLOBAL and STACK_GLOBAL name a callable; the reader keeps the names and calls nothing.
  pk::Document g = parse_ops("cos\nsystem\n", 2);
  ASSERT_EQ(g.root().type(), Type::global);
  EXPECT_EQ(g.root().as_global()->first, "os");
  EXPECT_EQ(g.root().as_global()->second, "system");
  pk::Document sg =
      parse_ops(bytes({0x8c, 8}) + "builtins" + bytes({0x8c, 4}) + "eval" + bytes({0x93}));
  EXPECT_EQ(sg.root().repr(), "<global builtins.eval>");
  // ... and anything that would call it is refused.
  std::string msg = error_of(bytes({0x80, 2}) + "cos\nsystem\n" + bytes({0x8c, 2}) + "id" +
                             bytes({0x85, 'R', '.'}));
  EXPECT_NE(msg.find("REDUCE (0x52)"), std::string::npos) << msg;
  for (int op : {int{'b'}, 0x81, 0x92, int{'i'}, int{'o'}, int{'P'}, int{'Q'}, 0x82, 0x83, 0x84}) {
    std::string m = error_of(bytes({0x80, 4, op, 0, 0, 0, 0, 0, 0, 0, 0, '.'}));
    EXPECT_FALSE(m.empty()) << op;
  }
}

TEST(Pickle, WriterRoundTrip) {
  for (int protocol : {2, 3, 4, 5}) {
    PickleWriter w(protocol);
    w.empty_dict();
    w.memoize();
    w.mark();
    w.str("n").integer(-5'000'000'000);
    w.str("l").empty_list();
    uint32_t list = w.memoize();
    w.mark().integer(1).integer(70000).integer(-1).floating(0.25).none().boolean(true).appends();
    w.str("again").get(list);
    w.str(std::string(70000, 'y')).integer(0);
    w.setitems();
    pk::Document doc = pk::parse(w.finish());
    pk::Ref r = doc.root();
    EXPECT_EQ(r.get("n")->as_int(), -5'000'000'000);
    EXPECT_EQ(r.get("l")->repr(), "[1, 70000, -1, 0.25, None, True]");
    EXPECT_EQ(r.get("again")->identity(), r.get("l")->identity());
    EXPECT_EQ(r.get(std::string(70000, 'y'))->as_int(), 0);
  }
}

// ---- Hostile input --------------------------------------------------------------------------

// Error messages name the offset and the opcode.
TEST(PickleHostile, UnknownOpcode) {
  std::string msg = error_of(bytes({0x80, 4, 'K', 1, 0xff, '.'}));
  EXPECT_EQ(msg, "pickle: offset 4: opcode 0xff: unknown opcode");
  try {
    pk::parse(bytes({0x80, 4, 'K', 1, 0xff, '.'}));
  } catch (const PickleError& e) {
    EXPECT_EQ(e.offset(), 4u);
    EXPECT_EQ(e.opcode(), 0xff);
  }
  EXPECT_NE(error_of(bytes({0x80, 4, 'I'}) + "12\n.").find("protocol 0"), std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, 0x8f, '.'})).find("EMPTY_SET"), std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 6, 'N', '.'})).find("unsupported pickle protocol 6"),
            std::string::npos);
}

TEST(PickleHostile, TruncatedAtEveryOffset) {
  for (int protocol : {2, 3, 4, 5}) {
    std::string data = read_file(kData / ("reference_p" + std::to_string(protocol) + ".pkl"));
    ASSERT_FALSE(data.empty());
    for (size_t n = 0; n < data.size(); ++n) {
      std::string msg = error_of(data.substr(0, n));
      ASSERT_FALSE(msg.empty()) << "prefix of " << n << " bytes parsed";
      ASSERT_NE(msg.find("offset"), std::string::npos) << msg;
    }
  }
  EXPECT_EQ(error_of(""), "pickle: offset 0: input ends before the STOP opcode (truncated pickle)");
  EXPECT_EQ(error_of(bytes({0x80, 4, 'X', 5, 0})),
            "pickle: offset 2: BINUNICODE (0x58): truncated: needs 4 bytes, 2 left");
  // Protocol 4 and later frame their opcodes: a file cut short is cut inside its frame, and
  // the message says it is truncated (it once named only the frame and the bytes left).
  EXPECT_EQ(error_of(bytes({0x80, 4, 0x95, 20, 0, 0, 0, 0, 0, 0, 0, 'K', 1})),
            "pickle: offset 2: FRAME (0x95): truncated pickle: a frame of 20 bytes, but only 2 "
            "bytes are left (the file was cut short)");
}

TEST(PickleHostile, MemoMisuse) {
  EXPECT_EQ(error_of(bytes({0x80, 4, 'h', 3, '.'})),
            "pickle: offset 2: BINGET (0x68): memo entry 3 is not defined");
  EXPECT_NE(error_of(bytes({0x80, 4, 'j', 0xff, 0xff, 0xff, 0xff, '.'}))
                .find("LONG_BINGET (0x6a): memo entry 4294967295"),
            std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, 0x94, '.'})).find("MEMOIZE (0x94): stack underflow"),
            std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, 'q', 1, '.'})).find("BINPUT (0x71): stack underflow"),
            std::string::npos);
  // A far index costs one entry, not a 4G table.
  pk::Document far = pk::parse(
      bytes({0x80, 2, 'K', 7, 'r', 0xfe, 0xff, 0xff, 0xff, '0', 'j', 0xfe, 0xff, 0xff, 0xff, '.'}));
  EXPECT_EQ(far.root().as_int(), 7);
}

TEST(PickleHostile, StackUnderflow) {
  EXPECT_NE(error_of(bytes({0x80, 4, '.'})).find("STOP (0x2e): the stack is empty"),
            std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, 'a', '.'})).find("APPEND (0x61): stack underflow"),
            std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, 'K', 1, 'a', '.'})).find("APPEND (0x61): stack underflow"),
            std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, 'K', 1, 'K', 1, 'a', '.'})).find("expects a list"),
            std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, 'e', '.'})).find("APPENDS (0x65): no MARK is open"),
            std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, 'u', '.'})).find("SETITEMS (0x75): no MARK"),
            std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, '}', '(', 'K', 1, 'u', '.'})).find("odd number"),
            std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, 'K', 1, 0x86, '.'})).find("TUPLE2 (0x86): stack underflow"),
            std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, '0', '.'})).find("POP (0x30): stack underflow"),
            std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, '2', '.'})).find("DUP (0x32): stack underflow"),
            std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, 't', '.'})).find("TUPLE (0x74): no MARK"), std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, 0x93, '.'})).find("STACK_GLOBAL (0x93): stack underflow"),
            std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, 'K', 1, 'K', 1, 0x93, '.'})).find("expects two str"),
            std::string::npos);
  // Items below a MARK are out of reach: a list below the MARK cannot take an APPEND.
  EXPECT_NE(
      error_of(bytes({0x80, 4, ']', '(', 'K', 1, 'a', '.'})).find("APPEND (0x61): stack underflow"),
      std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, ']', '(', 0x85, '.'})).find("TUPLE1 (0x85): stack underflow"),
            std::string::npos);
  // A mark over nothing but the dict: MARK ... SETITEMS needs the dict below the MARK, not above.
  EXPECT_NE(error_of(bytes({0x80, 4, '(', '}', 'u', '.'})).find("SETITEMS (0x75): stack underflow"),
            std::string::npos);
}

TEST(PickleHostile, AbsurdLengths) {
  auto le8 = [](uint64_t v) {
    std::string s;
    for (int i = 0; i < 8; ++i) s += static_cast<char>(v >> (8 * i));
    return s;
  };
  EXPECT_EQ(error_of(bytes({0x80, 4, 0x8d}) + le8(uint64_t{1} << 63) + "."),
            "pickle: offset 2: BINUNICODE8 (0x8d): declared length 9223372036854775808 exceeds the "
            "1 bytes left");
  EXPECT_NE(error_of(bytes({0x80, 4, 0x8e}) + le8(~uint64_t{0}) + ".")
                .find("BINBYTES8 (0x8e): declared length"),
            std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, 'X', 0xff, 0xff, 0xff, 0xff, '.'}))
                .find("BINUNICODE (0x58): declared length 4294967295"),
            std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, 'B', 0xff, 0xff, 0xff, 0x7f, '.'})).find("declared length"),
            std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, 0x8b, 0xff, 0xff, 0xff, 0x7f, '.'}))
                .find("LONG4 (0x8b): declared length"),
            std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, 0x8b, 0xff, 0xff, 0xff, 0xff, '.'}))
                .find("LONG4 (0x8b): negative length"),
            std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 2, 'T', 0xff, 0xff, 0xff, 0xff, '.'}))
                .find("BINSTRING (0x54): negative length"),
            std::string::npos);
  EXPECT_NE(
      error_of(bytes({0x80, 4, 0x95}) + le8(1000) + "N.")
          .find("FRAME (0x95): truncated pickle: a frame of 1000 bytes, but only 2 bytes are left"),
      std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 2}) + "cos\nsys").find("GLOBAL (0x63): truncated: no newline"),
            std::string::npos);
  EXPECT_NE(
      error_of(bytes({0x80, 4, 0x8a, 200, 1, 2, '.'})).find("LONG1 (0x8a): declared length 200"),
      std::string::npos);
}

// A pickle whose values would take far more memory than its size (one byte of EMPTY_DICT is 48
// bytes of values) is refused, naming the bound, before it exhausts the machine; a snapshot's
// shape of the same size under the same bound is read.
TEST(PickleHostile, ValuesPastTheMemoryBudgetAreRefused) {
  pk::Limits small;
  small.min_memory = 1 << 20;  // 1 MiB, and 16 bytes for each byte of input
  const std::string flood = bytes({0x80, 4}) + std::string(2 << 20, '}') + ".";
  const std::string msg = error_of(flood, small);
  EXPECT_NE(msg.find("MiB of memory, more than the 32 MiB allowed (16 bytes for each byte of the "
                     "pickle, at least 1 MiB"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("offset 1048576:"), std::string::npos) << msg;  // at the first check
  // Under the default bound (at least 256 MiB) the same flood reads.
  EXPECT_EQ(error_of(flood), "");
  // Small dicts in lists of 1000, as Python writes them, read with no hook: about 10 bytes of
  // values for each byte.
  PickleWriter w(4);
  w.empty_list().mark();
  const uint32_t key = (w.str("line"), w.memoize());
  for (int batch = 0; w.size() < (3u << 20); ++batch) {
    w.empty_list().mark();
    for (int i = 0; i < 1000; ++i)
      w.empty_dict().mark().get(key).integer(batch * 1000 + i).setitems();
    w.appends();
  }
  const std::string frames = w.appends().finish();
  EXPECT_EQ(error_of(frames, small), "");
}

TEST(PickleHostile, DeepNesting) {
  // [[[...]]] n deep, as Python writes it (EMPTY_LIST per level, then APPENDs closing them).
  auto nested = [](int n) {
    PickleWriter w(4);
    for (int i = 0; i < n; ++i) w.empty_list();
    for (int i = 1; i < n; ++i) w.append();
    return w.finish();
  };
  pk::Limits limits;
  limits.max_depth = 64;
  EXPECT_EQ(error_of(nested(64), limits), "");
  std::string msg = error_of(nested(65), limits);
  EXPECT_NE(msg.find("APPEND (0x61): containers nested deeper than 64"), std::string::npos) << msg;
  // The default limit, and nesting far beyond it: an error, not a stack overflow.
  EXPECT_EQ(error_of(nested(256)), "");
  EXPECT_NE(error_of(nested(100'000)).find("nested deeper than 256"), std::string::npos);
  // Deep MARKs.
  std::string marks = bytes({0x80, 4}) + std::string(100'000, '(') + "N.";
  EXPECT_NE(error_of(marks).find("MARK (0x28): MARKs nested deeper than 256"), std::string::npos);
  // Tuples count too.
  std::string tuples = bytes({0x80, 4, 'N'}) + std::string(1000, static_cast<char>(0x85)) + ".";
  EXPECT_NE(error_of(tuples).find("TUPLE1 (0x85): containers nested deeper"), std::string::npos);
  // Height propagates through shared containers: a memo'd 200-deep list nested twice more in
  // two ways, 201 and 202 deep.
  PickleWriter w(4);
  for (int i = 0; i < 200; ++i) w.empty_list();
  for (int i = 1; i < 200; ++i) w.append();
  uint32_t deep = w.memoize();
  w.op(0x85).get(deep).op(0x86);  // ((deep,), deep): 202 deep
  limits.max_depth = 201;
  EXPECT_NE(error_of(w.finish(), limits).find("TUPLE2 (0x86): containers nested deeper than 201"),
            std::string::npos);
}

TEST(PickleHostile, SelfReferenceIsRefused) {
  // l = []; l.append(l)
  EXPECT_NE(
      error_of(bytes({0x80, 4, ']', 0x94, 'h', 0, 'a', '.'})).find("appends a list to itself"),
      std::string::npos);
  // d = {}; d['d'] = d
  EXPECT_NE(
      error_of(bytes({0x80, 4, '}', 0x94, 0x8c, 1, 'd', 'h', 0, 's', '.'})).find("into itself"),
      std::string::npos);
  // a = []; b = [a]; a.append(b): a is nested in b, so it can no longer change.
  std::string msg =
      error_of(bytes({0x80, 4, ']', 0x94, ']', 'h', 0, 'a', 0x94, '0', 'h', 0, 'h', 1, 'a', '.'}));
  EXPECT_NE(msg.find("already nested"), std::string::npos) << msg;
  // Python writes such cycles the same way.
  EXPECT_NE(error_of(bytes({0x80, 4, ']', 0x94, '(', 'h', 0, 'e', '.'}))
                .find("APPENDS (0x65): appends a list to itself"),
            std::string::npos);
}

TEST(PickleHostile, DictKeys) {
  EXPECT_NE(error_of(bytes({0x80, 4, '}', ']', 'N', 's', '.'}))
                .find("SETITEM (0x73): dict key of type list"),
            std::string::npos);
  EXPECT_NE(error_of(bytes({0x80, 4, '}', 'N', 'N', 's', '.'})).find("dict key of type None"),
            std::string::npos);
}

// Every single-byte change of a valid pickle parses or fails cleanly.
TEST(PickleHostile, MutatedBytes) {
  std::string data = read_file(kData / "reference_p4.pkl");
  ASSERT_FALSE(data.empty());
  std::mt19937 rng(7);
  size_t failures = 0, total = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    for (int v : {0x00, 0xff, static_cast<int>(rng() & 0xff), static_cast<int>(rng() & 0xff)}) {
      std::string m = data;
      m[i] = static_cast<char>(v);
      try {
        pk::Document doc = pk::parse(m);
        (void)doc.root().repr(1000);
      } catch (const PickleError& e) {
        ++failures;
        ASSERT_NE(std::string(e.what()).find("offset"), std::string::npos);
      }
      ++total;
    }
  }
  EXPECT_GT(failures, 0u);
  EXPECT_LT(failures, total);
}

}  // namespace
