// flame_tree (profiler/analysis/flame.h): stacks merged from the outermost frame, with bytes
// and counts worked out by hand; runs of library frames folded (Note [Folded library frames]).
#include "profiler/analysis/flame.h"

#include <gtest/gtest.h>

#include <functional>

#include "trace_builder.h"

namespace {

namespace an = tidemark::analysis;
using analysis_test::Builder;
using analysis_test::remove_trace;
using analysis_test::temp_path;

an::Group stack(std::vector<std::string> innermost_first, int64_t bytes, uint64_t count,
                std::vector<bool> library = {}) {
  an::Group g;
  g.frames = std::move(innermost_first);
  g.library = std::move(library);
  g.bytes = bytes;
  g.count = count;
  return g;
}

// Every node of a tree, depth first.
void each_node(const an::FlameNode& n, const std::function<void(const an::FlameNode&)>& f) {
  f(n);
  for (const an::FlameNode& c : n.children) each_node(c, f);
}

TEST(FlameTree, MergesStacksFromTheOutermostFrame) {
  an::FlameNode root =
      an::flame_tree({stack({"c", "b", "main"}, 10, 2), stack({"d", "main"}, 25, 1),
                      stack({"main"}, 4, 1), stack({}, 3, 3)});
  EXPECT_EQ(root.frame, "");
  EXPECT_EQ(root.bytes, 42);
  EXPECT_EQ(root.count, 7u);
  ASSERT_EQ(root.children.size(), 2u);
  const an::FlameNode& main = root.children[0];  // largest first
  EXPECT_EQ(main.frame, "main");
  EXPECT_EQ(main.bytes, 39);
  EXPECT_EQ(main.count, 4u);
  EXPECT_EQ(main.self_bytes, 4);  // the stack that ends in main itself
  ASSERT_EQ(main.children.size(), 2u);
  EXPECT_EQ(main.children[0].frame, "d");
  EXPECT_EQ(main.children[0].bytes, 25);
  EXPECT_EQ(main.children[1].frame, "b");
  EXPECT_EQ(main.children[1].self_bytes, 0);
  ASSERT_EQ(main.children[1].children.size(), 1u);
  EXPECT_EQ(main.children[1].children[0].frame, "c");
  EXPECT_EQ(main.children[1].children[0].count, 2u);
  EXPECT_EQ(root.children[1].frame, "(no stack)");
  EXPECT_EQ(root.children[1].bytes, 3);
  EXPECT_EQ(root.depth(), 3u);
  EXPECT_EQ(an::flame_tree({}).bytes, 0);
}

TEST(FlameTree, OneFunctionCalledFromSeveralLinesIsOneFrameWithItsLocations) {
  an::FlameNode root = an::flame_tree(
      {stack(
           {"alloc (x.cpp:5)", "main (m.cpp:10)", "__libc_start_main (libc-start.c:360)", "_start"},
           6, 1),
       stack({"alloc (x.cpp:5)", "main (m.cpp:12)", "__libc_start_call_main (c.h:58)",
              "__libc_start_main (libc-start.c:360)"},
             4, 1)});
  ASSERT_EQ(root.children.size(), 1u);  // the C runtime's start-up frames are left out
  const an::FlameNode& main = root.children[0];
  EXPECT_EQ(main.frame, "main (m.cpp)");
  EXPECT_EQ(main.bytes, 10);
  EXPECT_EQ(main.locations,
            (std::vector<std::pair<std::string, int64_t>>{{"m.cpp:10", 6}, {"m.cpp:12", 4}}));
  ASSERT_EQ(main.children.size(), 1u);
  EXPECT_EQ(main.children[0].frame, "alloc (x.cpp)");
  EXPECT_EQ(main.children[0].locations,
            (std::vector<std::pair<std::string, int64_t>>{{"x.cpp:5", 10}}));
}

TEST(FlameTree, SameNamedFunctionsOfDifferentFilesStayApart) {
  an::FlameNode root = an::flame_tree({stack({"forward (linear.py:116)", "run (t.py:3)"}, 5, 1),
                                       stack({"forward (dropout.py:59)", "run (t.py:3)"}, 2, 1)});
  ASSERT_EQ(root.children.size(), 1u);
  ASSERT_EQ(root.children[0].children.size(), 2u);
  EXPECT_EQ(root.children[0].children[0].frame, "forward (linear.py)");
  EXPECT_EQ(root.children[0].children[1].frame, "forward (dropout.py)");
}

TEST(FlameTree, SplitsLabelsAndFindsStartUpFrames) {
  using P = std::pair<std::string_view, std::string_view>;
  EXPECT_EQ(an::split_frame("tl::Tensor::relu() const (elementwise.cpp:644)"),
            (P{"tl::Tensor::relu() const", "elementwise.cpp:644"}));
  EXPECT_EQ(an::split_frame("std::function<void (int)>::operator()"),
            (P{"std::function<void (int)>::operator()", ""}));
  EXPECT_EQ(an::split_frame("f (not a location)"), (P{"f (not a location)", ""}));
  EXPECT_EQ(an::split_frame("0x1000"), (P{"0x1000", ""}));
  EXPECT_EQ(an::startup_frames({"f", "main (a.cpp:1)", "__libc_start_call_main (c.h:58)",
                                "__libc_start_main (libc-start.c:360)", "_start"}),
            3u);
  EXPECT_EQ(an::startup_frames({"_start"}), 0u);  // never every frame
  EXPECT_EQ(an::startup_frames({"worker (w.cpp:3)", "start_thread (pthread_create.c:442)"}), 0u);
}

TEST(FlameTree, ADifferentialGraphHasBsWidthsAndAsBytesAsItsBase) {
  an::FlameNode a = an::flame_tree({stack({"f", "main"}, 6, 1), stack({"g", "main"}, 4, 1)});
  an::FlameNode b = an::flame_tree({stack({"f", "main"}, 12, 2), stack({"h", "main"}, 3, 1)});
  an::FlameNode d = an::flame_diff(a, b);
  EXPECT_EQ(d.bytes, 15);
  EXPECT_EQ(d.base_bytes, 10);
  ASSERT_EQ(d.children.size(), 1u);
  const an::FlameNode& main = d.children[0];
  EXPECT_EQ(main.base_bytes, 10);
  ASSERT_EQ(main.children.size(), 2u);  // g vanished: only in its caller's change
  EXPECT_EQ(main.children[0].frame, "f");
  EXPECT_EQ(main.children[0].bytes, 12);
  EXPECT_EQ(main.children[0].base_bytes, 6);
  EXPECT_EQ(main.children[1].frame, "h");
  EXPECT_EQ(main.children[1].base_bytes, 0);  // new in b
  EXPECT_EQ(a.base_bytes, -1);                // a plain graph
}

TEST(FoldedLibraryFrames, RunsAreTwoOrMoreConsecutiveLibraryFrames) {
  using Runs = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(an::library_runs({false, true, true, true, false, true, false, true, true}),
            (Runs{{1, 4}, {7, 9}}));  // the lone library frame at 5 stays
  EXPECT_EQ(an::library_runs({true, true}), (Runs{{0, 2}}));
  EXPECT_EQ(an::library_runs({true, false, true}), Runs{});
  EXPECT_EQ(an::library_runs({}), Runs{});
  EXPECT_EQ(an::folded_frame_label(12, "tl::Tensor tl::matmul(tl::Tensor const&) (linalg.cpp)"),
            "… 12 library frames (tl::matmul …)");
  EXPECT_EQ(an::folded_frame_label(3, "void at::native::fill<float>(at::Tensor&) (Fill.cpp)"),
            "… 3 library frames (at::native::fill<float> …)");
  EXPECT_EQ(an::folded_frame_label(2, "0x1000"), "… 2 library frames (0x1000 …)");
  EXPECT_EQ(an::folded_frame_label(28, "tl::nn::Module::operator()(tl::Tensor const&) (module.h)"),
            "… 28 library frames (tl::nn::Module::operator() …)");
}

// Stacks innermost first. L: library frames.
//   A 100 B in 2: main > step > L1 L2 L3 L4 L5 > hook > La Lb
//   B  50 B in 1: main > step > L1 L2 L3 L4 L5 > hook2
//   C   7 B in 1: main > step > L1 Lx                      (another run under step)
//   D   3 B in 1: main > Ls > user                         (a lone library frame)
std::vector<an::Group> fold_stacks() {
  const std::vector<std::string> run = {"L5 (l.cpp:5)", "L4 (l.cpp:4)", "L3 (l.cpp:3)",
                                        "L2 (l.cpp:2)", "L1 (l.cpp:1)"};
  auto with_run = [&](std::vector<std::string> inner, std::vector<bool> lib) {
    for (const std::string& f : run) inner.push_back(f), lib.push_back(true);
    inner.insert(inner.end(), {"step (t.py:7)", "main (t.py:1)"});
    lib.insert(lib.end(), {false, false});
    return std::pair{inner, lib};
  };
  auto [a, la] = with_run({"Lb (b.cpp:9)", "La (a.cpp:3)", "hook (t.py:20)"}, {true, true, false});
  auto [b, lb] = with_run({"hook2 (t.py:30)"}, {false});
  return {stack(a, 100, 2, la), stack(b, 50, 1, lb),
          stack({"Lx (x.cpp:1)", "L1 (l.cpp:1)", "step (t.py:8)", "main (t.py:1)"}, 7, 1,
                {true, true, false, false}),
          stack({"user (u.py:2)", "Ls (s.cpp:1)", "main (t.py:2)"}, 3, 1, {false, true, false})};
}

TEST(FoldedLibraryFrames, UserFramesFoldEachRunIntoOneFrameAsWideAsItsBytes) {
  const an::FlameNode root = an::flame_tree(fold_stacks(), nullptr, an::Frames::user);
  EXPECT_EQ(root.bytes, 160);
  ASSERT_EQ(root.children.size(), 1u);
  const an::FlameNode& main = root.children[0];
  EXPECT_FALSE(main.library);
  ASSERT_EQ(main.children.size(), 2u);
  const an::FlameNode& step = main.children[0];
  EXPECT_EQ(step.frame, "step (t.py)");
  EXPECT_EQ(step.bytes, 157);
  ASSERT_EQ(step.children.size(), 2u);  // two runs under step: two folds
  const an::FlameNode& fold = step.children[0];
  EXPECT_EQ(fold.frame, "… 5 library frames (L1 …)");
  EXPECT_TRUE(fold.library);
  EXPECT_EQ(fold.bytes, 150);
  EXPECT_EQ(fold.count, 3u);
  EXPECT_EQ(fold.self_bytes, 0);
  ASSERT_EQ(fold.folded.size(), 5u);  // the frames it stands for, outermost first
  for (size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(fold.folded[k].frame, "L" + std::to_string(k + 1) + " (l.cpp)");
    EXPECT_EQ(
        fold.folded[k].locations,
        (std::vector<std::pair<std::string, int64_t>>{{"l.cpp:" + std::to_string(k + 1), 150}}));
    EXPECT_TRUE(fold.folded[k].children.empty());
  }
  ASSERT_EQ(fold.children.size(), 2u);  // the user's frames below the run
  EXPECT_EQ(fold.children[0].frame, "hook (t.py)");
  EXPECT_EQ(fold.children[0].bytes, 100);
  EXPECT_EQ(fold.children[1].frame, "hook2 (t.py)");
  EXPECT_EQ(fold.children[1].self_bytes, 50);
  // The innermost run (the allocator's frames) folds too, as a leaf.
  ASSERT_EQ(fold.children[0].children.size(), 1u);
  const an::FlameNode& leaf = fold.children[0].children[0];
  EXPECT_EQ(leaf.frame, "… 2 library frames (La …)");
  EXPECT_EQ(leaf.bytes, 100);
  EXPECT_EQ(leaf.self_bytes, 100);
  EXPECT_EQ(leaf.count, 2u);
  const an::FlameNode& other = step.children[1];
  EXPECT_EQ(other.frame, "… 2 library frames (L1 …)");
  EXPECT_EQ(other.bytes, 7);
  ASSERT_EQ(other.folded.size(), 2u);
  EXPECT_EQ(other.folded[1].frame, "Lx (x.cpp)");
  // A lone library frame is not folded.
  const an::FlameNode& lone = main.children[1];
  EXPECT_EQ(lone.frame, "Ls (s.cpp)");
  EXPECT_TRUE(lone.library);
  EXPECT_TRUE(lone.folded.empty());
  ASSERT_EQ(lone.children.size(), 1u);
  EXPECT_EQ(lone.children[0].frame, "user (u.py)");
}

TEST(FoldedLibraryFrames, AllFramesFoldNothing) {
  const an::FlameNode root = an::flame_tree(fold_stacks(), nullptr, an::Frames::all);
  each_node(root, [](const an::FlameNode& n) { EXPECT_TRUE(n.folded.empty()) << n.frame; });
  const an::FlameNode& step = root.children[0].children[0];
  ASSERT_EQ(step.children.size(), 1u);
  EXPECT_EQ(step.children[0].frame, "L1 (l.cpp)");
  EXPECT_EQ(step.children[0].bytes, 157);
  EXPECT_TRUE(step.children[0].library);
  EXPECT_EQ(root.depth(), 10u);  // main step L1..L5 hook La Lb, under the root
  // Groups without flags (hand-made, or a trace without stacks) have no library frames.
  const an::FlameNode plain = an::flame_tree({stack({"b", "a"}, 4, 1)}, nullptr, an::Frames::user);
  EXPECT_EQ(plain.children[0].children[0].frame, "b");
}

TEST(FoldedLibraryFrames, UnfoldGivesTheRunsFramesAndRefoldTheFoldAgain) {
  const an::FlameNode root = an::flame_tree(fold_stacks(), nullptr, an::Frames::user);
  const an::FlameNode& fold = root.children[0].children[0].children[0];
  const an::FlameNode chain = an::unfold(fold);
  const an::FlameNode* at = &chain;
  for (size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(at->frame, "L" + std::to_string(k + 1) + " (l.cpp)");
    EXPECT_EQ(at->bytes, 150);
    EXPECT_EQ(at->count, 3u);
    EXPECT_EQ(at->unfolded, 5 - k);
    EXPECT_TRUE(at->folded.empty());
    EXPECT_EQ(at->locations.size(), 1u);
    if (k < 4) {
      ASSERT_EQ(at->children.size(), 1u);
      at = &at->children[0];
    }
  }
  ASSERT_EQ(at->children.size(), 2u);  // the fold's children hang from its innermost frame
  EXPECT_EQ(at->children[0].frame, "hook (t.py)");
  EXPECT_EQ(at->children[0].children[0].frame, "… 2 library frames (La …)");  // still folded
  const an::FlameNode again = an::refold(chain);
  EXPECT_EQ(again.frame, fold.frame);
  EXPECT_EQ(again.bytes, fold.bytes);
  EXPECT_EQ(again.count, fold.count);
  ASSERT_EQ(again.folded.size(), fold.folded.size());
  for (size_t k = 0; k < fold.folded.size(); ++k) {
    EXPECT_EQ(again.folded[k].frame, fold.folded[k].frame);
    EXPECT_EQ(again.folded[k].locations, fold.folded[k].locations);
  }
  ASSERT_EQ(again.children.size(), 2u);
  EXPECT_EQ(again.children[1].frame, "hook2 (t.py)");
  // Anything else comes back as it was.
  EXPECT_EQ(an::unfold(root.children[0]).frame, "main (t.py)");
  EXPECT_EQ(an::refold(root.children[0]).children.size(), root.children[0].children.size());
}

TEST(FoldedLibraryFrames, ADifferentialGraphMatchesFoldsByTheirFrames) {
  std::vector<an::Group> b = fold_stacks();
  b[1].bytes = 80;  // hook2's stack grew
  const an::FlameNode fa = an::flame_tree(fold_stacks(), nullptr, an::Frames::user);
  const an::FlameNode fb = an::flame_tree(b, nullptr, an::Frames::user);
  const an::FlameNode d = an::flame_diff(fa, fb);
  const an::FlameNode& fold = d.children[0].children[0].children[0];
  EXPECT_EQ(fold.frame, "… 5 library frames (L1 …)");
  EXPECT_EQ(fold.bytes, 180);
  EXPECT_EQ(fold.base_bytes, 150);
  EXPECT_EQ(fold.folded[2].base_bytes, 150);
  EXPECT_EQ(an::unfold(fold).children[0].base_bytes, 150);  // unfolded frames keep the base
  // The other run under step (L1 Lx) is another fold, matched with its own.
  const an::FlameNode& other = d.children[0].children[0].children[1];
  EXPECT_EQ(other.base_bytes, 7);
}

// On a trace: the library flags come from each symbolized frame (Note [Allocation site]), an
// unresolved address counting as library; the fold follows them.
TEST(FoldedLibraryFrames, TracesFlagFramesByTheSiteRule) {
  const std::string path = temp_path("fold");
  Builder b(path);
  b.stack_node(10, 0, 0xc0);   // main
  b.stack_node(11, 10, 0xc1);  // train_step
  b.stack_node(12, 11, 0xc2);  // std::make_shared (the C++ standard library)
  b.stack_node(13, 12, 0xc3);  // c10::
  b.stack_node(14, 13, 0xc4);  // at::
  b.stack_node(15, 14, 0xc5);  // CPython
  b.stack_node(16, 15, 0xc6);  // unresolved
  b.stack_node(17, 16, 0xc7);  // make_batch
  b.stack_node(18, 17, 0xc8);  // tl::empty
  b.stack_node(19, 18, 0xc9);  // tensorlib's allocator
  b.stack_node(20, 16, 0xca);  // eval_batch
  b.stack_node(21, 20, 0xc8);  // tl::empty
  b.alloc(2000, 0x1000, 1024, 19);
  b.alloc(2100, 0x2000, 512, 21);
  analysis_test::st::FinalizeOptions o;
  o.symbolize = [](uint64_t ip) -> std::vector<analysis_test::st::ResolvedFrame> {
    const std::string app = "/home/u/app";
    switch (ip) {
      case 0xc0:
        return {{"main", "/home/u/main.cpp", 3, false, app}};
      case 0xc1:
        return {{"train_step(Model&)", "/home/u/train.cpp", 20, false, app}};
      case 0xc2:
        return {{"std::shared_ptr<Batch> std::make_shared<Batch>()",
                 "/usr/include/c++/12/bits/shared_ptr.h", 1000, false, app}};
      case 0xc3:
        return {{"c10::intrusive_ptr<c10::TensorImpl>::make()",
                 "/opt/torch/include/c10/util/intrusive_ptr.h", 300, false, app}};
      case 0xc4:
        return {{"at::empty(c10::ArrayRef<long>)", "/opt/torch/include/ATen/ops/empty.h", 27, false,
                 app}};
      case 0xc5:
        return {{"_PyEval_EvalFrameDefault", "Python/ceval.c", 4000, false,
                 "/usr/lib/libpython3.11.so"}};
      case 0xc7:
        return {{"make_batch(int)", "/home/u/train.cpp", 12, false, app}};
      case 0xc8:
        return {
            {"tl::empty(tl::ArrayRef<long>)", "/src/tensorlib/core/factories.cpp", 40, false, app}};
      case 0xc9:
        return {{"tl::memory::CachingAllocator::malloc(unsigned long)",
                 "/src/tensorlib/memory/caching_allocator.cpp", 200, false, app}};
      case 0xca:
        return {{"eval_batch(int)", "/home/u/eval.cpp", 8, false, app}};
    }
    return {};  // 0xc6: no symbol
  };
  b.finish(3000, o);
  an::Trace t = an::Trace::open(path);
  EXPECT_EQ(t.library_frames(19),
            (std::vector<bool>{true, true, false, true, true, true, true, true, false, false}));
  EXPECT_EQ(t.library_frames(19).size(), t.stack_frames(19).size());
  const auto groups = an::group_allocations(t, t.reader().allocations_where("ORDER BY seq", {}),
                                            an::GroupBy::stack, 0);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].library, t.library_frames(19));

  const an::FlameNode user = an::flame_at_peak(t, t.devices().front().id);  // Frames::user
  EXPECT_EQ(user.bytes, 1536);
  const an::FlameNode& step = user.children[0].children[0];
  EXPECT_EQ(step.frame, "train_step(Model&) (train.cpp)");
  ASSERT_EQ(step.children.size(), 1u);
  const an::FlameNode& fold = step.children[0];
  EXPECT_EQ(fold.frame, "… 5 library frames (std::make_shared<Batch> …)");
  EXPECT_EQ(fold.bytes, 1536);
  ASSERT_EQ(fold.folded.size(), 5u);
  EXPECT_EQ(fold.folded[4].frame, "0xc6");
  ASSERT_EQ(fold.children.size(), 2u);
  EXPECT_EQ(fold.children[0].frame, "make_batch(int) (train.cpp)");
  ASSERT_EQ(fold.children[0].children.size(), 1u);
  EXPECT_EQ(fold.children[0].children[0].frame, "… 2 library frames (tl::empty …)");
  EXPECT_EQ(fold.children[0].children[0].self_bytes, 1024);
  ASSERT_EQ(fold.children[1].children.size(), 1u);  // one tensorlib frame: not folded
  EXPECT_EQ(fold.children[1].children[0].frame, "tl::empty(tl::ArrayRef<long>) (factories.cpp)");

  t.set_frames(an::Frames::all);
  const an::FlameNode all = an::flame_at_peak(t, t.devices().front().id);
  EXPECT_EQ(all.bytes, 1536);
  each_node(all, [](const an::FlameNode& n) { EXPECT_TRUE(n.folded.empty()) << n.frame; });
  EXPECT_EQ(all.depth(), 10u);
  remove_trace(path);
}

}  // namespace
