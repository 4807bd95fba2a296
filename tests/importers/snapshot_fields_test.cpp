// What newer PyTorch writes into a memory snapshot, kept by the importer: the FX fields of
// frames of compiled code (Note [FX frames]). Each test builds a snapshot with the field and
// checks what a user sees; the expected figures are worked out by hand beside them.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "profiler/analysis/memory.h"
#include "profiler/analysis/trace.h"
#include "snapshot_builder.h"

namespace {

using namespace snapshot_test;
namespace an = tidemark::analysis;

// ---- FX frames --------------------------------------------------------------------------------

TEST(SnapshotFields, FxFramesNameTheUsersSource) {
  TempDir dir;
  // Innermost first, as PyTorch writes frames: an aten op, the FX GraphModule's generated
  // forward (with the node and the traceback of the user's source that traced it), dynamo,
  // the user's training loop.
  const Frame op{"addmm", "/usr/lib/python3/site-packages/torch/_ops.py", 723};
  Frame generated{"forward", "<eval_with_key>.3", 7};
  generated.fx_node_op = "call_function";
  generated.fx_node_name = "addmm";
  generated.fx_node_target = "aten.addmm.default";
  generated.fx_original_trace =
      "  File \"/x/train.py\", line 40, in forward\n"
      "    return self.block(x)\n"
      "  File \"/x/model.py\", line 12, in forward\n"
      "    a = self.net1(x)\n"
      "        ^^^^^^^^^^^^\n";
  const Frame dynamo{"_fn", "/usr/lib/python3/site-packages/torch/_dynamo/eval_frame.py", 600};
  const Frame loop{"main", "/x/train.py", 80};
  // The same generated frame with a trace that names no source line, and with none at all.
  Frame bad = generated;
  bad.line = 9;
  bad.fx_original_trace = "no traceback here";
  Frame plain{"forward", "<eval_with_key>.3", 11};
  const std::vector<Ent> trace = {
      {"alloc", 0x100000, 4 * MiB, 10, 0, {op, generated, dynamo, loop}},
      {"alloc", 0x500000, 1 * MiB, 20, 0, {op, bad, dynamo, loop}},
      {"alloc", 0x600000, 2 * MiB, 30, 0, {op, plain, dynamo, loop}},
  };
  const std::string out = dir.file("fx.db");
  const im::ImportStats stats = im::import_pytorch_snapshot(write(dir, "fx.pickle", SnapshotBuilder().build({}, {trace})), out);
  EXPECT_EQ(stats.notes,
            std::vector<std::string>{"1 frames whose 'fx_original_trace' is not a Python traceback (kept as they are)"});

  // The site of the first alloc is the user's line that made the node, the node in its label;
  // the others keep the generated frame, which is not library code, so it is their site (one
  // site: a site is a function in a file, labelled with its line holding the most bytes).
  an::Trace t = an::Trace::open(out);
  std::map<std::string, int64_t> by_site;
  for (const an::Group& g : an::leaks(t, t.device("cuda:0").id, an::GroupBy::site, 0).groups) by_site[g.label] = g.bytes;
  const std::map<std::string, int64_t> want = {
      {"forward [fx addmm: aten.addmm.default] (model.py:12)", int64_t{4 * MiB}},
      {"forward (<eval_with_key>.3:11)", int64_t{1 * MiB + 2 * MiB}},
  };
  EXPECT_EQ(by_site, want);

  // The whole stacks, innermost first: the user's two lines in place of the generated frame.
  const st::TraceReader& r = t.reader();
  std::map<uint64_t, std::vector<std::string>> stacks;
  for (const st::AllocationRow& a : r.allocations(t.device("cuda:0").id))
    for (uint64_t ip : r.stack(a.stack_id)) {
      const st::ResolvedFrame f = r.frames(ip).at(0);
      stacks[a.addr].push_back(f.function + " " + f.file + ":" + std::to_string(f.line));
    }
  const std::string op_line = "addmm /usr/lib/python3/site-packages/torch/_ops.py:723",
                    dynamo_line = "_fn /usr/lib/python3/site-packages/torch/_dynamo/eval_frame.py:600",
                    loop_line = "main /x/train.py:80";
  const std::map<uint64_t, std::vector<std::string>> want_stacks = {
      {0x100000,
       {op_line, "forward [fx addmm: aten.addmm.default] /x/model.py:12", "forward /x/train.py:40", dynamo_line,
        loop_line}},
      {0x500000, {op_line, "forward <eval_with_key>.3:9", dynamo_line, loop_line}},
      {0x600000, {op_line, "forward <eval_with_key>.3:11", dynamo_line, loop_line}},
  };
  EXPECT_EQ(stacks, want_stacks);
}

}  // namespace
