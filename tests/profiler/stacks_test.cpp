// Native stacks: capture through a known call chain, symbolization back to that chain's
// functions, files and lines (inlined frames included), the prefix tree, the module list.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "profiler/record/stacks.h"

namespace {

using ::testing::HasSubstr;
using tidemark::record::capture_stack;
using tidemark::record::kMaxStackDepth;
using tidemark::record::read_modules;
using tidemark::record::StackTable;
using tidemark::record::Symbolizer;
using tidemark::store::ResolvedFrame;

// Lines of the calls in the chain below, recorded on the line after each call.
int g_line_capture = 0, g_line_one = 0, g_line_two = 0, g_line_inline_capture = 0,
    g_line_inline_call = 0;

struct Captured {
  uint64_t ips[kMaxStackDepth];
  int n = 0;
};

// Keeps the compiler from turning the calls below into tail calls (which would drop frames).
#define BARRIER() asm volatile("" ::: "memory")

[[gnu::noinline]] void level_three(Captured& c, int skip, int depth) {
  c.n = capture_stack(c.ips, depth, skip);
  g_line_capture = __LINE__ - 1;  // the call, on the line above
  BARRIER();
}

[[gnu::noinline]] void level_two(Captured& c, int skip, int depth) {
  level_three(c, skip, depth);
  g_line_two = __LINE__ - 1;  // the call, on the line above
  BARRIER();
}

[[gnu::noinline]] void level_one(Captured& c, int skip, int depth) {
  level_two(c, skip, depth);
  g_line_one = __LINE__ - 1;  // the call, on the line above
  BARRIER();
}

[[gnu::always_inline]] inline void inlined_capture(Captured& c) {
  c.n = capture_stack(c.ips, kMaxStackDepth, 0);
  g_line_inline_capture = __LINE__ - 1;  // the call, on the line above
  BARRIER();
}

[[gnu::noinline]] void calls_inlined(Captured& c) {
  inlined_capture(c);
  g_line_inline_call = __LINE__ - 1;  // the call, on the line above
  BARRIER();
}

std::string describe(const std::vector<ResolvedFrame>& frames) {
  std::string s;
  for (const ResolvedFrame& f : frames)
    s += (f.inlined ? "  [inlined] " : "  ") + f.function + " at " + f.file + ":" +
         std::to_string(f.line) + " in " + f.module + "\n";
  return s;
}

// The frames of every captured address, innermost first, inlined ones expanded.
std::vector<ResolvedFrame> symbolize(Symbolizer& sym, const Captured& c) {
  std::vector<ResolvedFrame> all;
  for (int i = 0; i < c.n; ++i) {
    auto frames = sym.resolve(c.ips[i]);
    all.insert(all.end(), frames.begin(), frames.end());
  }
  return all;
}

void expect_frame(const ResolvedFrame& f, const std::string& function, int line, bool inlined,
                  const std::string& all) {
  EXPECT_THAT(f.function, HasSubstr(function)) << all;
  EXPECT_THAT(f.file, HasSubstr("stacks_test.cpp")) << all;
  EXPECT_EQ(f.line, line) << all;
  EXPECT_EQ(f.inlined, inlined) << all;
  EXPECT_FALSE(f.module.empty()) << all;
}

TEST(Stacks, CapturedChainResolvesToFunctionsFilesAndLines) {
  Captured c;
  level_one(c, 0, kMaxStackDepth);
  ASSERT_GE(c.n, 4);
  Symbolizer sym(read_modules());
  auto frames = symbolize(sym, c);
  std::string all = describe(frames);
  ASSERT_GE(frames.size(), 4u) << all;
  expect_frame(frames[0], "(anonymous namespace)::level_three(", g_line_capture, false, all);
  expect_frame(frames[1], "(anonymous namespace)::level_two(", g_line_two, false, all);
  expect_frame(frames[2], "(anonymous namespace)::level_one(", g_line_one, false, all);
  EXPECT_THAT(frames[3].function, HasSubstr("CapturedChainResolvesToFunctionsFilesAndLines"))
      << all;
}

TEST(Stacks, InlinedFrameAppearsWithItsCaller) {
  Captured c;
  calls_inlined(c);
  ASSERT_GE(c.n, 2);
  Symbolizer sym(read_modules());
  auto frames = sym.resolve(c.ips[0]);
  std::string all = describe(frames);
  // gcc inlines always_inline functions at -O0 too, so this holds in every build.
  ASSERT_EQ(frames.size(), 2u) << all;
  expect_frame(frames[0], "(anonymous namespace)::inlined_capture(", g_line_inline_capture, true,
               all);
  expect_frame(frames[1], "(anonymous namespace)::calls_inlined(", g_line_inline_call, false, all);
  EXPECT_EQ(frames[0].module, frames[1].module);
}

TEST(Stacks, SkipDropsInnermostFrames) {
  Captured full, skipped;
  level_one(full, 0, kMaxStackDepth);
  level_one(skipped, 2, kMaxStackDepth);
  ASSERT_GE(full.n, 6);
  ASSERT_EQ(skipped.n, full.n - 2);
  // Below the two skipped frames the stacks are the same but for the test body's own return
  // address (two different calls of level_one).
  EXPECT_EQ(skipped.ips[0], full.ips[2]);
  for (int i = 2; i < skipped.n; ++i) EXPECT_EQ(skipped.ips[i], full.ips[i + 2]) << i;
  Symbolizer sym(read_modules());
  auto frames = sym.resolve(skipped.ips[0]);
  ASSERT_FALSE(frames.empty());
  EXPECT_THAT(frames.back().function, HasSubstr("level_one(")) << describe(frames);
}

TEST(Stacks, DepthLimitKeepsInnermostFrames) {
  Captured full, limited;
  level_one(full, 0, kMaxStackDepth);
  level_one(limited, 0, 2);
  ASSERT_EQ(limited.n, 2);
  EXPECT_EQ(limited.ips[0], full.ips[0]);
  EXPECT_EQ(limited.ips[1], full.ips[1]);
  EXPECT_EQ(capture_stack(limited.ips, 0, 0), 0);
  // Asking for more than kMaxStackDepth gives at most kMaxStackDepth.
  uint64_t big[kMaxStackDepth + 8];
  EXPECT_LE(capture_stack(big, kMaxStackDepth + 8, 0), kMaxStackDepth);
}

TEST(Stacks, CapturesOnManyThreadsAtOnceUnderALock) {
  // The allocator calls the recorder from any thread with its mutex held.
  std::mutex allocator_mutex;
  std::vector<Captured> captured(4);
  std::vector<std::thread> threads;
  for (auto& c : captured)
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        std::lock_guard lock(allocator_mutex);
        level_one(c, 0, kMaxStackDepth);
      }
    });
  for (auto& t : threads) t.join();
  Symbolizer sym(read_modules());
  for (const Captured& c : captured) {
    ASSERT_GE(c.n, 4);
    auto frames = symbolize(sym, c);
    ASSERT_GE(frames.size(), 3u);
    EXPECT_THAT(frames[0].function, HasSubstr("level_three(")) << describe(frames);
    EXPECT_THAT(frames[2].function, HasSubstr("level_one(")) << describe(frames);
  }
}

TEST(Stacks, TableSharesCommonCallers) {
  StackTable table;
  std::vector<StackTable::Node> created;
  // Innermost first: two stacks that share the outer frames 30, 20 and differ innermost.
  const uint64_t a[] = {10, 20, 30};
  const uint64_t b[] = {11, 20, 30};
  uint64_t id_a = table.intern(a, 3, created);
  ASSERT_EQ(created.size(), 3u);
  // Parents first, rooted at the outermost frame; ids from 1.
  EXPECT_EQ(created[0].parent, 0u);
  EXPECT_EQ(created[0].ip, 30u);
  EXPECT_EQ(created[1].parent, created[0].id);
  EXPECT_EQ(created[1].ip, 20u);
  EXPECT_EQ(created[2].parent, created[1].id);
  EXPECT_EQ(created[2].ip, 10u);
  EXPECT_EQ(created[0].id, 1u);
  EXPECT_EQ(id_a, created[2].id);

  created.clear();
  uint64_t id_b = table.intern(b, 3, created);
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0].ip, 11u);
  EXPECT_EQ(created[0].parent, 2u);  // the shared node of frame 20
  EXPECT_EQ(id_b, created[0].id);
  EXPECT_NE(id_a, id_b);
  EXPECT_EQ(table.size(), 4u);

  // Interning again returns the same ids and creates nothing; so does a shared prefix alone.
  created.clear();
  EXPECT_EQ(table.intern(a, 3, created), id_a);
  EXPECT_EQ(table.intern(b, 3, created), id_b);
  EXPECT_EQ(table.intern(a + 1, 2, created), 2u);
  EXPECT_TRUE(created.empty());
  EXPECT_EQ(table.intern(a, 0, created), 0u);
  // The same ip under another parent is another node.
  const uint64_t c[] = {20};
  EXPECT_EQ(table.intern(c, 1, created), 5u);
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0].parent, 0u);
}

TEST(Stacks, ModulesHoldTheExecutableAndLibc) {
  auto modules = read_modules();
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_GT(len, 0);
  exe[len] = '\0';
  auto has = [&](auto pred) { return std::any_of(modules.begin(), modules.end(), pred); };
  EXPECT_TRUE(has([&](const auto& m) { return m.path == exe; })) << exe;
  EXPECT_TRUE(has([](const auto& m) { return m.path.find("/libc.so") != std::string::npos; }));
  for (const auto& m : modules) {
    EXPECT_LT(m.start, m.end) << m.path;
    EXPECT_EQ(m.path.front(), '/') << m.path;
  }
  // The code of this test lies in one of the executable's mappings.
  auto here = reinterpret_cast<uint64_t>(&read_modules);
  EXPECT_TRUE(has([&](const auto& m) { return m.start <= here && here < m.end && m.path == exe; }));
}

TEST(Stacks, SymbolizerWorksFromAModuleListReadEarlier) {
  Captured c;
  std::vector<tidemark::store::ModuleInfo> modules;
  {
    level_one(c, 0, kMaxStackDepth);
    modules = read_modules();
  }
  std::vector<ResolvedFrame> frames;
  {
    Symbolizer sym(modules);
    frames = sym.resolve(c.ips[1]);
    // A second lookup comes from the cache and agrees.
    auto again = sym.resolve(c.ips[1]);
    ASSERT_EQ(again.size(), frames.size());
  }
  ASSERT_FALSE(frames.empty());
  EXPECT_THAT(frames.back().function, HasSubstr("level_two(")) << describe(frames);
  EXPECT_EQ(frames.back().line, g_line_two);
}

TEST(Stacks, UnknownAddressesGiveNoFunction) {
  Symbolizer sym(read_modules());
  for (uint64_t ip : {uint64_t{0}, uint64_t{1}, uint64_t{0x10}}) {
    auto frames = sym.resolve(ip);
    for (const ResolvedFrame& f : frames) EXPECT_TRUE(f.function.empty()) << f.function;
  }
  // Without modules nothing resolves.
  Symbolizer empty({});
  Captured c;
  level_one(c, 0, kMaxStackDepth);
  EXPECT_TRUE(empty.resolve(c.ips[0]).empty());
  // A module that no longer exists gives a frame with only the module.
  Symbolizer gone({{"/nonexistent/libgone.so", 0x1000, 0x2000, 0}});
  auto frames = gone.resolve(0x1800);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].module, "/nonexistent/libgone.so");
  EXPECT_TRUE(frames[0].function.empty());
}

TEST(Stacks, LibcFramesNameTheirModule) {
  // Frames outside the test binary (libc's start code) resolve at least to their module.
  Captured c;
  level_one(c, 0, kMaxStackDepth);
  Symbolizer sym(read_modules());
  bool saw_libc = false;
  for (int i = 0; i < c.n; ++i)
    for (const ResolvedFrame& f : sym.resolve(c.ips[i]))
      saw_libc |= f.module.find("/libc.so") != std::string::npos;
  EXPECT_TRUE(saw_libc);
}

}  // namespace
