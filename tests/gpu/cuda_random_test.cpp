// The device generator (Note [Counter-based random tensors] in core/philox.h): random tensors
// drawn on the GPU without a host upload, the same numbers as the CPU loop for the same seed
// and counters, reproducible with tl::manual_seed, and statistically sane. Skips without a
// CUDA device.
#include <gtest/gtest.h>

#include <cmath>

#include "gpu_test_util.h"
#include "tensorlib/nn/layers.h"
#include "tensorlib/tensorlib.h"

namespace tl {
namespace {

const Device kGpu("cuda:0");

TEST(CudaRandom, DrawsOnTheDeviceWithoutAnUpload) {
  TL_REQUIRE_GPU();
  gpu_test::EventLog log;
  Tensor u = rand({1000}, TensorOptions(kFloat32).device(kGpu));
  Tensor z = randn({1000}, TensorOptions(kFloat32).device(kGpu));
  Tensor r = randint(0, 10, {1000}, TensorOptions(kInt64).device(kGpu));
  Tensor d = nn::functional::dropout(ones({1000}, TensorOptions().device(kGpu)), 0.5, true);
  EXPECT_TRUE(u.is_cuda() && z.is_cuda() && r.is_cuda() && d.is_cuda());
  EXPECT_TRUE(log.of(gpu_test::ev::Kind::memcpy).empty()) << "a random tensor was uploaded";
}

// Same seed, same counters: the CPU generator and cuda:0's generator start at offset 0 after
// manual_seed, so the first draw on each gives the same numbers.
TEST(CudaRandom, SameNumbersAsTheCpuLoop) {
  TL_REQUIRE_GPU();
  for (ScalarType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    manual_seed(5);
    Tensor uc = rand({4099}, dt), ug = rand({4099}, TensorOptions(dt).device(kGpu));
    EXPECT_TRUE(equal(uc, ug.cpu()));  // exact: a few bits scaled by a power of two
    Tensor zc = randn({4099}, dt), zg = randn({4099}, TensorOptions(dt).device(kGpu));
    const double tol = dt == kFloat64 ? 1e-12 : dt == kFloat32 ? 1e-5 : 1e-2;
    EXPECT_TRUE(allclose(zg.cpu().to(kFloat64), zc.to(kFloat64), tol, tol));
  }
  manual_seed(6);
  Tensor ic = randint(-7, 1 << 20, {1001}),
         ig = randint(-7, 1 << 20, {1001}, TensorOptions(kInt64).device(kGpu));
  EXPECT_TRUE(equal(ic, ig.cpu()));
}

TEST(CudaRandom, ManualSeedReproducesAndTheOffsetAdvances) {
  TL_REQUIRE_GPU();
  const TensorOptions o = TensorOptions(kFloat32).device(kGpu);
  manual_seed(9);
  Tensor a = rand({333}, o), b = rand({333}, o);
  manual_seed(9);
  Tensor a2 = rand({333}, o);
  EXPECT_TRUE(equal(a.cpu(), a2.cpu()));
  EXPECT_FALSE(equal(a.cpu(), b.cpu()));
  // The launch shape does not matter: one big draw equals its elements drawn in the same
  // counter order, whatever the grid.
  manual_seed(9);
  Tensor big = rand({1 << 22}, o);
  EXPECT_TRUE(equal(big.slice(0, 0, 333).cpu(), a.cpu()));
  Tensor empty_draw = rand({0, 4}, o);
  EXPECT_EQ(empty_draw.numel(), 0);
}

TEST(CudaRandom, MomentsOfUniformAndNormal) {
  TL_REQUIRE_GPU();
  manual_seed(13);
  const int64_t n = int64_t{1} << 24;
  for (ScalarType dt : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor u = rand({n}, TensorOptions(dt).device(kGpu));
    EXPECT_NEAR(u.mean().item<double>(), 0.5, 1e-3);
    EXPECT_NEAR(u.var().item<double>(), 1.0 / 12, 1e-3);
    EXPECT_GE(u.min().item<double>(), 0.0);
    EXPECT_LT(u.max().item<double>(), 1.0);
    Tensor z = randn({n}, TensorOptions(dt).device(kGpu));
    EXPECT_NEAR(z.mean().item<double>(), 0.0, 2e-3);
    EXPECT_NEAR(z.var().item<double>(), 1.0, 2e-3);
    EXPECT_NEAR((z.abs() < 1).to(kFloat64).mean().item<double>(), 0.682689, 2e-3);
  }
  Tensor r = randint(0, 10, {n}, TensorOptions(kInt64).device(kGpu));
  EXPECT_EQ(r.min().item<int64_t>(), 0);
  EXPECT_EQ(r.max().item<int64_t>(), 9);
  EXPECT_NEAR(r.to(kFloat64).mean().item<double>(), 4.5, 5e-3);
}

TEST(CudaRandom, DropoutKeepsOneMinusPAndScales) {
  TL_REQUIRE_GPU();
  manual_seed(21);
  const double p = 0.3;
  Tensor x = full({1 << 22}, 2.0, TensorOptions(kFloat32).device(kGpu)).requires_grad_(true);
  Tensor y = nn::functional::dropout(x, p, true);
  Tensor kept = y != 0;
  EXPECT_NEAR(kept.to(kFloat64).mean().item<double>(), 1 - p, 2e-3);
  EXPECT_NEAR(y.masked_select(kept).mean().item<double>(), 2.0 / (1 - p), 1e-5);
  y.sum().backward();
  EXPECT_TRUE(equal(x.grad() != 0, kept));
  // A float32 mean over ~2.9M equal values: the sum's rounding is about 1e-6 relative.
  EXPECT_NEAR(x.grad().masked_select(kept).mean().item<double>(), 1.0 / (1 - p), 1e-5);
}

}  // namespace
}  // namespace tl
