// The pitfall samples (samples/pitfalls/) as a user runs them: each leaky program shows its
// effect in the allocator statistics it prints, and its --fixed version does not. Bounds are
// derived from the programs' tensor shapes, not from their own output.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "run_program.h"

namespace {

constexpr int64_t MiB = 1 << 20;

struct Runs {
  std::map<std::string, int64_t> leaky, fixed;
};

// Runs samples/pitfall_<name> without and with --fixed; both must succeed.
Runs run_both(const std::string& name) {
  const std::string bin = std::string(TIDEMARK_SAMPLES_BIN) + "/pitfall_" + name;
  Runs r;
  for (bool fixed : {false, true}) {
    std::vector<std::string> argv{bin};
    if (fixed) argv.push_back("--fixed");
    tl_test::Result res = tl_test::run(argv);
    EXPECT_EQ(res.rc, 0) << bin << (fixed ? " --fixed" : "") << ": " << res.err;
    (fixed ? r.fixed : r.leaky) = tl_test::key_values(res.out);
    EXPECT_TRUE((fixed ? r.fixed : r.leaky).count("peak_allocated")) << res.out;
  }
  return r;
}

TEST(Pitfalls, AccumulatedLossKeepsEveryGraph) {
  Runs r = run_both("accumulated_loss");
  // 20 batches of 256 rows; each graph saves at least the two 256 x 1024 ReLU outputs (2 MiB).
  EXPECT_GE(r.leaky["retained_bytes"], 20 * 2 * MiB);
  EXPECT_LT(r.fixed["retained_bytes"], 64 * 1024);
  // Everything is freed once `total` dies, in both versions.
  EXPECT_EQ(r.leaky["allocated_end"], r.leaky["allocated_before"]);
  EXPECT_EQ(r.fixed["allocated_end"], r.fixed["allocated_before"]);
}

TEST(Pitfalls, ASmallViewRetainsTheWholeStorage) {
  Runs r = run_both("view_retention");
  ASSERT_EQ(r.leaky["big_tensor_bytes"], 4 * MiB);
  EXPECT_GE(r.leaky["retained_bytes"], 16 * r.leaky["big_tensor_bytes"]);
  EXPECT_LT(r.fixed["retained_bytes"], r.fixed["big_tensor_bytes"]);
  EXPECT_LE(r.fixed["retained_bytes"], 2 * r.fixed["kept_view_bytes"]);
}

TEST(Pitfalls, RetainGraphKeepsThePreviousStepsActivations) {
  Runs r = run_both("retain_graph");
  // After the loop the last graph still holds its saved tensors: at least the two
  // 2048 x 512 ReLU outputs (8 MiB).
  EXPECT_GE(r.leaky["allocated_after"] - r.fixed["allocated_after"], 8 * MiB);
  // ... and during each forward the previous step's activations were still allocated.
  EXPECT_GT(r.leaky["peak_allocated"], r.fixed["peak_allocated"] * 115 / 100);
  EXPECT_GT(r.leaky["peak_reserved"], r.fixed["peak_reserved"]);
}

TEST(Pitfalls, EvaluationWithGradModeSavesActivations) {
  Runs r = run_both("eval_without_no_grad");
  // Six hidden 2048 x 512 activations (4 MiB each) are saved with grad mode on; without it at
  // most two are alive at once.
  EXPECT_GE(r.leaky["peak_allocated"] - r.fixed["peak_allocated"], 3 * 4 * MiB);
  EXPECT_EQ(r.leaky["allocated_after"], r.leaky["allocated_before"]);
}

TEST(Pitfalls, WrittenOutAttentionHoldsSeveralScoreMatrices) {
  Runs r = run_both("attention_scores");
  // One float32 score matrix at batch 2, 4 heads, 4,096 positions: 512 MiB. The scaled, the
  // masked and the softmaxed ones are live together; a block of 256 queries' three is 96 MiB.
  const int64_t score = int64_t{2} * 4 * 4096 * 4096 * 4;
  EXPECT_GE(r.leaky["peak_allocated"], 3 * score);
  EXPECT_LT(r.fixed["peak_allocated"], 3 * score / 16 + 32 * MiB);
  EXPECT_EQ(r.leaky["allocated_after"], r.leaky["allocated_before"]);
}

TEST(Pitfalls, StaleGradientsRaiseTheForwardsPeak) {
  Runs r = run_both("stale_grads");
  // Four 1024 x 1024 layers with biases: 16.02 MiB of gradients, live through every forward
  // after the first in the leaky loop. The fix's backward makes them again while it frees the
  // activations (about 16 MiB at batch 512), so it saves most of them, never more.
  const int64_t grads = 4 * (1024 * 1024 + 1024) * 4;
  EXPECT_GE(r.leaky["peak_allocated"] - r.fixed["peak_allocated"], grads / 2);
  EXPECT_LE(r.leaky["peak_allocated"] - r.fixed["peak_allocated"], grads);
  // Both end with the weights, their gradients and the last loss (a scalar: one 512-byte
  // block, the allocator's smallest).
  EXPECT_EQ(r.leaky["allocated_after"], r.fixed["allocated_after"]);
  EXPECT_EQ(r.leaky["allocated_after"], 2 * grads + 512);
}

TEST(Pitfalls, AKeptWarmUpGraphStaysUnderEveryStep) {
  Runs r = run_both("warmup_graph");
  // The warm-up's batch, and each layer's linear output and tanh output but the last (which is
  // the output the program keeps either way), 512 x 1024 floats (2 MiB) each, stay allocated
  // with the kept output's graph: tensorlib's unary ops save their input and their output. The
  // fixed warm-up keeps its output alone. They are live at every step's peak and at the end.
  const int64_t block = int64_t{512} * 1024 * 4;
  EXPECT_EQ(r.leaky["allocated_after"] - r.fixed["allocated_after"], 8 * block);
  EXPECT_EQ(r.leaky["peak_allocated"] - r.fixed["peak_allocated"], 8 * block);
}

TEST(Pitfalls, ForeachAdamHoldsAParameterSizedTemporary) {
  Runs r = run_both("optimizer_temporaries");
  // 16.02 MiB of parameters: the multi-tensor step's denominators, one per parameter, are live
  // together on top of everything the fused step has.
  const int64_t params = 4 * (1024 * 1024 + 1024) * 4;
  EXPECT_GE(r.leaky["peak_allocated"] - r.fixed["peak_allocated"], params);
  EXPECT_LE(r.leaky["peak_allocated"] - r.fixed["peak_allocated"], params + 8 * MiB);
  // Weights, gradients, both moments and the last loss: the same state either way.
  EXPECT_EQ(r.leaky["allocated_after"], r.fixed["allocated_after"]);
}

TEST(Pitfalls, SyncInLoopReadsOncePerStepAndTheFixReadsOnce) {
  Runs r = run_both("sync_in_loop");
  EXPECT_EQ(r.leaky["host_reads"], 20);
  EXPECT_EQ(r.fixed["host_reads"], 1);
  // The fix changes where the loss is read, not the training: same memory.
  EXPECT_EQ(r.leaky["peak_allocated"], r.fixed["peak_allocated"]);
}

TEST(Pitfalls, EmptyCacheCannotReleaseReferencedMemory) {
  Runs r = run_both("empty_cache_referenced");
  // Eight 1536 x 1024 outputs (6 MiB each) are still referenced: they stay allocated and
  // reserved; only what was cached around them can go.
  EXPECT_EQ(r.leaky["still_referenced_bytes"], 8 * 6 * MiB);
  EXPECT_GE(r.leaky["reserved_after_empty_cache"], 8 * 6 * MiB);
  EXPECT_LT(r.leaky["released_bytes"], r.leaky["reserved_after_work"] - 8 * 6 * MiB + 1);
  // With the references dropped, every segment goes back.
  EXPECT_EQ(r.fixed["still_referenced_bytes"], 0);
  EXPECT_EQ(r.fixed["reserved_after_empty_cache"], 0);
  EXPECT_EQ(r.fixed["released_bytes"], r.fixed["reserved_after_work"]);
}

TEST(Pitfalls, GrowingShapesFragmentAndExpandableSegmentsFixIt) {
  Runs r = run_both("fragmentation");
  // Same program, same allocations: only the allocator's segments differ.
  EXPECT_EQ(r.leaky["peak_allocated"], r.fixed["peak_allocated"]);
  // Each step's larger activations need new segments: reserved climbs to the sum of the
  // sizes seen, several times the peak allocated...
  EXPECT_GE(r.leaky["peak_reserved"], 3 * r.leaky["peak_allocated"]);
  // ... while expandable segments grow one segment and reuse its pages.
  EXPECT_LT(r.fixed["peak_reserved"], r.leaky["peak_reserved"] / 2);
  EXPECT_GE(r.leaky["reserved_unallocated_bytes"], 2 * r.fixed["reserved_unallocated_bytes"]);
}

TEST(Pitfalls, CheckpointingCutsActivationMemory) {
  Runs r = run_both("checkpointing");
  EXPECT_LT(r.fixed["peak_allocated"], r.leaky["peak_allocated"] * 6 / 10);
  EXPECT_EQ(r.fixed["allocated_after"], r.leaky["allocated_after"]);  // same parameters, grads
}

TEST(Pitfalls, TransposeContiguousCopiesWhereAViewWouldDo) {
  Runs r = run_both("transpose_contiguous");
  const int64_t a_bytes = 2048 * 1024 * 4;
  EXPECT_EQ(r.leaky["allocations"] - r.fixed["allocations"], 10);  // one copy per step
  EXPECT_EQ(r.leaky["allocated_bytes_total"] - r.fixed["allocated_bytes_total"], 10 * a_bytes);
  EXPECT_GE(r.leaky["peak_allocated"] - r.fixed["peak_allocated"], a_bytes);
}

TEST(Pitfalls, ManyPrefetchingWorkersHoldManyBatches) {
  Runs r = run_both("dataloader_workers");
  const int64_t batch = r.leaky["batch_bytes"];
  ASSERT_EQ(batch, 64 * 3 * 64 * 64 * 4);
  ASSERT_EQ(r.leaky["batches_ahead"], 32);
  ASSERT_EQ(r.fixed["batches_ahead"], 4);
  // The loop is slower than the workers, so their queues fill: 32 batches ahead against 4.
  // Half the difference is a safe bound under load.
  EXPECT_GE(r.leaky["peak_allocated"] - r.fixed["peak_allocated"], 14 * batch);
  EXPECT_GT(r.leaky["peak_reserved"], 2 * r.fixed["peak_reserved"]);
}

TEST(Pitfalls, BadArgumentsExitWithStatus2AndUsage) {
  const std::string bin = std::string(TIDEMARK_SAMPLES_BIN) + "/pitfall_view_retention";
  tl_test::Result r = tl_test::run({bin, "--steps", "zero"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--steps must be a positive integer"), std::string::npos) << r.err;
  r = tl_test::run({bin, "--frobnicate"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("unknown argument '--frobnicate'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("usage:"), std::string::npos);
  r = tl_test::run({bin, "--device", "tpu"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("unknown argument '--device'"), std::string::npos) << r.err;
}

// --device cuda where no CUDA device can be used (no backend, no driver or no GPU): a clear
// one-line error and status 2, before any work. (Where a GPU answers, the sample runs there.)
TEST(Pitfalls, DeviceCudaWithoutADeviceExitsWithStatus2) {
  const std::string bin = std::string(TIDEMARK_SAMPLES_BIN) + "/pitfall_sync_in_loop";
  tl_test::Result r = tl_test::run({bin, "--device", "cuda", "--steps", "2"});
  if (r.rc == 0) GTEST_SKIP() << "a CUDA device answered: the sample ran on it";
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("pitfall_sync_in_loop: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not available"), std::string::npos) << r.err;
}

}  // namespace
