// allocation_details, tensor_details and scopes (profiler/analysis/details.cpp) on a recording
// of tensorlib: a view that outlives its base is named as what kept the block alive, a tensor
// finds its block and its views; scopes come back with their paths and depths.
#include "profiler/analysis/details.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <tensorlib/tensorlib.h>
#include <algorithm>
#include <filesystem>
#include <string>

#include "profiler/analysis/memory.h"
#include "profiler/record/recorder.h"
#include "temp_trace.h"

namespace {

namespace an = tidemark::analysis;

using tl_test::TempTrace;

[[gnu::noinline]] tl::Tensor details_test_big() {
  return tl::ones({256, 256});
}

TEST(Details, AViewThatOutlivesItsBaseKeptTheBlockAlive) {
  TempTrace trace("view");
  tidemark::record::Options o;
  o.path = trace.path();
  o.stack_depth = 32;
  tidemark::record::start(o);
  {
    tl::profiler::Scope outer("outer");
    tl::Tensor row;
    {
      tl::profiler::Scope inner("inner");
      tl::Tensor big = details_test_big();
      row = big[0];
    }  // big released; row keeps the storage
    tl::Tensor other = tl::ones({4});
  }
  tidemark::record::stop();

  an::Trace t = an::Trace::open(trace.path());
  const int64_t cpu = t.device("cpu").id;
  const auto rows = t.reader().allocations(cpu);
  const tidemark::store::AllocationRow* big = nullptr;
  for (const auto& r : rows)
    if (r.requested_size == 256 * 256 * 4) big = &r;
  ASSERT_NE(big, nullptr);
  auto d = an::allocation_details(t, big->seq);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->row.seq, big->seq);
  EXPECT_EQ(d->row.requested_size, uint64_t(256 * 256 * 4));
  EXPECT_GE(d->row.size, d->row.requested_size);
  EXPECT_EQ(d->device, "cpu");
  ASSERT_TRUE(d->lifetime_ns.has_value());
  EXPECT_EQ(*d->lifetime_ns, *big->free_requested_ts - big->alloc_ts);
  EXPECT_EQ(d->row.scope, "outer/inner");
  EXPECT_NE(d->site.label.find("details_test_big"), std::string::npos) << d->site.label;
  EXPECT_FALSE(d->frames.empty());
  ASSERT_GE(d->tensors.size(), 2u);
  size_t views = 0;
  for (const an::TensorRecord& s : d->tensors) views += s.is_view();
  EXPECT_GE(views, 1u);
  ASSERT_TRUE(d->kept_alive_by.has_value());
  const an::TensorRecord& keeper = d->tensors[*d->kept_alive_by];
  EXPECT_TRUE(keeper.is_view());
  for (const an::TensorRecord& s : d->tensors) {
    if (s.is_view()) {
      EXPECT_LE(s.release_ts.value_or(UINT64_MAX), keeper.release_ts.value_or(UINT64_MAX));
    }
  }
  // The view's base is the block's other tensor.
  bool base_here = false;
  for (const an::TensorRecord& s : d->tensors) base_here |= s.tensor_id == keeper.base_id;
  EXPECT_TRUE(base_here);

  EXPECT_FALSE(an::allocation_details(t, 1u << 30).has_value());

  const auto spans = an::scopes(t, t.origin_ns(), t.end_ns());
  bool saw_outer = false, saw_inner = false;
  for (const an::ScopeSpan& s : spans) {
    if (s.path == "outer" && s.depth == 0) saw_outer = true;
    if (s.path == "outer/inner" && s.name == "inner" && s.depth == 1) {
      saw_inner = true;
      ASSERT_TRUE(s.pop_ts.has_value());
      EXPECT_GE(*s.pop_ts, s.push_ts);
    }
  }
  EXPECT_TRUE(saw_outer);
  EXPECT_TRUE(saw_inner);
  // A range after every scope closed holds none of them.
  EXPECT_TRUE(an::scopes(t, t.end_ns() + 1, t.end_ns() + 2).empty());

  // The base tensor's own details: its block is the 256x256 allocation, the row is its view.
  const an::TensorRecord& base =
      *std::find_if(d->tensors.begin(), d->tensors.end(),
                    [&](const an::TensorRecord& s) { return s.tensor_id == keeper.base_id; });
  auto td = an::tensor_details(t, base.tensor_id);
  ASSERT_TRUE(td.has_value());
  EXPECT_EQ(td->tensor.sizes, "[256,256]");
  EXPECT_EQ(td->tensor.strides, "[256,1]");
  EXPECT_EQ(td->tensor.dtype, "float32");
  EXPECT_FALSE(td->tensor.is_view());
  EXPECT_EQ(td->device, "cpu");
  EXPECT_EQ(td->storage_nbytes, uint64_t(256 * 256 * 4));
  ASSERT_TRUE(td->allocation.has_value());
  EXPECT_EQ(td->allocation->row.seq, big->seq);
  EXPECT_EQ(td->allocation->row.scope, "outer/inner");
  ASSERT_TRUE(td->lifetime_ns.has_value());
  EXPECT_EQ(*td->lifetime_ns, *base.release_ts - base.create_ts);
  EXPECT_NE(td->tensor.site.find("details_test_big"), std::string::npos) << td->tensor.site;
  ASSERT_EQ(td->views.size(), 1u);
  EXPECT_EQ(td->views[0].tensor_id, keeper.tensor_id);
  EXPECT_EQ(td->views[0].sizes, "[256]");
  // The view's details name its base and the same block.
  auto vd = an::tensor_details(t, keeper.tensor_id);
  ASSERT_TRUE(vd.has_value());
  EXPECT_EQ(vd->tensor.base_id, base.tensor_id);
  ASSERT_TRUE(vd->allocation.has_value());
  EXPECT_EQ(vd->allocation->row.seq, big->seq);
  EXPECT_FALSE(an::tensor_details(t, 1u << 30).has_value());
}

// Note [The recorder's own frames]: a recording's stacks start at the producer (the
// allocator's `deliver`), never at the event delivery inlined into it, with either Frames
// mode; with user frames the site is the test's own function.
TEST(Details, StacksStartBelowTheRecordersOwnFrames) {
  TempTrace trace("own_frames");
  tidemark::record::Options o;
  o.path = trace.path();
  o.stack_depth = 32;
  tidemark::record::start(o);
  { tl::Tensor big = details_test_big(); }
  tidemark::record::stop();

  an::Trace t = an::Trace::open(trace.path());
  const tidemark::store::AllocationRow* big = nullptr;
  const auto rows = t.reader().allocations(t.device("cpu").id);
  for (const auto& r : rows)
    if (r.requested_size == 256 * 256 * 4) big = &r;
  ASSERT_NE(big, nullptr);
  const std::vector<std::string> frames = t.stack_frames(big->stack_id);
  ASSERT_FALSE(frames.empty());
  for (const std::string& f : frames) {
    EXPECT_EQ(f.find("tidemark::events::dispatch"), std::string::npos) << f;
    EXPECT_EQ(f.find("for_each_sink"), std::string::npos) << f;
    EXPECT_EQ(f.find("tidemark::record::"), std::string::npos) << f;
  }
  EXPECT_EQ(frames.front().rfind("tl::memory::", 0), 0u) << frames.front();
  EXPECT_EQ(t.library_frames(big->stack_id).size(), frames.size());
  t.set_frames(an::Frames::all);
  EXPECT_EQ(t.site(big->stack_id).label, frames.front());
  t.set_frames(an::Frames::user);
  EXPECT_NE(t.site(big->stack_id).label.find("details_test_big()"), std::string::npos)
      << t.site(big->stack_id).label;
}

}  // namespace
