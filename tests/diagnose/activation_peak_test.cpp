// The activation-peak detector and the severity of findings (Note [Severity] in
// profiler/diagnose/diagnose.h) on hand-built traces, against figures worked out by hand from
// Note [Checkpointing estimate] (profiler/diagnose/activation_peak.cpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/trace_builder.h"
#include "profiler/diagnose/detectors.h"
#include "profiler/diagnose/diagnose.h"

namespace {

namespace an = tidemark::analysis;
namespace diag = tidemark::diagnose;
namespace ev = tidemark::events;
using analysis_test::Builder;
using analysis_test::kMiB;
using analysis_test::remove_trace;
using analysis_test::temp_path;

constexpr uint64_t kKiB = 1024;

// A forward through 8 layers (scopes model/l0 .. model/l7), each saving a 1 MiB output and a
// 256 KiB tensor for backward, after a `parameter` of `param_bytes`; then a backward freeing
// them in reverse order. Times in ns: the parameter at 1000, layer i's blocks at 2000 + 100 i,
// frees from 4000 on. At the peak (t = 2750): the parameter and 8 x 1.25 MiB of activations.
// One segment of `reserved` bytes holds them all.
// `retry`: the allocator failed a device allocation once, before the parameter, and got past
// it by flushing its cache (alloc_retry): the run is at the device's limit.
void make_forward(const std::string& path, uint64_t param_bytes, uint64_t reserved,
                  bool retry = false) {
  Builder b(path);
  if (retry) b.allocator(ev::Kind::alloc_retry, 900, reserved);
  b.block(ev::Kind::segment_alloc, 1000, 0x10000000, reserved);
  b.alloc(1000, 0x10000000, param_bytes, 1, ev::Category::parameter);
  b.named(ev::Kind::scope_push, 1900, "model");
  uint64_t addr = 0x10000000 + param_bytes;
  std::vector<std::pair<uint64_t, uint64_t>> blocks;
  for (int i = 0; i < 8; ++i) {
    const std::string name = "l" + std::to_string(i);
    const uint64_t t = 2000 + 100 * static_cast<uint64_t>(i);
    b.named(ev::Kind::scope_push, t, name);
    for (uint64_t size : {uint64_t{kMiB}, 256 * kKiB}) {
      b.alloc(t + 10, addr, size, 2, ev::Category::activation);
      blocks.emplace_back(addr, size);
      addr += size;
    }
    b.named(ev::Kind::scope_pop, t + 50, name);
  }
  b.named(ev::Kind::scope_pop, 2900, "model");
  uint64_t t = 4000;
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) b.free(t += 10, it->first, it->second);
  b.free(t += 10, 0x10000000, param_bytes);
  b.finish(t + 10);
}

TEST(CheckpointEstimate, UniformLayersSaveMostNearTheSquareRootOfTheirNumber) {
  // 16 layers of 1 MiB, each one block: every k keeps 16/k outputs and one segment of k.
  std::vector<diag::detail::CheckpointLayer> layers(16, {int64_t(kMiB), int64_t(kMiB)});
  const diag::detail::CheckpointEstimate e = diag::detail::checkpoint_estimate(layers);
  EXPECT_EQ(e.k, 4u);  // 4 + 4 MiB; k = 2: 8 + 2, k = 3: 6 + 3, k = 8: 2 + 8
  EXPECT_EQ(e.segments, 4u);
  EXPECT_EQ(e.before, int64_t(16 * kMiB));
  EXPECT_EQ(e.after, int64_t(8 * kMiB));
  EXPECT_EQ(e.outputs, int64_t(4 * kMiB));
  EXPECT_EQ(e.largest, int64_t(4 * kMiB));
  // Three layers cannot be cut into two segments of two: nothing to save.
  layers.resize(3);
  const diag::detail::CheckpointEstimate none = diag::detail::checkpoint_estimate(layers);
  EXPECT_EQ(none.k, 0u);
  EXPECT_EQ(none.after, none.before);
}

TEST(ActivationPeak, NamesTheLayersAndEstimatesTheSaving) {
  const std::string path = temp_path("activation_peak");
  make_forward(path, kMiB, 12 * kMiB);
  const diag::Diagnosis d = diag::diagnose(an::Trace::open(path), {"activation-peak"});
  ASSERT_EQ(d.findings.size(), 1u);
  const diag::Finding& f = d.findings[0];
  EXPECT_EQ(f.id, "activation-peak");
  EXPECT_EQ(f.device, "cpu");
  // 8 layers of 1.25 MiB with 1 MiB outputs. k = 2: 4 outputs (4 MiB) + one segment
  // (2.5 MiB) = 6.5 MiB of 10; k = 3: 3 + 3.75; k = 4: 2 + 5. Saved: 3.5 MiB.
  EXPECT_EQ(f.bytes, int64_t(3 * kMiB + 512 * kKiB));
  EXPECT_NE(f.title.find("91% of the 11.00 MiB peak"), std::string::npos) << f.title;
  EXPECT_NE(f.title.find("every 2 layers"), std::string::npos) << f.title;
  std::vector<std::string> names;
  for (const auto& [what, value] : f.evidence) names.push_back(what + " = " + value);
  auto has = [&](const std::string& line) {
    for (const std::string& n : names)
      if (n == line) return true;
    ADD_FAILURE() << "no evidence line " << line;
    return false;
  };
  has("layers holding them (in forward order) = 8");
  has("held by l0 = 1.25 MiB (1,310,720 bytes) in 2 allocations");
  has("peak without that saving (estimate) = 7.50 MiB (7,864,320 bytes)");
  // Severity: 3.5 of the 12 MiB reserved (29%), on a device that never ran out, is moderate:
  // the run fits (Note [Severity]).
  EXPECT_EQ(f.severity, diag::Severity::moderate);
  EXPECT_NEAR(f.share, 3.5 / 12, 1e-9);
  remove_trace(path);
}

TEST(Severity, MemoryIsMajorWhereTheRunIsAtTheDevicesLimit) {
  // The same forward after a failed device allocation the allocator flushed its cache for:
  // 29% at stake where memory decides whether the run fits is major.
  const std::string path = temp_path("activation_peak_retry");
  make_forward(path, kMiB, 12 * kMiB, /*retry=*/true);
  const diag::Diagnosis d = diag::diagnose(an::Trace::open(path), {"activation-peak"});
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].severity, diag::Severity::major);
  EXPECT_NEAR(d.findings[0].share, 3.5 / 12, 1e-9);
  remove_trace(path);
}

TEST(ActivationPeak, NoFindingWhenActivationsAreNotMostOfThePeak) {
  // 10 MiB of activations next to 12 MiB of parameters: 45% of the peak.
  const std::string path = temp_path("activation_peak_params");
  make_forward(path, 12 * kMiB, 24 * kMiB);
  const diag::Diagnosis d = diag::diagnose(an::Trace::open(path), {"activation-peak"});
  EXPECT_TRUE(d.findings.empty());
  EXPECT_EQ(d.minor_hidden, 0u);
  EXPECT_TRUE(d.skipped.empty());
  remove_trace(path);
}

TEST(Severity, MinorFindingsAreHiddenUnlessAskedFor) {
  // The same forward in a 1 GiB segment: 3.5 MiB at stake is 0.3% of what the run reserved.
  const std::string path = temp_path("activation_peak_minor");
  make_forward(path, kMiB, 1024 * kMiB);
  const an::Trace t = an::Trace::open(path);
  diag::Diagnosis d = diag::diagnose(t, {"activation-peak"});
  EXPECT_TRUE(d.findings.empty());
  EXPECT_EQ(d.minor_hidden, 1u);
  d = diag::diagnose(t, {"activation-peak"}, true);
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.minor_hidden, 0u);
  EXPECT_EQ(d.findings[0].severity, diag::Severity::minor);
  EXPECT_NEAR(d.findings[0].share, 3.5 / 1024, 1e-9);
  remove_trace(path);
  // Between the thresholds: 3.5 of 40 MiB (8.75%) is moderate, and shown.
  const std::string moderate = temp_path("activation_peak_moderate");
  make_forward(moderate, kMiB, 40 * kMiB);
  d = diag::diagnose(an::Trace::open(moderate), {"activation-peak"});
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].severity, diag::Severity::moderate);
  remove_trace(moderate);
}

}  // namespace
