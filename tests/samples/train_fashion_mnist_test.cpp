// samples/train_fashion_mnist as a user runs it: a short real training run on the Debian
// Fashion-MNIST package reaches its accuracy and prints its memory statistics; bad arguments
// and a missing dataset are clear errors with exit status 2.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>

#include "run_program.h"

namespace {

const std::string kBin = std::string(TIDEMARK_SAMPLES_BIN) + "/train_fashion_mnist";

bool have_dataset() {
  const char* env = std::getenv("TIDEMARK_FASHION_MNIST_DIR");
  const std::string root = env && *env ? env : "/usr/share/datasets/fashion-mnist";
  return std::filesystem::exists(root + "/train-images-idx3-ubyte.gz");
}

TEST(TrainFashionMnist, MlpOnAFiveThousandImageSubsetBeats75Percent) {
  if (!have_dataset())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  tl_test::Result r = tl_test::run({kBin, "--model", "mlp", "--epochs", "2", "--limit", "5000",
                                    "--threads", "1", "--seed", "1"});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::smatch m;
  std::regex epoch(
      R"(epoch 2/2  loss ([0-9.]+)  test accuracy ([0-9.]+)%  time ([0-9.]+) s  ([0-9]+) samples/s)");
  ASSERT_TRUE(std::regex_search(r.out, m, epoch)) << r.out;
  EXPECT_LT(std::stod(m[1]), 1.0);   // mean cross-entropy of the second epoch
  EXPECT_GT(std::stod(m[2]), 75.0);  // on all 10,000 test images
  EXPECT_GT(std::stod(m[4]), 0.0);

  auto kv = tl_test::key_values(r.out);
  for (const char* k :
       {"max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved"})
    ASSERT_TRUE(kv.count(k)) << k << " missing from:\n" << r.out;
  // The datasets stay allocated: the 5,000 training images read (--limit reads no more) and
  // the 10,000 test images, 28 x 28 float32.
  EXPECT_GE(kv["memory_allocated"], int64_t{15000} * 784 * 4);
  EXPECT_LT(kv["max_memory_allocated"], int64_t{60000} * 784 * 4);
  EXPECT_GE(kv["max_memory_allocated"], kv["memory_allocated"]);
  EXPECT_GE(kv["memory_reserved"], kv["memory_allocated"]);
  EXPECT_GE(kv["max_memory_reserved"], kv["memory_reserved"]);
  EXPECT_GE(kv["max_memory_reserved"], kv["max_memory_allocated"]);
}

TEST(TrainFashionMnist, BadArgumentsAndAMissingDatasetExitWithStatus2) {
  tl_test::Result r = tl_test::run({kBin, "--model", "transformer"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--model: transformer not in {mlp,cnn}"), std::string::npos) << r.err;
  r = tl_test::run({kBin, "--epochs", "0"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--epochs"), std::string::npos) << r.err;
  r = tl_test::run({kBin, "--data", "/nonexistent/fashion"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("/nonexistent/fashion"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("apt-get install dataset-fashion-mnist"), std::string::npos) << r.err;
}

}  // namespace
