// The phases Note [Inferred categories] (profiler/importers/infer.cpp) reads from frames, on the
// frames PyTorch and tensorlib really write: Python frames as a snapshot records them
// (function, file), and demangled C++ names. The accuracy of the categories built on them is
// measured end to end in tests/cli/infer_categories_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "profiler/importers/infer.h"

namespace {

using tidemark::importers::infer::Phase;
using tidemark::importers::infer::phase_of_frame;
using tidemark::importers::infer::StackPhase;

TEST(InferPhases, PyTorchFrames) {
  // torch/_tensor.py's Tensor.backward, the engine's C++ frames (stacks="all").
  EXPECT_EQ(phase_of_frame("backward", "/usr/lib/python3/site-packages/torch/_tensor.py"),
            Phase::backward);
  EXPECT_EQ(phase_of_frame("torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::"
                           "autograd::GraphTask>&, "
                           "torch::autograd::Node*, torch::autograd::InputBuffer&, "
                           "std::shared_ptr<torch::autograd::ReadyQueue> const&)",
                           "??"),
            Phase::backward);
  EXPECT_EQ(phase_of_frame("_engine_run_backward",
                           "/opt/conda/lib/python3.11/site-packages/torch/autograd/graph.py"),
            Phase::backward);
  // An optimizer's step and zero_grad, and their record_function names.
  EXPECT_EQ(phase_of_frame("step", "/opt/conda/lib/python3.11/site-packages/torch/optim/adam.py"),
            Phase::optimizer);
  EXPECT_EQ(phase_of_frame("_multi_tensor_adam",
                           "C:\\Python311\\Lib\\site-packages\\torch\\optim\\adam.py"),
            Phase::optimizer);
  EXPECT_EQ(phase_of_frame("Optimizer.step#AdamW.step", ""), Phase::optimizer);
  // Data loading.
  EXPECT_EQ(
      phase_of_frame("__next__", "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py"),
      Phase::data);
  EXPECT_EQ(phase_of_frame("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", ""),
            Phase::data);
  // Building and moving a model; running it.
  EXPECT_EQ(phase_of_frame("__init__", "/x/site-packages/torch/nn/modules/linear.py"),
            Phase::setup);
  EXPECT_EQ(phase_of_frame("_apply", "/x/site-packages/torch/nn/modules/module.py"), Phase::setup);
  EXPECT_EQ(phase_of_frame("_call_impl", "/x/site-packages/torch/nn/modules/module.py"),
            Phase::forward);
  EXPECT_EQ(phase_of_frame("forward", "/x/site-packages/torch/nn/modules/linear.py"),
            Phase::forward);
  // The user's own code and the interpreter name no phase.
  EXPECT_EQ(phase_of_frame("train", "/home/me/train.py"), Phase::none);
  EXPECT_EQ(phase_of_frame("<module>", "/home/me/train.py"), Phase::none);
  EXPECT_EQ(phase_of_frame("", ""), Phase::none);
}

TEST(InferPhases, TensorlibFrames) {
  EXPECT_EQ(
      phase_of_frame(
          "tl::autograd::backward(std::vector<tl::Tensor, std::allocator<tl::Tensor> > const&, "
          "std::vector<tl::Tensor, std::allocator<tl::Tensor> > const&, bool, bool)",
          "engine.cpp"),
      Phase::backward);
  EXPECT_EQ(phase_of_frame("tl::optim::Adam::step()", "optimizer.cpp"), Phase::optimizer);
  EXPECT_EQ(phase_of_frame("tl::data::DataLoader::EpochState::build(long) const", "dataloader.cpp"),
            Phase::data);
  EXPECT_EQ(phase_of_frame("tl::nn::Linear::Linear(long, long, bool)", "module.cpp"), Phase::setup);
  EXPECT_EQ(phase_of_frame("tl::nn::Linear::forward(tl::Tensor const&)", "module.cpp"),
            Phase::forward);
  // A parameter's type names no phase: the function is the user's.
  EXPECT_EQ(phase_of_frame("(anonymous namespace)::evaluate(tl::nn::Module&, "
                           "tl::data::FashionMNIST const&, tl::Device)",
                           "train_fashion_mnist.cpp"),
            Phase::none);
  // Ops run without grad by autograd's helper are not backward.
  EXPECT_EQ(
      phase_of_frame(
          "tl::autograd::forward_no_grad<tl::add(const Tensor&, const Tensor&, const Scalar&)::"
          "<lambda()> >({unnamed type})",
          "function.h"),
      Phase::none);
}

TEST(InferPhases, AStackTakesItsStrongestPhase) {
  StackPhase optimizer;  // Adam's step calls tensor ops a forward would call too
  optimizer.add(Phase::none);
  optimizer.add(Phase::optimizer);
  optimizer.add(Phase::none);
  EXPECT_EQ(optimizer.phase(), Phase::optimizer);
  StackPhase recompute;  // checkpointing runs a segment's forward inside backward
  recompute.add(Phase::forward);
  recompute.add(Phase::backward);
  EXPECT_EQ(recompute.phase(), Phase::recompute);
  StackPhase none;
  EXPECT_EQ(none.phase(), Phase::none);
}

}  // namespace

// Rule 5 of Note [Inferred categories]: steps from a loop's repeated allocations, on event
// lists built by hand. Each event is an alloc from a call path (a letter), or a free ('-'); a
// step end is the position of the event the step comes just before (the next iteration's
// first allocation), or the list's length for one after the last event.
namespace repetition {

using tidemark::importers::infer::PhaseEvent;
using tidemark::importers::infer::repetition_step_ends;

std::vector<PhaseEvent> events(const std::string& calls) {
  std::vector<PhaseEvent> out;
  for (char c : calls) {
    PhaseEvent e;
    e.ts = out.size();
    e.alloc = c != '-';
    e.stack = c == '-' ? 0 : static_cast<uint64_t>(c);
    if (c == 'D') e.phase = tidemark::importers::infer::Phase::data;  // the loader's
    out.push_back(e);
  }
  return out;
}

TEST(InferSteps, EachIterationOfARepeatingLoopEnds) {
  // Setup (P Q), five iterations of x y (model: L R L R) loss, frees between them, then a
  // report (Z) after the loop.
  //                      0 2       10       19       28       37       46 48
  const std::string s = "PQxyLRLRl--xyLRLRl--xyLRLRl--xyLRLRl--xyLRLRl--Z";
  // Before each x after the first (positions 11, 20, 29, 38), and before Z (47).
  EXPECT_EQ(repetition_step_ends(events(s)), (std::vector<uint64_t>{11, 20, 29, 38, 47}));
  // Without the trailing report, the last iteration ends with the trace (after event 46).
  EXPECT_EQ(repetition_step_ends(events(s.substr(0, 47))),
            (std::vector<uint64_t>{11, 20, 29, 38, 47}));
}

// The same calls, each allocation made inside a module's forward at the line `lines[i]` of
// its outermost forward ('.': outside any forward).
std::vector<PhaseEvent> events_in(const std::string& calls, const std::string& lines) {
  std::vector<PhaseEvent> out = events(calls);
  for (size_t i = 0; i < out.size() && i < lines.size(); ++i)
    if (out[i].alloc && lines[i] != '.') out[i].forward_line = static_cast<uint64_t>(lines[i]);
  return out;
}

TEST(InferSteps, TheLayersOfOneForwardAreNoSteps) {
  // One forward of a 5-block model: embedding (e), five blocks (q k s o: the same call paths
  // each time, a free between blocks), then the head (h). Every block is called from one line
  // of the model's forward ('2'); the embedding and the head from others.
  const std::string calls = "eqkso-qkso-qkso-qkso-qkso-h";
  const std::string one_forward = "12222.2222.2222.2222.2222.3";
  EXPECT_TRUE(repetition_step_ends(events_in(calls, one_forward)).empty());
  // Without frames saying so, the blocks read as five iterations: what the rule is for.
  EXPECT_FALSE(repetition_step_ends(events(calls)).empty());
  // A training loop of forwards that run the whole model (lines 1, 2, 3), then the loss and
  // backward outside any forward: its iterations are steps.
  const std::string loop = "xyzLB--xyzLB--xyzLB--xyzLB--";
  const std::string lines = "123..  123..  123..  123..  ";
  EXPECT_EQ(repetition_step_ends(events_in(loop, lines)), (std::vector<uint64_t>{7, 14, 21, 28}));
}

TEST(InferSteps, AFirstIterationMayMakeLazyStateOnce) {
  // The first iteration also makes S (an optimizer's state, say), once.
  const std::string s = "xaSb-xab-xab-xab-";
  EXPECT_EQ(repetition_step_ends(events(s)), (std::vector<uint64_t>{5, 9, 13, 17}));
  // With three, x's one regular gap is not enough, but b recurs regularly: the iterations
  // still begin at x, after the free.
  EXPECT_EQ(repetition_step_ends(events("xaSb-xab-xab-")), (std::vector<uint64_t>{5, 9, 13}));
  // And a report after the loop (Z) is not an iteration.
  EXPECT_EQ(repetition_step_ends(events("xaSb-xab-xab-Z")), (std::vector<uint64_t>{5, 9, 13}));
}

TEST(InferSteps, NoneIsInventedWhereNothingRepeats) {
  // A model built in a loop (w b, five times) before work that repeats nothing: the loop
  // covers 10 of 30 allocations.
  EXPECT_TRUE(repetition_step_ends(events("wbwbwbwbwbABCDEFGHIJKLMNOPQRST")).empty());
  // An anchor at a fixed distance whose iterations allocate differently.
  EXPECT_TRUE(repetition_step_ends(events("xABCxDEFxGHIxJKLxMNO")).empty());
  // Too few repetitions, and no allocations at all.
  EXPECT_TRUE(repetition_step_ends(events("xabxab")).empty());
  EXPECT_TRUE(repetition_step_ends(events("")).empty());
  EXPECT_TRUE(repetition_step_ends(events("---")).empty());
}

TEST(InferSteps, TheLastIterationEndsBeforeTheTeardown) {
  // After the loop the program frees what it kept (the accumulated graphs): the last step ends
  // as the others, one free after its last allocation (position 12), not after the teardown.
  EXPECT_EQ(repetition_step_ends(events("xa-xa-xa-xa-----")), (std::vector<uint64_t>{3, 6, 9, 12}));
}

TEST(InferSteps, ABatchTheIterationWaitedForIsItsOwn) {
  // The loader's allocations (D, data loading) are left out of the repetition; one that comes
  // right before an iteration's first allocation (a worker late with the batch the iteration
  // waits for) begins that iteration: its step ends before D (6), not between D and x (7).
  EXPECT_EQ(repetition_step_ends(events("xa-xa-Dxa-xa-")), (std::vector<uint64_t>{3, 6, 10, 13}));
}

TEST(InferSteps, OneAllocationPerIteration) {
  // A loop whose body allocates once (a batch kept in a list): every allocation is a step.
  EXPECT_EQ(repetition_step_ends(events("xxxx")), (std::vector<uint64_t>{1, 2, 3, 4}));
}

}  // namespace repetition

namespace state_before_history {

using tidemark::events::Category;
namespace infer = tidemark::importers::infer;

// Note [State before the history], worked by hand. Before the history: 6 blocks of 4096 B and
// 3 of 512 B, never freed, without frames. In the window: a forward saves an activation, the
// backward makes the gradients (2 of 4096 B, 1 of 512 B) and frees the activation, then (with
// `optimizer`) the optimizer's step allocates and frees a temporary. Adam's state is 2 tensors
// per parameter: 3 blocks per gradient, so 2 + 1 parameters and 4 + 2 optimizer states.
std::vector<Category> categories(bool optimizer, int before_4096) {
  std::vector<infer::PhaseEvent> events = {
      {0, Phase::forward, true, 1, 0},   {1, Phase::backward, true, 2, 0},
      {2, Phase::backward, true, 2, 0},  {3, Phase::backward, true, 3, 0},
      {4, Phase::backward, false, 0, 0},
  };
  std::vector<infer::Block> blocks;
  for (int i = 0; i < before_4096 + 3; ++i) {
    infer::Block b;
    b.before_trace = true;
    b.size = i < before_4096 ? 4096 : 512;
    blocks.push_back(b);
  }
  auto alloc = [&](uint64_t at, uint64_t freed, Phase p, uint64_t size) {
    infer::Block b;
    b.alloc_event = at;
    b.free_event = freed;
    b.alloc_phase = p;
    b.free_phase = freed == infer::kNever ? Phase::none : events[freed].phase;
    b.size = size;
    blocks.push_back(b);
  };
  alloc(0, 4, Phase::forward, 1 << 20);  // the activation
  alloc(1, infer::kNever, Phase::backward, 4096);
  alloc(2, infer::kNever, Phase::backward, 4096);
  alloc(3, infer::kNever, Phase::backward, 512);
  if (optimizer) {
    events.push_back({5, Phase::optimizer, true, 4, 0});
    events.push_back({6, Phase::optimizer, false, 0, 0});
    alloc(5, 6, Phase::optimizer, 4096);
  }
  return infer::infer(blocks, events).categories;
}

TEST(InferCategories, StateMadeBeforeTheHistoryIsToldFromParametersBySize) {
  const std::vector<Category> c = categories(true, 6);
  const std::vector<Category> before(c.begin(), c.begin() + 9);
  EXPECT_EQ(before,
            (std::vector<Category>{
                Category::parameter, Category::parameter, Category::optimizer_state,
                Category::optimizer_state, Category::optimizer_state, Category::optimizer_state,
                Category::parameter, Category::optimizer_state, Category::optimizer_state}));
  EXPECT_EQ(c[9], Category::activation);
  EXPECT_EQ(c[10], Category::gradient);
  EXPECT_EQ(c[12], Category::gradient);
  EXPECT_EQ(c[13], Category::temporary);
}

TEST(InferCategories, WithoutAnOptimizerOrOneMultipleTheyStayParameters) {
  for (const auto& [optimizer, before_4096] : {std::pair{false, 6}, std::pair{true, 5}}) {
    const std::vector<Category> c = categories(optimizer, before_4096);
    for (int i = 0; i < before_4096 + 3; ++i)
      EXPECT_EQ(c[i], Category::parameter) << optimizer << " " << i;
  }
}

// Note [State before the history], rule 2, worked by hand: no gradient is made in the window (a
// forward dumped before its backward). Before the history, 2 parameters of 4096 B and 2 of
// 1024 B, each with a gradient and Adam's two moments: 8 blocks of each size, four groups.
// `zero_grad_frees`: the window starts with a zero_grad freeing the first two of each size.
std::vector<Category> grouped(bool zero_grad_frees, int per_size) {
  std::vector<infer::PhaseEvent> events = {{0, Phase::forward, true, 1, 0}};
  std::vector<infer::Block> blocks;
  for (uint64_t size : {4096, 1024})
    for (int i = 0; i < per_size; ++i) {
      infer::Block b;
      b.before_trace = true;
      b.size = size;
      if (zero_grad_frees && i < 2) {
        b.free_event = events.size();
        b.free_phase = Phase::optimizer;
        b.freed_by_zero_grad = true;
        events.push_back({events.size(), Phase::optimizer, false, 0, 0});
      }
      blocks.push_back(b);
    }
  infer::Block act;  // the forward's activation, never freed in the window
  act.alloc_event = 0;
  act.alloc_phase = Phase::forward;
  act.size = 1 << 20;
  blocks.push_back(act);
  return infer::infer(blocks, events).categories;
}

TEST(InferCategories, FourEqualGroupsBeforeTheHistoryAreParametersGradientsAndMoments) {
  const std::vector<Category> c = grouped(false, 8);
  for (int size = 0; size < 2; ++size) {
    const std::vector<Category> one(c.begin() + size * 8, c.begin() + size * 8 + 8);
    EXPECT_EQ(std::count(one.begin(), one.end(), Category::parameter), 2) << size;
    EXPECT_EQ(std::count(one.begin(), one.end(), Category::gradient), 2) << size;
    EXPECT_EQ(std::count(one.begin(), one.end(), Category::optimizer_state), 4) << size;
  }
}

TEST(InferCategories, WhatAZeroGradFreesAreTheGradients) {
  const std::vector<Category> c = grouped(true, 8);
  for (int size = 0; size < 2; ++size) {
    EXPECT_EQ(c[size * 8], Category::gradient);
    EXPECT_EQ(c[size * 8 + 1], Category::gradient);
    const std::vector<Category> kept(c.begin() + size * 8 + 2, c.begin() + size * 8 + 8);
    EXPECT_EQ(std::count(kept.begin(), kept.end(), Category::parameter), 2) << size;
    EXPECT_EQ(std::count(kept.begin(), kept.end(), Category::optimizer_state), 4) << size;
  }
}

TEST(InferCategories, SizesInNoEqualGroupsStayParameters) {
  // 7 of each size: neither 4 nor 3 groups (14 stray blocks of 14), a model's own parameters.
  const std::vector<Category> c = grouped(false, 7);
  for (int i = 0; i < 14; ++i) EXPECT_EQ(c[i], Category::parameter) << i;
}

// Note [A graph from before the history], worked by hand: before the history, a warm-up's graph
// (two blocks of 1 MiB and one of 3 MiB, never freed) beside a parameter of 4096 B; in the
// window, a forward saves the same three sizes, which its backward frees.
TEST(InferCategories, AGraphKeptFromBeforeTheHistoryIsToldBySizeAgainstTheWindowsForward) {
  for (bool warm : {true, false}) {
    std::vector<infer::PhaseEvent> events = {
        {0, Phase::forward, true, 1, 0},   {1, Phase::forward, true, 1, 0},
        {2, Phase::forward, true, 1, 0},   {3, Phase::forward, true, 2, 0},
        {4, Phase::backward, true, 3, 0},  {5, Phase::backward, false, 0, 0},
        {6, Phase::backward, false, 0, 0}, {7, Phase::backward, false, 0, 0},
    };
    std::vector<infer::Block> blocks;
    std::vector<uint64_t> before = {4096};
    if (warm) before.insert(before.end(), {1 << 20, 1 << 20, 3 << 20});
    for (uint64_t size : before) {
      infer::Block b;
      b.before_trace = true;
      b.size = size;
      blocks.push_back(b);
    }
    const uint64_t saved[] = {1 << 20, 1 << 20, 3 << 20};
    for (uint64_t i = 0; i < 3; ++i) {
      infer::Block b;
      b.alloc_event = i;
      b.alloc_phase = Phase::forward;
      b.free_event = 5 + i;
      b.free_phase = Phase::backward;
      b.size = saved[i];
      blocks.push_back(b);
    }
    infer::Block out;  // the forward's result (its last alloc), freed by nobody
    out.alloc_event = 3;
    out.alloc_phase = Phase::forward;
    out.size = 512;
    blocks.push_back(out);
    const std::vector<Category> c = infer::infer(blocks, events).categories;
    EXPECT_EQ(c[0], Category::parameter);
    if (warm) {
      for (int i = 1; i < 4; ++i) EXPECT_EQ(c[i], Category::activation) << i;
    }
    EXPECT_EQ(c[before.size()], Category::activation);  // the window's own
  }
}

}  // namespace state_before_history
