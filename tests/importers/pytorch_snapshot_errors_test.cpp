// PyTorch snapshot import of bad and odd input: files that are not snapshots, hostile pickles,
// fields out of range, memo-shared traces, and descriptive fields counted rather than fatal.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "profiler/analysis/details.h"
#include "profiler/analysis/trace.h"
#include "snapshot_builder.h"

namespace {

using namespace snapshot_test;
namespace an = tidemark::analysis;

// ---- Bad input --------------------------------------------------------------------------------

std::string import_error(const std::string& in, const std::string& out) {
  try {
    im::import_pytorch_snapshot(in, out);
  } catch (const im::ImportError& e) {
    EXPECT_FALSE(fs::exists(out)) << "partial output left: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "imported " << in;
  return "";
}

TEST(PytorchSnapshotErrors, FilesThatAreNotSnapshots) {
  TempDir dir;
  std::string out = dir.file("out.db");
  std::string missing = dir.file("missing.pickle");
  EXPECT_EQ(import_error(missing, out), missing + ": cannot open: no such file");
  std::string empty = write(dir, "empty", "");
  EXPECT_EQ(import_error(empty, out), empty + ": not a pickle: the file is empty");
  std::string sqlite =
      write(dir, "x.db", std::string("SQLite format 3\0", 16) + std::string(100, '\0'));
  EXPECT_NE(import_error(sqlite, out).find("already a trace?"), std::string::npos);
  std::string text = write(dir, "t.txt", "hello");
  EXPECT_NE(import_error(text, out).find(text + ": not a pickle of protocol 2 to 5"),
            std::string::npos);
  PickleWriter w(4);
  std::string number = write(dir, "n.pickle", w.integer(3).finish());
  EXPECT_EQ(import_error(number, out),
            number +
                ": not a PyTorch memory snapshot: the pickle holds int 3, expected "
                "a dict with 'segments' and 'device_traces'");
  PickleWriter w2(4);
  std::string nosegs = write(dir, "d.pickle", w2.empty_dict().finish());
  EXPECT_EQ(import_error(nosegs, out),
            nosegs + ": not a PyTorch memory snapshot: snapshot: no 'segments' field");
  EXPECT_NE(import_error(dir.file(""), out).find("is a directory"), std::string::npos);
}

// Note [Lenient fields]: what describes (segment types, block states, frames) never refuses a
// file; odd values are read as unknown and counted.
TEST(PytorchSnapshot, OddDescriptiveFieldsAreCountedNotFatal) {
  TempDir dir;
  std::vector<Seg> segs = {
      {0,
       0x1000,
       2 * MiB,
       0,
       "medium",
       false,
       {{0x1000, 512, 512, "zombie", {}}, {0x1200, 1024, 1000, "active_allocated", {}}}}};
  std::string in = write(dir, "odd.pickle", SnapshotBuilder().build(segs, {}));
  im::ImportStats stats = im::import_pytorch_snapshot(in, dir.file("odd.db"));
  EXPECT_EQ(stats.notes, (std::vector<std::string>{
                             "1 segments of an unknown 'segment_type' (pool taken from the size)",
                             "1 blocks of an unknown 'state' (read as inactive)"}));
  st::TraceReader r =
      st::TraceReader::open(dir.file("odd.db"), st::TraceReader::Require::finalized);
  EXPECT_EQ(final_values(r, device_row(r, 0)).allocated, 1024);     // the zombie is not allocated
  EXPECT_EQ(r.segments_where("", {}).at(0).pool, ev::Pool::small);  // 2 MiB: the small pool's size

  // Frames: one not a dict, one with a float line and a name that is a list, one with a None line.
  PickleWriter w(4);
  w.empty_dict().mark().str("segments").empty_list().str("device_traces").empty_list().mark();
  w.empty_list().mark().empty_dict().mark();
  w.str("action")
      .str("alloc")
      .str("addr")
      .integer(4096)
      .str("size")
      .integer(512)
      .str("time_us")
      .integer(1);
  w.str("frames").empty_list().mark().str("not a frame");
  w.empty_dict()
      .mark()
      .str("name")
      .empty_list()
      .str("filename")
      .str("a.py")
      .str("line")
      .floating(1.8446744073709552e19)
      .setitems();
  w.empty_dict()
      .mark()
      .str("name")
      .str("f")
      .str("filename")
      .str("b.py")
      .str("line")
      .none()
      .setitems();
  w.appends().setitems().appends().appends().setitems();
  std::string fr = write(dir, "frames.pickle", w.finish());
  stats = im::import_pytorch_snapshot(fr, dir.file("frames.db"));
  EXPECT_EQ(stats.notes, (std::vector<std::string>{
                             "1 frames whose 'name' is not a str (read as unknown)",
                             "1 frames whose 'line' is not a line number (read as unknown)",
                             "1 frames that are not dicts (read as unknown)"}));
  st::TraceReader fr_r =
      st::TraceReader::open(dir.file("frames.db"), st::TraceReader::Require::finalized);
  auto allocs = fr_r.allocations(device_row(fr_r, 0));
  ASSERT_EQ(allocs.size(), 1u);
  std::vector<uint64_t> ips = fr_r.stack(allocs[0].stack_id);
  ASSERT_EQ(ips.size(), 3u);  // innermost first: the unknown frame, a.py, b.py
  EXPECT_EQ(fr_r.frames(ips[1])[0].file, "a.py");
  EXPECT_EQ(fr_r.frames(ips[1])[0].line, 0);
  EXPECT_EQ(fr_r.frames(ips[1])[0].function, "");
  EXPECT_EQ(fr_r.frames(ips[2])[0].function, "f");
}

TEST(PytorchSnapshotErrors, BadFieldsNameTheEntry) {
  TempDir dir;
  std::string out = dir.file("out.db");
  std::vector<Seg> bad_dev = {{200, 0x1000, 2 * MiB, 0, "small", false, {}}};
  std::string dev_path = write(dir, "dev.pickle", SnapshotBuilder().build(bad_dev, {}));
  EXPECT_NE(import_error(dev_path, out).find("segments[0]: device index 200 is out of range"),
            std::string::npos);
  // A trace for device 128.
  std::vector<std::vector<Ent>> many(129);
  many[128] = {{"alloc", 0x1000, 512, 5, 0, {}}};
  std::string many_path = write(dir, "many.pickle", SnapshotBuilder().build({}, many));
  EXPECT_NE(
      import_error(many_path, out).find("device_traces[128]: device index 128 is out of range"),
      std::string::npos);
  // A missing field.
  PickleWriter m(4);
  m.empty_dict().mark().str("segments").empty_list().str("device_traces").empty_list().mark();
  m.empty_list().mark().empty_dict().mark();
  m.str("action").str("free_requested").str("size").integer(512).str("time_us").integer(1);
  m.setitems().appends().appends().setitems();
  std::string miss = write(dir, "miss.pickle", m.finish());
  EXPECT_EQ(import_error(miss, out),
            miss + ": not a PyTorch memory snapshot: device_traces[0][0]: no 'addr' field");
}

TEST(PytorchSnapshotErrors, HostilePickles) {
  TempDir dir;
  std::string out = dir.file("out.db");
  std::vector<std::vector<Ent>> traces = {
      {{"alloc", 0x1000, 512, 5, 0, {{"f", "g.py", 1}}},
       {"free_requested", 0x1000, 512, 6, 0, {{"f", "g.py", 1}}}}};
  std::string good = SnapshotBuilder().build({}, traces);
  // Every truncation fails cleanly and leaves no output.
  for (size_t n = 1; n < good.size(); n += 7) {
    std::string path = write(dir, "cut.pickle", good.substr(0, n));
    std::string msg = import_error(path, out);
    ASSERT_NE(msg.find(path + ": pickle: offset "), std::string::npos) << msg;
  }
  // A pre-existing output file is left alone when the input is refused before writing.
  std::ofstream(out) << "keep";
  try {
    im::import_pytorch_snapshot(write(dir, "cut.pickle", good.substr(0, 10)), out);
  } catch (const im::ImportError&) {
  }
  EXPECT_TRUE(fs::exists(out));
}

// Issue-level hostile input: a device file is refused at once, absurd sizes name the field, and
// a small pickle whose memo shares one trace among many devices cannot expand without bound.
TEST(PytorchSnapshotErrors, NotARegularFile) {
  TempDir dir;
  std::string out = dir.file("out.db");
  EXPECT_EQ(import_error("/dev/zero", out),
            "/dev/zero: cannot read: not a regular file (a device, pipe or socket); save the "
            "snapshot to a file first");
  // A large file of another kind is refused on its first byte, before it is read.
  std::string big = dir.file("big.bin");
  {
    std::ofstream f(big, std::ios::binary);
    f << "x";
  }
  fs::resize_file(big, uint64_t{4} << 30);  // 4 GiB, sparse
  EXPECT_NE(import_error(big, out).find(big + ": not a pickle of protocol 2 to 5"),
            std::string::npos);
}

TEST(PytorchSnapshotErrors, SizesOutOfRangeNameTheField) {
  TempDir dir;
  std::string out = dir.file("out.db");
  std::vector<std::vector<Ent>> traces = {{{"alloc", 0x1000, uint64_t{INT64_MAX}, 5, 0, {}}}};
  std::string huge = write(dir, "huge.pickle", SnapshotBuilder().build({}, traces));
  EXPECT_EQ(import_error(huge, out), huge +
                                         ": not a PyTorch memory snapshot: device_traces[0][0]: "
                                         "'size' 9223372036854775807 is out of "
                                         "range (more than 2^56)");
  PickleWriter w(4);  // a segment whose total_size is -17
  w.empty_dict().mark().str("segments").empty_list().mark().empty_dict().mark();
  w.str("device")
      .integer(0)
      .str("address")
      .integer(4096)
      .str("total_size")
      .integer(-17)
      .str("blocks")
      .empty_list();
  w.setitems().appends().setitems();
  std::string negative = write(dir, "neg.pickle", w.finish());
  EXPECT_EQ(
      import_error(negative, out),
      negative + ": not a PyTorch memory snapshot: segments[0]: 'total_size' is negative (-17)");
}

TEST(PytorchSnapshotErrors, MemoSharedTracesCannotExpandWithoutBound) {
  TempDir dir;
  std::string out = dir.file("out.db");
  // One trace of 20,000 entries (each the same memoized dict), named by 100 devices: 2 million
  // entries from a pickle of about 40 KB.
  PickleWriter w(4);
  w.empty_dict().mark().str("segments").empty_list().str("device_traces").empty_list().mark();
  w.empty_list();
  uint32_t list = w.memoize();
  w.mark();
  w.empty_dict()
      .mark()
      .str("action")
      .str("snapshot")
      .str("size")
      .integer(0)
      .str("time_us")
      .integer(1)
      .setitems();
  uint32_t entry = w.memoize();
  for (int i = 1; i < 20000; ++i) w.get(entry);
  w.appends();
  for (int d = 1; d < 100; ++d) w.get(list);
  w.appends().setitems();
  std::string bomb = write(dir, "bomb.pickle", w.finish());
  std::string msg = import_error(bomb, out);
  EXPECT_NE(
      msg.find(bomb +
               ": device_traces[50]: the snapshot expands to more than 1000000 trace entries"),
      std::string::npos)
      << msg;
  EXPECT_NE(msg.find("--max-events raises the limit"), std::string::npos);
  // A caller who means it raises the limit.
  im::ImportOptions o;
  o.max_events = 3'000'000;
  EXPECT_EQ(im::import_pytorch_snapshot(bomb, out, o).devices, 100);
}

// Two devices naming one trace of distinct entries through the memo: the first takes the
// entries read while parsing without a copy, the second reads them where they went.
TEST(PytorchSnapshotErrors, MemoSharedTraceOfDistinctEntries) {
  TempDir dir;
  PickleWriter w(4);
  w.empty_dict().mark().str("segments").empty_list().str("device_traces").empty_list().mark();
  w.empty_list();
  const uint32_t list = w.memoize();
  w.mark();
  for (int i = 0; i < 3; ++i)
    w.empty_dict()
        .mark()
        .str("action")
        .str("alloc")
        .str("addr")
        .integer(0x1000 * (i + 1))
        .str("size")
        .integer(1024)
        .str("time_us")
        .integer(i + 1)
        .setitems();
  w.appends();
  w.get(list);
  w.appends().setitems();
  const std::string out = dir.file("out.db");
  const im::ImportStats s =
      im::import_pytorch_snapshot(write(dir, "shared.pickle", w.finish()), out);
  EXPECT_EQ(s.devices, 2);
  st::TraceReader r = st::TraceReader::open(out, st::TraceReader::Require::finalized);
  for (int d : {0, 1}) EXPECT_EQ(final_values(r, device_row(r, d)).allocated, 3 * 1024);
}

// allocator_settings that share one list through the memo at every level of a 40-deep nest
// (2^40 leaves from a pickle of a few hundred bytes) are left out, not rendered; settings of a
// real shape are kept as they are.
TEST(PytorchSnapshotErrors, MemoSharedSettingsAreLeftOutNotExpanded) {
  TempDir dir;
  auto snapshot = [](bool bomb) {
    PickleWriter w(4);
    w.empty_dict().mark().str("segments").empty_list().str("device_traces").empty_list().mark();
    w.empty_list().mark();
    w.empty_dict()
        .mark()
        .str("action")
        .str("alloc")
        .str("addr")
        .integer(0x1000)
        .str("size")
        .integer(512);
    w.str("time_us").integer(1).setitems();
    w.appends().appends();
    w.str("allocator_settings").empty_dict().mark().str("roundup_power2_divisions");
    if (bomb) {
      w.str("x");
      uint32_t prev = w.memoize();
      w.op('0');  // POP: each level stays only in the memo
      for (int level = 0; level < 40; ++level) {
        w.empty_list().mark().get(prev).get(prev).appends();
        prev = w.memoize();
        w.op('0');
      }
      w.get(prev);
    } else {
      w.empty_list().mark().integer(1).integer(2).integer(4).appends();
    }
    w.setitems().setitems();
    return w.finish();
  };
  const std::string bomb = write(dir, "bomb.pickle", snapshot(true));
  ASSERT_LT(fs::file_size(bomb), 1024u);
  const im::ImportStats s = im::import_pytorch_snapshot(bomb, dir.file("bomb.db"));
  EXPECT_EQ(s.notes, (std::vector<std::string>{
                         "1 'allocator_settings' longer than 64 KiB or nested deeper than 16 "
                         "levels (left out; replay assumes PyTorch's defaults)"}));
  EXPECT_EQ(st::TraceReader::open(dir.file("bomb.db")).meta().allocator_settings, "");
  const std::string real = write(dir, "real.pickle", snapshot(false));
  EXPECT_TRUE(im::import_pytorch_snapshot(real, dir.file("real.db")).notes.empty());
  EXPECT_EQ(st::TraceReader::open(dir.file("real.db")).meta().allocator_settings,
            "roundup_power2_divisions:[1,2,4]");
}

// Note [Annotation depth]: ranges that open and never close nest as scopes; past 256 open
// ones they are left out with the ENDs that close them, and the trace stays small. 300 STARTs
// r0..r299, then END r299 (of a range left out: left out too), END r255 (closes the
// innermost kept range), START s (kept: 255 are open).
TEST(PytorchSnapshotErrors, AnnotationsNestedWithoutBoundAreLeftOutPastADepth) {
  TempDir dir;
  std::vector<Ann> anns;
  for (int i = 0; i < 300; ++i) anns.push_back({"START", "r" + std::to_string(i), 0, 1 + i});
  anns.push_back({"END", "r299", 0, 400});
  anns.push_back({"END", "r255", 0, 401});
  anns.push_back({"START", "s", 0, 402});
  std::vector<std::vector<Ent>> traces = {{{"alloc", 0x1000, 512, 500, 0, {}}}};
  const std::string in =
      write(dir, "nest.pickle", SnapshotBuilder().annotations(anns).build({}, traces));
  const std::string out = dir.file("nest.db");
  const im::ImportStats stats = im::import_pytorch_snapshot(in, out);
  EXPECT_EQ(stats.annotations, 258u);  // 256 STARTs, END r255, START s
  EXPECT_EQ(
      stats.notes,
      (std::vector<std::string>{"45 annotations nested deeper than 256 open ranges (left out)"}));
  an::Trace t = an::Trace::open(out);
  std::vector<an::ScopeSpan> spans = an::scopes(t, 0, INT64_MAX);
  ASSERT_EQ(spans.size(), 257u);
  EXPECT_EQ(spans[255].name, "r255");
  EXPECT_EQ(spans[255].pop_ts.value_or(0), 401'000u);
  EXPECT_EQ(spans[256].name, "s");
  EXPECT_EQ(spans[256].depth, 255);
  for (int i = 0; i < 255; ++i) EXPECT_FALSE(spans[i].pop_ts) << spans[i].name;

  // Annotations count toward the expansion bound, so --max-events bounds them too.
  im::ImportOptions o;
  o.max_events = 100;
  fs::remove(out);
  try {
    im::import_pytorch_snapshot(in, out, o);
    ADD_FAILURE() << "imported past the bound";
  } catch (const im::ImportError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  in + ": external_annotations: the snapshot expands to more than 100 trace "
                       "entries, blocks and annotations"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
