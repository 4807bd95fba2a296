// The prediction library (profiler/predict/predict.h): the size fits of Note [Prediction
// method] on sizes derived by hand from tensor shapes, and the model on traces written here
// (aligned from the end, a driver script's lines ignored, unaligned allocations scaled like
// their key's), each figure worked out below from the allocations themselves.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/trace_builder.h"
#include "profiler/analysis/trace.h"
#include "profiler/predict/predict.h"
#include "profiler/store/trace_writer.h"

namespace {

namespace ev = tidemark::events;
namespace pr = tidemark::predict;
namespace st = tidemark::store;

TEST(PredictFit, ProductsOfDimensionsFitTheirForm) {
  // fp32 activations of a (batch, 512) layer: 2048 * b bytes.
  pr::SizeFit f = pr::fit_sizes({{16, 32768}, {32, 65536}, {64, 131072}});
  EXPECT_EQ(f.growth, pr::Growth::linear);
  EXPECT_TRUE(f.exact);
  EXPECT_NEAR(f.at(256), 524288, 1e-6);
  // Attention scores B*H*S*S*4 bytes with B=2, H=4: 32 * s^2.
  f = pr::fit_sizes({{128, 524288}, {256, 2097152}, {512, 8388608}});
  EXPECT_EQ(f.growth, pr::Growth::quadratic);
  EXPECT_TRUE(f.exact);
  EXPECT_NEAR(f.at(2048), 32.0 * 2048 * 2048, 1e-3);
  // A weight: the same at every size.
  f = pr::fit_sizes({{1, 4096}, {2, 4096}});
  EXPECT_EQ(f.growth, pr::Growth::constant);
  EXPECT_TRUE(f.exact);
  // A concatenation of a fixed prefix (1000 bytes) and 8 bytes per token: two terms; with three
  // points the form is verified.
  f = pr::fit_sizes({{10, 1080}, {20, 1160}, {40, 1320}});
  EXPECT_EQ(f.growth, pr::Growth::affine);
  EXPECT_TRUE(f.exact);
  EXPECT_NEAR(f.at(100), 1800, 1e-6);
  // Two points on no one-term form: the line through them, not claimed exact.
  f = pr::fit_sizes({{10, 1080}, {20, 1160}});
  EXPECT_EQ(f.growth, pr::Growth::affine);
  EXPECT_FALSE(f.exact);
  EXPECT_NEAR(f.at(40), 1320, 1e-6);
  // s^2 + s (scores and a per-token vector, 4 bytes each), three points, three terms would fit
  // anything: bx+cx^2 is found with the points to spare.
  f = pr::fit_sizes({{8, 4 * (64 + 8)}, {16, 4 * (256 + 16)}, {32, 4 * (1024 + 32)}});
  EXPECT_EQ(f.growth, pr::Growth::linear_quadratic);
  EXPECT_TRUE(f.exact);
  EXPECT_NEAR(f.at(64), 4 * (4096 + 64), 1e-6);
  // A size 8 bytes off a line at 1.2 MB (under 10 ppm) still fits it.
  f = pr::fit_sizes({{100, 409600}, {200, 819200}, {300, 1228800 + 8}});
  EXPECT_EQ(f.growth, pr::Growth::linear);
}

// One run of a made-up program at size x: a weight allocated before a loop (constant), per
// step an activation (64 x bytes) and scores (x^2 bytes), freed at the end of the step;
// `steps` steps; the driver's line `driver_line` (edited between runs); `workspace`: an extra
// allocation (16 x bytes) in each step, made only in this run.
std::string write_run(const std::string& name, uint64_t x, int steps, int driver_line,
                      bool workspace) {
  const std::string path = analysis_test::temp_path(name);
  analysis_test::Builder b(path);
  // Stacks: node 10 the driver's frame, 11..14 the functions it calls (innermost first).
  b.stack_node(10, 0, 0x100);
  b.stack_node(11, 10, 0x200);  // init (model.py:10)
  b.stack_node(12, 10, 0x300);  // forward (model.py:20)
  b.stack_node(13, 10, 0x400);  // attend (model.py:30)
  b.stack_node(14, 10, 0x500);  // workspace (kernels.py:5)
  uint64_t ts = 2000, addr = 0x10000;
  b.block(ev::Kind::segment_alloc, 1500, 0x10000, uint64_t{1} << 30);
  auto alloc = [&](uint64_t bytes, uint64_t stack) {
    const uint64_t a = addr;
    addr += bytes;
    b.alloc(ts++, a, bytes, stack);
    return std::make_pair(a, bytes);
  };
  auto release = [&](std::pair<uint64_t, uint64_t> blk) { b.free(ts++, blk.first, blk.second); };
  alloc(1 << 20, 11);
  for (int s = 0; s < steps; ++s) {
    auto act = alloc(64 * x, 12);
    auto scores = alloc(x * x, 13);
    std::pair<uint64_t, uint64_t> ws{};
    if (workspace) ws = alloc(16 * x, 14);
    release(scores);
    if (workspace) release(ws);
    release(act);
  }
  st::FinalizeOptions options;
  options.symbolize = [driver_line](uint64_t ip) -> std::vector<st::ResolvedFrame> {
    auto frame = [](const char* fn, const char* file, int line) {
      st::ResolvedFrame f;
      f.function = fn;
      f.file = file;
      f.line = line;
      return f;
    };
    switch (ip) {
      case 0x100:
        return {frame("main", "/src/train.py", driver_line)};
      case 0x200:
        return {frame("init", "/src/model.py", 10)};
      case 0x300:
        return {frame("forward", "/src/model.py", 20)};
      case 0x400:
        return {frame("attend", "/src/model.py", 30)};
      case 0x500:
        return {frame("workspace", "/src/kernels.py", 5)};
      default:
        return {};
    }
  };
  b.finish(ts, options);
  return path;
}

TEST(PredictModel, AlignsFromTheEndAndIgnoresTheDriversLines) {
  // Runs at 64, 128 and 256 with 6, 5 and 4 steps (a smaller size runs more steps), the
  // driver's lines moved between runs.
  const std::string a = write_run("predict_a", 64, 6, 40, false);
  const std::string b = write_run("predict_b", 128, 5, 41, false);
  const std::string c = write_run("predict_c", 256, 4, 47, false);
  auto ta = tidemark::analysis::Trace::open(a), tb = tidemark::analysis::Trace::open(b),
       tc = tidemark::analysis::Trace::open(c);
  pr::Model m = pr::Model::build({{64, &ta, ""}, {128, &tb, ""}, {256, &tc, ""}});
  EXPECT_EQ(m.allocations(), 1u + 4 * 2);
  EXPECT_EQ(m.aligned_allocations(), m.allocations());
  pr::Options o;
  const pr::Target t = m.at(1024, o);
  // The peak: the weight, an activation and the scores: 2^20 + 64*1024 + 1024^2.
  EXPECT_EQ(t.peak_requested, (1u << 20) + 64u * 1024 + 1024u * 1024);
  EXPECT_DOUBLE_EQ(t.aligned_share, 1.0);
  EXPECT_DOUBLE_EQ(t.exact_share, 1.0);
  ASSERT_GE(t.sites.size(), 3u);
  EXPECT_EQ(t.sites[0].bytes, 1u << 20);  // scores and weight tie at 1 MiB at 1024
  bool quadratic = false;
  for (const pr::SiteAtPeak& s : t.sites)
    if (s.site.find("attend") != std::string::npos) quadratic = s.growth == pr::Growth::quadratic;
  EXPECT_TRUE(quadratic);
  // Reserved, replayed under the defaults from an empty cache. Every request is at most 1 MiB,
  // so small-pool, served from 2 MiB segments: the weight (1 MiB) and the activation (64 KiB)
  // share the first; the scores (1 MiB) do not fit in its 960 KiB left and open a second.
  // Later steps reuse both (best fit puts the activation back in the first): 4 MiB.
  ASSERT_EQ(t.settings.size(), 1u);
  EXPECT_EQ(t.settings[0].peak_reserved, uint64_t{4} << 20);
}

TEST(PredictModel, AnAllocationOnlyTheLargestRunMakesScalesLikeItsKeys) {
  // The workspace appears only at 256 (another kernel path): it has no partner, and no other
  // allocation shares its key or site, so it is kept at its size and the share says so.
  const std::string a = write_run("predict_d", 64, 3, 40, false);
  const std::string b = write_run("predict_e", 128, 3, 40, false);
  const std::string c = write_run("predict_f", 256, 3, 40, true);
  auto ta = tidemark::analysis::Trace::open(a), tb = tidemark::analysis::Trace::open(b),
       tc = tidemark::analysis::Trace::open(c);
  pr::Model m = pr::Model::build({{64, &ta, ""}, {128, &tb, ""}, {256, &tc, ""}});
  EXPECT_EQ(m.allocations(), 1u + 3 * 3);
  EXPECT_EQ(m.aligned_allocations(), 1u + 3 * 2);
  const pr::Target t = m.at(512, {});
  // weight + activation + scores + workspace (kept at 16 * 256).
  const uint64_t expect = (1u << 20) + 64u * 512 + 512u * 512 + 16u * 256;
  EXPECT_EQ(t.peak_requested, expect);
  EXPECT_NEAR(t.aligned_share, 1.0 - 16.0 * 256 / static_cast<double>(expect), 1e-12);
  ASSERT_FALSE(m.notes().empty());
  EXPECT_NE(m.notes().front().find("no partner"), std::string::npos);
}

TEST(PredictModel, RunsThatCannotBePredictedFromAreRefused) {
  const std::string a = write_run("predict_g", 64, 2, 40, false);
  auto ta = tidemark::analysis::Trace::open(a);
  EXPECT_THROW(pr::Model::build({{64, &ta, ""}}), pr::PredictError);
  EXPECT_THROW(pr::Model::build({{64, &ta, ""}, {64, &ta, ""}}), pr::PredictError);
  EXPECT_THROW(pr::Model::build({{0, &ta, ""}, {64, &ta, ""}}), pr::PredictError);
}

}  // namespace
