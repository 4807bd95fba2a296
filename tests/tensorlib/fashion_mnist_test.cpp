// tl::data::FashionMNIST against reference values computed independently from the raw files
// by tests/tensorlib/data/fashion_mnist_reference.py (Python's gzip + struct), its errors for
// missing and damaged files, and a short training run that must learn the task.
#include <gtest/gtest.h>

#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <tensorlib/data/data.h>
#include <tensorlib/nn/loss.h>
#include <tensorlib/nn/module.h>
#include <tensorlib/optim/optimizer.h>
#include <tensorlib/tensorlib.h>
#include "tensorlib/expect_error.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TIDEMARK_SANITIZED 1
#else
#define TIDEMARK_SANITIZED 0
#endif

namespace {

namespace fs = std::filesystem;
using tl::Tensor;
using tl::data::FashionMNIST;

// ---- Output of tests/tensorlib/data/fashion_mnist_reference.py ------------------------------
constexpr int64_t kTrainFirstLabels[10] = {9, 0, 0, 3, 0, 2, 7, 2, 5, 5};
constexpr std::pair<int64_t, int64_t> kTrainPixelSums[] = {
    {0, 76247}, {1, 84598}, {2, 28662}, {12345, 97611}, {59999, 16684}};
constexpr int64_t kTrainTotalPixelSum = 3431114169;
constexpr int64_t kTestFirstLabels[10] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
constexpr std::pair<int64_t, int64_t> kTestPixelSums[] = {{0, 33456}, {1, 100994}, {2, 51520}};
constexpr int64_t kTestTotalPixelSum = 573469082;
// ----------------------------------------------------------------------------------------------

#define SKIP_WITHOUT_DATASET()                                                             \
  do {                                                                                     \
    if (!fs::exists(fs::path(FashionMNIST::default_root()) / "t10k-labels-idx1-ubyte.gz")) \
      GTEST_SKIP() << "Fashion-MNIST not found in " << FashionMNIST::default_root()        \
                   << ": the Debian package dataset-fashion-mnist is not installed "       \
                      "(apt-get install dataset-fashion-mnist)";                           \
  } while (0)

// Pixel values back in 0..255, summed exactly.
int64_t raw_pixel_sum(const Tensor& images) {
  Tensor c = images.contiguous();
  const float* p = c.data_ptr<float>();
  int64_t s = 0;
  for (int64_t i = 0; i < c.numel(); ++i) s += std::lround(p[i] * 255.0f);
  return s;
}

std::vector<int64_t> class_counts(const Tensor& labels) {
  std::vector<int64_t> counts(10, 0);
  const int64_t* p = labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < labels.numel(); ++i) ++counts.at(static_cast<size_t>(p[i]));
  return counts;
}

void expect_matches_reference(const FashionMNIST& ds, const int64_t (&first_labels)[10],
                              int64_t per_class, auto const& pixel_sums, int64_t total) {
  const int64_t n = ds.size();
  EXPECT_EQ(ds.images().sizes().vec(), (std::vector<int64_t>{n, 1, 28, 28}));
  EXPECT_EQ(ds.images().dtype(), tl::kFloat32);
  EXPECT_EQ(ds.targets().sizes().vec(), (std::vector<int64_t>{n}));
  EXPECT_EQ(ds.targets().dtype(), tl::kInt64);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(ds.targets()[i].item<int64_t>(), first_labels[i]) << i;
  EXPECT_EQ(class_counts(ds.targets()), std::vector<int64_t>(10, per_class));
  for (auto [index, sum] : pixel_sums) EXPECT_EQ(raw_pixel_sum(ds.get(index).data), sum) << index;
  EXPECT_EQ(raw_pixel_sum(ds.images()), total);
  EXPECT_EQ(ds.images().min().item<double>(), 0.0);
  EXPECT_EQ(ds.images().max().item<double>(), 1.0);
}

TEST(FashionMNIST, TrainSplitMatchesTheReference) {
  SKIP_WITHOUT_DATASET();
  // CPU time, not wall time: this machine's cores are shared.
  const std::clock_t t0 = std::clock();
  FashionMNIST train;
  const double seconds = static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC;
  std::printf("[ info ] read 60,000 training images in %.3f s of CPU\n", seconds);
  RecordProperty("load_seconds", std::to_string(seconds));
  if (!TIDEMARK_SANITIZED) {
    EXPECT_LT(seconds, 1.0);  // typically ~0.2 s
  }
  EXPECT_TRUE(train.is_train());
  ASSERT_EQ(train.size(), 60000);
  expect_matches_reference(train, kTrainFirstLabels, 6000, kTrainPixelSums, kTrainTotalPixelSum);
}

TEST(FashionMNIST, TestSplitMatchesTheReference) {
  SKIP_WITHOUT_DATASET();
  FashionMNIST test(FashionMNIST::default_root(), /*train=*/false);
  ASSERT_EQ(test.size(), 10000);
  expect_matches_reference(test, kTestFirstLabels, 1000, kTestPixelSums, kTestTotalPixelSum);
  Tensor first = test.get(0).data;
  EXPECT_EQ(first.sizes().vec(), (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(test.get(0).target.item<int64_t>(), 9);
}

TEST(FashionMNIST, NormalizeUsesTheTrainingStatistics) {
  SKIP_WITHOUT_DATASET();
  FashionMNIST train(FashionMNIST::default_root(), true, {.normalize = true});
  Tensor x = train.images().to(tl::kFloat64);
  EXPECT_NEAR(x.mean().item<double>(), 0.0, 2e-3);
  EXPECT_NEAR(x.std().item<double>(), 1.0, 2e-3);
  EXPECT_NEAR(train.images().min().item<double>(), -FashionMNIST::kMean / FashionMNIST::kStd, 1e-6);
}

TEST(FashionMNIST, LimitAndSubsetKeepTheFirstExamples) {
  SKIP_WITHOUT_DATASET();
  FashionMNIST limited(FashionMNIST::default_root(), false, {.limit = 100});
  ASSERT_EQ(limited.size(), 100);
  FashionMNIST full(FashionMNIST::default_root(), false);
  FashionMNIST sub = full.subset(100);
  EXPECT_EQ(sub.size(), 100);
  EXPECT_TRUE(tl::equal(limited.images(), sub.images()));
  EXPECT_TRUE(tl::equal(limited.targets(), sub.targets()));
  EXPECT_TRUE(tl::equal(limited.images(), full.images().narrow(0, 0, 100)));
  EXPECT_THROW(full.subset(10001), tl::Error);
  // A copy, not a view: it does not keep the full dataset's storage alive.
  EXPECT_FALSE(sub.images().is_view());
  EXPECT_NE(sub.images().storage().get(), full.images().storage().get());
  auto batch = sub.get_batch(std::vector<int64_t>{2, 0});
  EXPECT_EQ(batch.data.sizes().vec(), (std::vector<int64_t>{2, 1, 28, 28}));
  EXPECT_EQ(batch.target[0].item<int64_t>(), kTestFirstLabels[2]);
  EXPECT_EQ(raw_pixel_sum(batch.data[1]), kTestPixelSums[0].second);
}

using tl_test::error_of;

TEST(FashionMNIST, AMissingRootNamesThePathAndThePackage) {
  const std::string root = "/nonexistent/fashion-mnist-" + std::to_string(::getpid());
  std::string msg = error_of([&] { FashionMNIST ds(root); });
  EXPECT_NE(msg.find(root), std::string::npos) << msg;
  EXPECT_NE(msg.find("apt-get install dataset-fashion-mnist"), std::string::npos) << msg;
  EXPECT_NE(msg.find("TIDEMARK_FASHION_MNIST_DIR"), std::string::npos) << msg;

  // The environment variable replaces the default root.
  ::setenv("TIDEMARK_FASHION_MNIST_DIR", root.c_str(), 1);
  EXPECT_EQ(FashionMNIST::default_root(), root);
  msg = error_of([] { FashionMNIST ds; });
  ::unsetenv("TIDEMARK_FASHION_MNIST_DIR");
  EXPECT_NE(msg.find(root), std::string::npos) << msg;
  EXPECT_EQ(FashionMNIST::default_root(), FashionMNIST::kDefaultRoot);
}

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("tidemark-fmnist-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

// Writes `bytes` gzip-compressed to `p`.
void spit_gz(const fs::path& p, const std::string& bytes) {
  gzFile f = gzopen(p.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  gzclose(f);
}

TEST(FashionMNIST, AMissingFileIsNamed) {
  TempDir dir;
  std::string msg = error_of([&] { FashionMNIST ds(dir.str(), false); });
  EXPECT_NE(msg.find((dir.path() / "t10k-images-idx3-ubyte.gz").string()), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("apt-get install dataset-fashion-mnist"), std::string::npos) << msg;
}

TEST(FashionMNIST, ATruncatedFileIsNamedWithTheProblem) {
  SKIP_WITHOUT_DATASET();
  const fs::path src(FashionMNIST::default_root());
  TempDir dir;
  fs::copy_file(src / "t10k-labels-idx1-ubyte.gz", dir.path() / "t10k-labels-idx1-ubyte.gz");
  const std::string images = slurp(src / "t10k-images-idx3-ubyte.gz");
  const fs::path bad = dir.path() / "t10k-images-idx3-ubyte.gz";

  spit(bad, images.substr(0, images.size() / 2));  // the compressed stream is cut short
  std::string msg = error_of([&] { FashionMNIST ds(dir.str(), false); });
  EXPECT_NE(msg.find(bad.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected 7840016 (a 16-byte header and 10000 28x28 images)"),
            std::string::npos)
      << msg;

  spit(bad, images.substr(0, images.size() - 4));  // only the gzip trailer's length is lost
  msg = error_of([&] { FashionMNIST ds(dir.str(), false); });
  EXPECT_NE(msg.find(bad.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;

  std::string damaged = images;
  damaged[damaged.size() / 2] ^= 0x55;  // caught by the gzip CRC if not by inflate itself
  spit(bad, damaged);
  msg = error_of([&] { FashionMNIST ds(dir.str(), false); });
  EXPECT_NE(msg.find(bad.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("is corrupt (zlib: "), std::string::npos) << msg;
}

TEST(FashionMNIST, BadHeadersAreNamedWithTheProblem) {
  SKIP_WITHOUT_DATASET();
  const fs::path src(FashionMNIST::default_root());
  TempDir dir;
  const fs::path labels = dir.path() / "t10k-labels-idx1-ubyte.gz";
  const fs::path images = dir.path() / "t10k-images-idx3-ubyte.gz";
  fs::copy_file(src / "t10k-labels-idx1-ubyte.gz", labels);
  auto header = [](uint32_t magic, uint32_t count, uint32_t rows, uint32_t cols) {
    std::string h;
    for (uint32_t v : {magic, count, rows, cols}) {
      for (int shift = 24; shift >= 0; shift -= 8) h.push_back(static_cast<char>(v >> shift));
    }
    return h;
  };
  spit_gz(images, header(2049, 10000, 28, 28));  // a label file's magic number
  std::string msg = error_of([&] { FashionMNIST ds(dir.str(), false); });
  EXPECT_NE(msg.find(images.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("magic number 2049, expected 2051"), std::string::npos) << msg;

  spit_gz(images, header(2051, 10000, 32, 32) + std::string(10000 * 32 * 32, '\0'));
  msg = error_of([&] { FashionMNIST ds(dir.str(), false); });
  EXPECT_NE(msg.find("32x32 images, expected 28x28"), std::string::npos) << msg;

  // Counts that disagree between the image and the label file.
  spit_gz(images, header(2051, 3, 28, 28) + std::string(3 * 784, '\0'));
  msg = error_of([&] { FashionMNIST ds(dir.str(), false); });
  EXPECT_NE(msg.find("holds 3 images but"), std::string::npos) << msg;
  EXPECT_NE(msg.find("10000 labels"), std::string::npos) << msg;

  // The same pixels uncompressed (no .gz) are read too.
  fs::remove(images);
  spit(dir.path() / "t10k-images-idx3-ubyte",
       header(2051, 10000, 28, 28) + std::string(10000 * 784, '\x7f'));
  FashionMNIST plain(dir.str(), false);
  EXPECT_EQ(plain.size(), 10000);
  EXPECT_FLOAT_EQ(plain.images().max().item<float>(), 127.0f / 255.0f);
}

// One epoch over the training set with 0 and 2 workers: the same batches, and the rate.
TEST(FashionMNIST, DataLoaderThroughput) {
  SKIP_WITHOUT_DATASET();
  auto train = std::make_shared<FashionMNIST>();
  double rate[2] = {0, 0};
  int64_t checksum[2] = {0, 0};
  for (int w : {0, 2}) {
    tl::data::DataLoader loader(train,
                                {.batch_size = 64, .shuffle = true, .num_workers = w, .seed = 9});
    int64_t images = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (auto& batch : loader) {
      images += batch.data.size(0);
      checksum[w / 2] += batch.target[0].item<int64_t>() * images;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(images, 60000);
    rate[w / 2] = images / s;
    std::printf("[ info ] DataLoader, batch 64, %d workers: %.0f images/s\n", w, rate[w / 2]);
  }
  EXPECT_EQ(checksum[0], checksum[1]);
}

// An MLP 784-256-10 trained with Adam on the first 5,000 training images must classify the
// 10,000 test images better than 75% (chance is 10%).
TEST(FashionMNIST, ASmallMLPLearnsTheTask) {
  SKIP_WITHOUT_DATASET();
  namespace nn = tl::nn;
  tl::manual_seed(0);
  FashionMNIST train(FashionMNIST::default_root(), true, {.limit = 5000});
  FashionMNIST test(FashionMNIST::default_root(), false);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Flatten>());
  model->push_back(std::make_shared<nn::Linear>(784, 256));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::Linear>(256, 10));
  tl::optim::Adam opt(model->parameters(), {.lr = 1e-3});
  tl::data::DataLoader loader(train,
                              {.batch_size = 64, .shuffle = true, .num_workers = 1, .seed = 0});
  const int epochs = 4;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (auto& batch : loader) {
      opt.zero_grad();
      Tensor loss = nn::functional::cross_entropy((*model)(batch.data), batch.target);
      loss.backward();
      opt.step();
    }
  }
  model->eval();
  tl::NoGradGuard no_grad;
  Tensor predicted = tl::argmax((*model)(test.images()), 1);
  const double accuracy = predicted.eq(test.targets()).to(tl::kFloat64).mean().item<double>();
  std::printf("[ info ] test accuracy after %d epochs on 5,000 images: %.4f\n", epochs, accuracy);
  RecordProperty("accuracy", std::to_string(accuracy));
  EXPECT_GT(accuracy, 0.75);
}

}  // namespace
