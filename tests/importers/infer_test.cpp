// The phases Note [Inferred categories] (profiler/importers/infer.cpp) reads from frames, on the
// frames PyTorch and tensorlib really write: Python frames as a snapshot records them
// (function, file), and demangled C++ names. The accuracy of the categories built on them is
// measured end to end in tests/cli/infer_categories_test.cpp.
#include <gtest/gtest.h>

#include "profiler/importers/infer.h"

namespace {

using tidemark::importers::infer::Phase;
using tidemark::importers::infer::phase_of_frame;
using tidemark::importers::infer::StackPhase;

TEST(InferPhases, PyTorchFrames) {
  // torch/_tensor.py's Tensor.backward, the engine's C++ frames (stacks="all").
  EXPECT_EQ(phase_of_frame("backward", "/usr/lib/python3/site-packages/torch/_tensor.py"), Phase::backward);
  EXPECT_EQ(phase_of_frame("torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, "
                           "torch::autograd::Node*, torch::autograd::InputBuffer&, "
                           "std::shared_ptr<torch::autograd::ReadyQueue> const&)",
                           "??"),
            Phase::backward);
  EXPECT_EQ(phase_of_frame("_engine_run_backward", "/opt/conda/lib/python3.11/site-packages/torch/autograd/graph.py"),
            Phase::backward);
  // An optimizer's step and zero_grad, and their record_function names.
  EXPECT_EQ(phase_of_frame("step", "/opt/conda/lib/python3.11/site-packages/torch/optim/adam.py"), Phase::optimizer);
  EXPECT_EQ(phase_of_frame("_multi_tensor_adam", "C:\\Python311\\Lib\\site-packages\\torch\\optim\\adam.py"),
            Phase::optimizer);
  EXPECT_EQ(phase_of_frame("Optimizer.step#AdamW.step", ""), Phase::optimizer);
  // Data loading.
  EXPECT_EQ(phase_of_frame("__next__", "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py"), Phase::data);
  EXPECT_EQ(phase_of_frame("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", ""), Phase::data);
  // Building and moving a model; running it.
  EXPECT_EQ(phase_of_frame("__init__", "/x/site-packages/torch/nn/modules/linear.py"), Phase::setup);
  EXPECT_EQ(phase_of_frame("_apply", "/x/site-packages/torch/nn/modules/module.py"), Phase::setup);
  EXPECT_EQ(phase_of_frame("_call_impl", "/x/site-packages/torch/nn/modules/module.py"), Phase::forward);
  EXPECT_EQ(phase_of_frame("forward", "/x/site-packages/torch/nn/modules/linear.py"), Phase::forward);
  // The user's own code and the interpreter name no phase.
  EXPECT_EQ(phase_of_frame("train", "/home/me/train.py"), Phase::none);
  EXPECT_EQ(phase_of_frame("<module>", "/home/me/train.py"), Phase::none);
  EXPECT_EQ(phase_of_frame("", ""), Phase::none);
}

TEST(InferPhases, TensorlibFrames) {
  EXPECT_EQ(phase_of_frame("tl::autograd::backward(std::vector<tl::Tensor, std::allocator<tl::Tensor> > const&, "
                           "std::vector<tl::Tensor, std::allocator<tl::Tensor> > const&, bool, bool)",
                           "engine.cpp"),
            Phase::backward);
  EXPECT_EQ(phase_of_frame("tl::optim::Adam::step()", "optimizer.cpp"), Phase::optimizer);
  EXPECT_EQ(phase_of_frame("tl::data::DataLoader::EpochState::build(long) const", "dataloader.cpp"), Phase::data);
  EXPECT_EQ(phase_of_frame("tl::nn::Linear::Linear(long, long, bool)", "module.cpp"), Phase::setup);
  EXPECT_EQ(phase_of_frame("tl::nn::Linear::forward(tl::Tensor const&)", "module.cpp"), Phase::forward);
  // A parameter's type names no phase: the function is the user's.
  EXPECT_EQ(phase_of_frame("(anonymous namespace)::evaluate(tl::nn::Module&, tl::data::FashionMNIST const&, tl::Device)",
                           "train_fashion_mnist.cpp"),
            Phase::none);
  // Ops run without grad by autograd's helper are not backward.
  EXPECT_EQ(phase_of_frame("tl::autograd::forward_no_grad<tl::add(const Tensor&, const Tensor&, const Scalar&)::"
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
