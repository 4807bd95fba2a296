// Views share storage and never copy; strides, offsets and contiguity follow PyTorch.
#include <gtest/gtest.h>

#include <tensorlib/tensorlib.h>

namespace {

using tl::Tensor;
using Shape = std::vector<int64_t>;

Shape vec(tl::IntArrayRef a) {
  return a.vec();
}

// Reads element (i, j) of a 2-D tensor through its strides, independently of the op code.
double at2(const Tensor& t, int64_t i, int64_t j) {
  const float* base = static_cast<const float*>(t.storage()->data());
  return base[t.storage_offset() + i * t.stride(0) + j * t.stride(1)];
}

TEST(Views, TransposeSharesStorageAndSwapsStrides) {
  Tensor a = tl::arange(12, tl::kFloat32).view({3, 4});
  Tensor b = a.transpose(0, 1);
  EXPECT_EQ(b.storage(), a.storage());
  EXPECT_EQ(vec(b.sizes()), (Shape{4, 3}));
  EXPECT_EQ(vec(b.strides()), (Shape{1, 4}));
  EXPECT_TRUE(b.is_view());
  EXPECT_FALSE(b.is_contiguous());
  EXPECT_EQ(at2(b, 3, 2), 11.0);
}

TEST(Views, WritesThroughAViewAreSeenByTheBase) {
  Tensor a = tl::zeros({3, 4});
  a.t().select(0, 1).select(0, 2).fill_(7);  // a[2][1]
  EXPECT_EQ(at2(a, 2, 1), 7.0);
  EXPECT_EQ(a.sum().item<double>(), 7.0);
  a.narrow(1, 2, 2).fill_(1);  // columns 2..3
  EXPECT_EQ(at2(a, 0, 3), 1.0);
  EXPECT_EQ(at2(a, 0, 1), 0.0);
}

TEST(Views, BaseIsTheRootAndVersionCounterIsShared) {
  Tensor a = tl::ones({4, 4});
  Tensor v1 = a.narrow(0, 1, 2);
  Tensor v2 = v1.transpose(0, 1);
  EXPECT_TRUE(v2._base().is_same(a));
  EXPECT_FALSE(a.is_view());
  EXPECT_EQ(a._version(), v2._version());
  uint32_t before = a._version();
  v2.mul_(2);
  EXPECT_EQ(a._version(), before + 1);
  EXPECT_EQ(v1._version(), before + 1);
  EXPECT_EQ(at2(a, 1, 0), 2.0);
  EXPECT_EQ(at2(a, 0, 0), 1.0);
}

TEST(Views, OffsetsOfNarrowSelectSliceDiagonal) {
  Tensor a = tl::arange(20, tl::kFloat32).view({4, 5});
  Tensor n = a.narrow(1, 2, 3);
  EXPECT_EQ(n.storage_offset(), 2);
  EXPECT_EQ(vec(n.strides()), (Shape{5, 1}));
  Tensor s = a.select(0, -1);
  EXPECT_EQ(s.storage_offset(), 15);
  EXPECT_EQ(vec(s.sizes()), (Shape{5}));
  Tensor sl = a.slice(1, 1, 5, 2);  // columns 1, 3
  EXPECT_EQ(vec(sl.sizes()), (Shape{4, 2}));
  EXPECT_EQ(vec(sl.strides()), (Shape{5, 2}));
  EXPECT_EQ(sl.storage_offset(), 1);
  EXPECT_EQ(at2(sl, 2, 1), 13.0);
  Tensor sl2 = a.slice(0, -3, 100);  // Python-style clamping
  EXPECT_EQ(vec(sl2.sizes()), (Shape{3, 5}));
  Tensor d = a.diagonal(1);
  EXPECT_EQ(vec(d.sizes()), (Shape{4}));
  EXPECT_EQ(vec(d.strides()), (Shape{6}));
  EXPECT_EQ(d.storage_offset(), 1);
  Tensor dn = a.diagonal(-2);
  EXPECT_EQ(vec(dn.sizes()), (Shape{2}));
  EXPECT_EQ(dn.storage_offset(), 10);
}

TEST(Views, CopyFromAPartlyOverlappingViewIsRefused) {
  // PyTorch: x[1:].copy_(x[:-1]) raises rather than giving an order-dependent result.
  Tensor x = tl::arange(6, tl::kFloat32);
  try {
    x.slice(0, 1, 6).copy_(x.slice(0, 0, 5));
    FAIL() << "a partly overlapping copy must throw";
  } catch (const tl::Error& err) {
    EXPECT_NE(std::string(err.what())
                  .find("some elements of the input tensor and the written-to "
                        "tensor refer to a single memory location"),
              std::string::npos)
        << err.what();
  }
  EXPECT_TRUE(tl::equal(x, tl::arange(6, tl::kFloat32)));  // nothing was written
  x.copy_(x);                                              // the same memory: allowed
  x.slice(0, 0, 3).copy_(x.slice(0, 3, 6));                // disjoint halves of one storage
  EXPECT_EQ(x[0].item<float>(), 3.0f);
  EXPECT_EQ(x[2].item<float>(), 5.0f);
}

TEST(Views, ExpandUsesZeroStridesAndChecksSizes) {
  Tensor a = tl::arange(3, tl::kFloat32).view({3, 1});
  Tensor e = a.expand({2, 3, 4});
  EXPECT_EQ(vec(e.strides()), (Shape{0, 1, 0}));
  EXPECT_EQ(e.storage(), a.storage());
  Tensor e2 = a.expand({-1, 5});
  EXPECT_EQ(vec(e2.sizes()), (Shape{3, 5}));
  try {
    tl::arange(3).expand({2, 4});
    FAIL() << "expand to an incompatible size must throw";
  } catch (const tl::Error& err) {
    EXPECT_NE(std::string(err.what()).find("must match the existing size (3)"), std::string::npos)
        << err.what();
  }
}

TEST(Views, PermuteSqueezeUnsqueezeFlattenUnflatten) {
  Tensor a = tl::zeros({2, 3, 4});
  Tensor p = a.permute({2, 0, 1});
  EXPECT_EQ(vec(p.sizes()), (Shape{4, 2, 3}));
  EXPECT_EQ(vec(p.strides()), (Shape{1, 12, 4}));
  EXPECT_THROW(a.permute({0, 0, 1}), tl::Error);
  Tensor u = a.unsqueeze(1);
  EXPECT_EQ(vec(u.sizes()), (Shape{2, 1, 3, 4}));
  EXPECT_EQ(vec(u.strides()), (Shape{12, 12, 4, 1}));
  EXPECT_EQ(vec(a.unsqueeze(-1).sizes()), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(vec(u.squeeze().sizes()), (Shape{2, 3, 4}));
  EXPECT_EQ(vec(u.squeeze(0).sizes()), (Shape{2, 1, 3, 4}));  // not size 1: unchanged
  Tensor f = a.flatten(1);
  EXPECT_EQ(vec(f.sizes()), (Shape{2, 12}));
  EXPECT_EQ(f.storage(), a.storage());
  Tensor uf = f.unflatten(1, {3, -1});
  EXPECT_EQ(vec(uf.sizes()), (Shape{2, 3, 4}));
  EXPECT_EQ(uf.storage(), a.storage());
  EXPECT_EQ(vec(tl::ones({}).flatten().sizes()), (Shape{1}));
}

TEST(Views, ReshapeIsAViewWhenStridesAllowAndACopyOtherwise) {
  Tensor a = tl::arange(24, tl::kFloat32).view({2, 3, 4});
  Tensor r = a.reshape({6, -1});
  EXPECT_EQ(r.storage(), a.storage());
  EXPECT_TRUE(r.is_view());
  // A transposed tensor cannot be flattened without a copy.
  Tensor t = a.transpose(1, 2);
  Tensor rc = t.reshape({-1});
  EXPECT_NE(rc.storage(), a.storage());
  EXPECT_FALSE(rc.is_view());
  // Element order is the transposed one: t[0][1][0] == a[0][0][1] == 1.
  EXPECT_EQ(rc.select(0, 3).item<double>(), 1.0);
  // But merging dims that stay contiguous is still a view: (2, 4, 3) -> (2, 12) is not,
  // while narrowing the last dim keeps the first two mergeable.
  Tensor n = a.narrow(2, 0, 2);  // sizes (2,3,2), strides (12,4,1)
  EXPECT_THROW(n.view({12}), tl::Error);
  Tensor nv = a.narrow(0, 1, 1).view({3, 4});
  EXPECT_EQ(nv.storage(), a.storage());
  EXPECT_EQ(nv.storage_offset(), 12);
}

TEST(Views, ViewRefusesIncompatibleStridesWithPyTorchsMessage) {
  Tensor t = tl::zeros({3, 4}).t();
  try {
    t.view({12});
    FAIL();
  } catch (const tl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Use .reshape(...) instead"), std::string::npos);
  }
  try {
    tl::zeros({2, 3}).view({4, 2});
    FAIL();
  } catch (const tl::Error& e) {
    EXPECT_STREQ(e.what(), "shape '[4, 2]' is invalid for input of size 6");
  }
}

TEST(Views, ContiguousCopiesOnlyWhenNeeded) {
  Tensor a = tl::rand({3, 5});
  EXPECT_TRUE(a.contiguous().is_same(a));
  Tensor t = a.t();
  Tensor c = t.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_NE(c.storage(), a.storage());
  EXPECT_TRUE(tl::equal(c, t));
  Tensor cl = a.clone();
  EXPECT_NE(cl.storage(), a.storage());
  EXPECT_TRUE(tl::equal(cl, a));
  // A size-1 dim's stride does not matter for contiguity.
  EXPECT_TRUE(tl::zeros({3, 1}).as_strided({3, 1}, {1, 99}).is_contiguous());
}

TEST(Views, SplitChunkUnbindMatchPyTorchSizes) {
  Tensor a = tl::arange(10);
  auto sizes_of = [](const std::vector<Tensor>& ts) {
    Shape s;
    for (auto& t : ts) s.push_back(t.size(0));
    return s;
  };
  EXPECT_EQ(sizes_of(a.split(4)), (Shape{4, 4, 2}));
  EXPECT_EQ(sizes_of(a.chunk(3)), (Shape{4, 4, 2}));
  EXPECT_EQ(sizes_of(tl::arange(5).chunk(4)), (Shape{2, 2, 1}));  // PyTorch returns 3 chunks
  EXPECT_EQ(sizes_of(a.split_with_sizes({1, 2, 7})), (Shape{1, 2, 7}));
  EXPECT_THROW(a.split_with_sizes({1, 2}), tl::Error);
  auto rows = tl::arange(6).view({2, 3}).unbind(1);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].select(0, 1).item<int64_t>(), 5);
  for (auto& r : a.split(3)) EXPECT_EQ(r.storage(), a.storage());
}

TEST(Views, AsStridedChecksTheStorageBounds) {
  Tensor a = tl::zeros({6});
  Tensor w = a.as_strided({2, 2}, {1, 2}, 1);  // overlapping windows are allowed
  EXPECT_EQ(w.storage_offset(), 1);
  EXPECT_THROW(a.as_strided({2, 3}, {3, 1}, 1), tl::Error);
}

TEST(Views, DimErrorsNameTheRange) {
  Tensor a = tl::zeros({2, 3});
  try {
    a.transpose(0, 2);
    FAIL();
  } catch (const tl::IndexError& e) {
    EXPECT_STREQ(e.what(),
                 "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
  }
  try {
    a.select(1, 3);
    FAIL();
  } catch (const tl::IndexError& e) {
    EXPECT_STREQ(e.what(), "index 3 is out of bounds for dimension 1 with size 3");
  }
}

TEST(Views, DetachSharesStorageAndVersion) {
  Tensor a = tl::ones({3});
  Tensor d = a.detach();
  EXPECT_EQ(d.storage(), a.storage());
  d.add_(1);
  EXPECT_EQ(a._version(), d._version());
  EXPECT_EQ(a.sum().item<double>(), 6.0);
}

}  // namespace
