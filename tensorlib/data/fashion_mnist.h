// Fashion-MNIST (Xiao et al., 2017): 70,000 28x28 grey-scale images of clothing in 10
// classes, read from the gzip'd IDX files of the Debian package dataset-fashion-mnist
// (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz,
// t10k-labels-idx1-ubyte.gz). Uncompressed files of the same names without ".gz" (as
// torchvision's raw/ folder) are read too.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "tensorlib/data/dataset.h"

namespace tl::data {

struct FashionMNISTOptions {
  // Standardise pixels with the training set's statistics: (x - kMean) / kStd.
  bool normalize = false;
  // Read only the first `limit` examples (-1: all), e.g. for quick tests.
  int64_t limit = -1;
};

class FashionMNIST : public Dataset {
 public:
  static constexpr const char* kDefaultRoot = "/usr/share/datasets/fashion-mnist";
  static constexpr const char* kRootEnv = "TIDEMARK_FASHION_MNIST_DIR";
  static constexpr double kMean = 0.2860;  // of the 60,000 training images, pixels in [0, 1]
  static constexpr double kStd = 0.3530;
  static constexpr int64_t kRows = 28, kCols = 28, kNumClasses = 10;
  static constexpr int64_t kTrainSize = 60000, kTestSize = 10000;
  static constexpr std::array<const char*, 10> kClassNames = {
      "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

  // $TIDEMARK_FASHION_MNIST_DIR when set (and not empty), else kDefaultRoot.
  static std::string default_root();

  // Reads the training (60,000) or test (10,000) split from `root` (empty: default_root()).
  // Throws tl::Error naming the path when a file is missing (with the apt-get hint), and
  // naming the file and the problem when one is corrupt or truncated.
  explicit FashionMNIST(std::string root = default_root(), bool train = true,
                        FashionMNISTOptions options = {});

  int64_t size() const override { return images_.size(0); }
  // Image [1, 28, 28] float32 and label (0-dim int64), views into the dataset.
  Example get(int64_t index) const override;
  // Images [B, 1, 28, 28] and labels [B], copied out with index_select.
  Example get_batch(IntArrayRef indices) const override;

  // The first n examples, copied: a view would keep all of this dataset's storage alive
  // (the view-retention pitfall, docs/samples.md) for as long as the subset lives.
  FashionMNIST subset(int64_t n) const;

  // All images, [N, 1, 28, 28] float32 in [0, 1] (or standardised), and labels [N] int64.
  const Tensor& images() const { return images_; }
  const Tensor& targets() const { return targets_; }
  bool is_train() const { return train_; }
  const std::string& root() const { return root_; }

 private:
  struct Empty {};
  explicit FashionMNIST(Empty) {}
  std::string root_;
  bool train_ = true;
  Tensor images_, targets_;
};

}  // namespace tl::data
