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
  EXPECT_ERROR(bare.unary(tl::math::UnaryOp::exp, t, t), "unary: not implemented for tensors on cpu");
  EXPECT_ERROR(bare.fill(t, 1), "fill_: not implemented for tensors on cpu");
  // Optional entries answer instead: no fast path, no direct image loops.
  EXPECT_FALSE(bare.sum_leading(t, {true}, false, tl::kFloat32).defined());
  EXPECT_FALSE(bare.direct_image_loops());
  EXPECT_TRUE(tl::detail::kernels_for(tl::Device(tl::kCPU)).direct_image_loops());
}

TEST(Kernels, CudaTensorsNeedTheBackend) {
  if (tl::detail::has_kernels(tl::kCUDA)) GTEST_SKIP() << "this build has the CUDA backend";
  EXPECT_ERROR(tl::detail::kernels_for(tl::Device(tl::kCUDA)), "no kernels for tensors on cuda");
}

}  // namespace
