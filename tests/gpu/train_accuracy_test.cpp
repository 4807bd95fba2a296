// Training on the GPU reaches the CPU's accuracy: the Fashion-MNIST MLP (samples/
// fashion_models.h) trained for one epoch on cuda:0 with the sample's settings (Adam, lr 1e-3,
// batch 64) must reach at least 84% test accuracy, the figure one CPU epoch reaches
// (docs/samples.md). Skips without a device or without the dataset.
#include <gtest/gtest.h>

#include <filesystem>

#include "../../samples/fashion_models.h"
#include "gpu_test_util.h"
#include "tensorlib/data/data.h"
#include "tensorlib/nn/loss.h"
#include "tensorlib/optim/optimizer.h"
#include "tensorlib/tensorlib.h"

namespace tl {
namespace {

TEST(CudaTraining, MlpOneEpochReachesTheCpuAccuracy) {
  TL_REQUIRE_GPU();
  namespace fs = std::filesystem;
  if (!fs::exists(fs::path(data::FashionMNIST::default_root()) / "t10k-labels-idx1-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not found in " << data::FashionMNIST::default_root()
                 << " (set TIDEMARK_FASHION_MNIST_DIR): GPU accuracy check not run";
  const Device device("cuda:0");
  manual_seed(0);
  auto model = samples::make_mlp();
  model->to(device);
  optim::Adam opt(model->parameters(), {.lr = 1e-3});
  data::FashionMNIST train(data::FashionMNIST::default_root(), true, {.normalize = true});
  data::FashionMNIST test(data::FashionMNIST::default_root(), false, {.normalize = true});
  data::DataLoader loader(std::make_shared<data::FashionMNIST>(train),
                          {.batch_size = 64, .shuffle = true, .pin_memory = true, .seed = 0});
  for (auto& batch : loader) {
    opt.zero_grad();
    Tensor loss =
        nn::functional::cross_entropy((*model)(batch.data.to(device)), batch.target.to(device));
    loss.backward();
    opt.step();
  }
  NoGradGuard no_grad;
  model->eval();
  data::DataLoader eval(std::make_shared<data::FashionMNIST>(test), {.batch_size = 1000});
  Tensor correct = zeros({}, TensorOptions(kInt64).device(device));
  for (auto& batch : eval) {
    Tensor logits = (*model)(batch.data.to(device));
    correct = correct + logits.argmax(1).eq(batch.target.to(device)).sum();
  }
  const double accuracy =
      static_cast<double>(correct.item<int64_t>()) / static_cast<double>(test.size());
  std::printf("MLP, 1 epoch on cuda:0: test accuracy %.4f\n", accuracy);
  EXPECT_GE(accuracy, 0.84);
}

}  // namespace
}  // namespace tl
