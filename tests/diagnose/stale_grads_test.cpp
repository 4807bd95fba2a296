// stale-grads (Note [Stale gradients] in profiler/diagnose/stale_grads.cpp) on a hand-built
// trace whose what-if peak is worked out by hand below.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "analysis/trace_builder.h"
#include "profiler/diagnose/diagnose.h"

namespace {

namespace an = tidemark::analysis;
namespace diag = tidemark::diagnose;
namespace ev = tidemark::events;
using analysis_test::Builder;
using analysis_test::kMiB;
using analysis_test::remove_trace;
using analysis_test::temp_path;

// Three steps of a model with a 4 MiB weight whose gradient is zeroed in place
// (set_to_none=False): step 1's backward makes the 4 MiB gradient G, never freed. Each forward
// saves A and B (4 MiB each); each backward frees B, makes G (step 1 only), then frees A.
//   step 1: P + A + B = 12 MiB; backward: P + A + G = 12
//   step 2 and 3: P + G + A + B = 16 MiB (the peak, first at t = 2200); backward: 12
// Without G in the forwards of steps 2 and 3: 12 there, and 12 elsewhere, so the peak would be
// 12 MiB: 4 MiB saved, a quarter of the 16 MiB segment.
void make_in_place_zeroing(const std::string& path) {
  Builder b(path);
  b.block(ev::Kind::segment_alloc, 50, 0x10000000, 16 * kMiB);
  const uint64_t P = 0x10000000, G = P + 4 * kMiB, A = P + 8 * kMiB, B = P + 12 * kMiB;
  b.alloc(100, P, 4 * kMiB, 1, ev::Category::parameter);
  for (uint64_t step = 1; step <= 3; ++step) {
    const uint64_t t = 1000 * step;
    b.step(t, step);
    b.alloc(t + 100, A, 4 * kMiB, 2, ev::Category::activation);
    b.alloc(t + 200, B, 4 * kMiB, 3, ev::Category::activation);
    b.named(ev::Kind::scope_push, t + 500, "backward");
    b.free(t + 550, B, 4 * kMiB);
    if (step == 1) b.alloc(t + 600, G, 4 * kMiB, 4, ev::Category::gradient);
    b.free(t + 700, A, 4 * kMiB);
    b.named(ev::Kind::scope_pop, t + 800, "backward");
  }
  b.finish(4000);
}

TEST(StaleGrads, InPlaceZeroedGradientsAreTakenOutOfTheLaterForwards) {
  const std::string path = temp_path("stale_grads_in_place");
  make_in_place_zeroing(path);
  const diag::Diagnosis d = diag::diagnose(an::Trace::open(path), {"stale-grads"});
  ASSERT_EQ(d.findings.size(), 1u);
  const diag::Finding& f = d.findings[0];
  EXPECT_EQ(f.id, "stale-grads");
  EXPECT_EQ(f.bytes, int64_t(4 * kMiB));
  EXPECT_NEAR(f.share, 0.25, 1e-9);
  EXPECT_EQ(f.severity, diag::Severity::moderate);  // the run never ran out (Note [Severity])
  std::map<std::string, std::string> ev;
  for (const auto& [what, value] : f.evidence) ev[what] = value;
  EXPECT_EQ(ev["steps whose forward had them"], "2 of 3");
  EXPECT_EQ(ev["freed before the step's backward"],
            "no: zeroed in place (set_to_none=False) or never zeroed");
  EXPECT_EQ(ev["peak without them"], "12.00 MiB (12,582,912 bytes)");
  EXPECT_NE(ev["gradients from earlier steps live in a forward"].find("in 1 allocations (step 2"),
            std::string::npos)
      << ev["gradients from earlier steps live in a forward"];
  EXPECT_NE(f.fix.find("set_to_none=True"), std::string::npos) << f.fix;
  remove_trace(path);
}

// One step is never enough: a forward after a backward needs two.
TEST(StaleGrads, OneStepHasNoFinding) {
  const std::string path = temp_path("stale_grads_one_step");
  {
    Builder b(path);
    b.block(ev::Kind::segment_alloc, 50, 0x10000000, 16 * kMiB);
    b.alloc(100, 0x10000000, 4 * kMiB, 1, ev::Category::gradient);  // made before the window
    b.step(1000, 1);
    b.alloc(1100, 0x10400000, 8 * kMiB, 2, ev::Category::activation);
    b.named(ev::Kind::scope_push, 1500, "backward");
    b.free(1600, 0x10400000, 8 * kMiB);
    b.named(ev::Kind::scope_pop, 1700, "backward");
    b.finish(2000);
  }
  const diag::Diagnosis d = diag::diagnose(an::Trace::open(path), {"stale-grads"}, true);
  EXPECT_TRUE(d.findings.empty());
  remove_trace(path);
}

}  // namespace
