// The kernel table seam (core/kernels.h, Note [Device dispatch]): front-ends reach a device's
// loops only through kernels_for(device), and a backend that leaves an entry unfilled fails
// naming the op and the device.
#include <gtest/gtest.h>

#include <tensorlib/core/kernels.h>
#include <tensorlib/tensorlib.h>

#include "expect_error.h"

namespace {

using tl::Tensor;

// A backend that fills no entry.
class BareKernels final : public tl::detail::Kernels {
 public:
  tl::DeviceType device_type() const override { return tl::kCPU; }
};

TEST(Kernels, TheCpuTableRunsWhatTheFrontEndsDispatch) {
  const tl::detail::Kernels& cpu = tl::detail::kernels_for(tl::Device(tl::kCPU));
  EXPECT_EQ(cpu.device_type(), tl::kCPU);
  EXPECT_TRUE(tl::detail::has_kernels(tl::kCPU));
  // The table's binary entry takes operands already promoted and broadcast.
  const Tensor a = tl::tensor({1.0, 2.0, 3.0}, tl::kFloat64);
  const Tensor b = tl::tensor({10.0, 20.0, 30.0}, tl::kFloat64);
  Tensor out = tl::empty({3}, tl::kFloat64);
  cpu.binary(tl::math::BinaryOp::add, out, a, b, 2);
  EXPECT_TRUE(tl::equal(out, tl::tensor({21.0, 42.0, 63.0}, tl::kFloat64)));
  EXPECT_TRUE(tl::equal(out, tl::add(a, b, 2)));
  // A row reduction over a contiguous [2, 3] buffer.
  Tensor sums = tl::empty({2}, tl::kFloat64);
  cpu.reduce_rows(tl::detail::ReduceOp::sum, sums, Tensor(), tl::arange(6, tl::kFloat64), 2, 3, 0);
  EXPECT_TRUE(tl::equal(sums, tl::tensor({3.0, 12.0}, tl::kFloat64)));
}

TEST(Kernels, AnUnfilledEntryNamesTheOpAndTheDevice) {
  const BareKernels bare;
  const Tensor t = tl::zeros({2});
  EXPECT_ERROR(bare.unary(tl::math::UnaryOp::exp, t, t),
               "unary: not implemented for tensors on cpu");
  EXPECT_ERROR(bare.fill(t, 1), "fill_: not implemented for tensors on cpu");
  // Optional entries answer instead: no fast path, no image kernel (Note [Image kernels]).
  EXPECT_FALSE(bare.sum_leading(t, {true}, false, tl::kFloat32).defined());
  const Tensor img = tl::ones({1, 1, 4, 4});
  const tl::detail::Window2d g{1, 1, 4, 4, 2, 2, 2, 2, 0, 0, 1, 1, 2, 2};
  Tensor indices;
  EXPECT_FALSE(bare.conv2d(img, tl::ones({1, 1, 2, 2}), Tensor(), g, 1).defined());
  EXPECT_FALSE(bare.max_pool2d(img, g, indices).defined());
  EXPECT_FALSE(indices.defined());
  EXPECT_FALSE(bare.avg_pool2d(img, g, {true, std::nullopt}).defined());
  EXPECT_FALSE(bare.upsample2d(img, g, {false, false, std::nullopt, std::nullopt}).defined());
  // A backward entry without its forward names itself.
  EXPECT_ERROR(
      bare.max_pool2d_backward(img, tl::ones({1, 1, 2, 2}), tl::zeros({1, 1, 2, 2}, tl::kInt64), g),
      "max_pool2d_backward: not implemented for tensors on cpu");
}

// The CPU table's image entries are the kernels the nn front-ends run: a 2 x 2 window over a
// 4 x 4 ramp, by hand.
TEST(Kernels, TheCpuTableHasImageKernels) {
  const tl::detail::Kernels& cpu = tl::detail::kernels_for(tl::Device(tl::kCPU));
  const Tensor img = tl::arange(16, tl::kFloat32).view({1, 1, 4, 4});
  const tl::detail::Window2d g{1, 1, 4, 4, 2, 2, 2, 2, 0, 0, 1, 1, 2, 2};
  Tensor indices;
  const Tensor mx = cpu.max_pool2d(img, g, indices);
  EXPECT_TRUE(tl::equal(mx, tl::tensor({5.0f, 7.0f, 13.0f, 15.0f}).view({1, 1, 2, 2})));
  EXPECT_TRUE(tl::equal(indices, tl::tensor({5L, 7L, 13L, 15L}, tl::kInt64).view({1, 1, 2, 2})));
  const Tensor avg = cpu.avg_pool2d(img, g, {true, std::nullopt});
  EXPECT_TRUE(tl::equal(avg, tl::tensor({2.5f, 4.5f, 10.5f, 12.5f}).view({1, 1, 2, 2})));
  // conv2d with a 2 x 2 kernel of ones at stride 2: the window sums, 4x the means.
  const Tensor conv = cpu.conv2d(img, tl::ones({1, 1, 2, 2}), tl::tensor({1.0f}), g, 1);
  EXPECT_TRUE(tl::equal(conv, avg * 4 + 1));
}

TEST(Kernels, CudaTensorsNeedTheBackend) {
  if (tl::detail::has_kernels(tl::kCUDA)) GTEST_SKIP() << "this build has the CUDA backend";
  EXPECT_ERROR(tl::detail::kernels_for(tl::Device(tl::kCUDA)), "no kernels for tensors on cuda");
}

}  // namespace
