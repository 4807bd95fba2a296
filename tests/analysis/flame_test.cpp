// flame_tree (profiler/analysis/flame.h): stacks merged from the outermost frame, with bytes
// and counts worked out by hand.
#include "profiler/analysis/flame.h"

#include <gtest/gtest.h>

namespace {

namespace an = tidemark::analysis;

an::Group stack(std::vector<std::string> innermost_first, int64_t bytes, uint64_t count) {
  an::Group g;
  g.frames = std::move(innermost_first);
  g.bytes = bytes;
  g.count = count;
  return g;
}

TEST(FlameTree, MergesStacksFromTheOutermostFrame) {
  an::FlameNode root = an::flame_tree({stack({"c", "b", "main"}, 10, 2),
                                       stack({"d", "main"}, 25, 1),
                                       stack({"main"}, 4, 1),
                                       stack({}, 3, 3)});
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
      {stack({"alloc (x.cpp:5)", "main (m.cpp:10)", "__libc_start_main (libc-start.c:360)",
              "_start"}, 6, 1),
       stack({"alloc (x.cpp:5)", "main (m.cpp:12)", "__libc_start_call_main (c.h:58)",
              "__libc_start_main (libc-start.c:360)"}, 4, 1)});
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

}  // namespace
