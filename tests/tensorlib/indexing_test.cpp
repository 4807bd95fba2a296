// Indexing and joining (tensorlib/ops/indexing.cpp, the CPU loops in tensorlib/cpu/indexing.cpp)
// on small hand-computed examples, most of them from PyTorch's documentation.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "tensorlib/core/tensor.h"
#include "tensorlib/expect_error.h"

namespace {

using tl::Tensor;
using Sizes = std::vector<int64_t>;
using Values = std::vector<double>;

// Every element of t (any strides, any dtype) in row-major order, as double.
Values values_of(const Tensor& t) {
  Values out;
  const int64_t nd = t.dim(), n = t.numel();
  if (n == 0) return out;
  TL_DISPATCH_ALL(t.dtype(), "values_of", [&]<typename T>() {
    const T* base = static_cast<const T*>(t.data_ptr());
    Sizes idx(nd, 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t off = 0;
      for (int64_t d = 0; d < nd; ++d) off += idx[d] * t.stride(d);
      out.push_back(static_cast<double>(base[off]));
      for (int64_t d = nd - 1; d >= 0 && ++idx[d] == t.size(d); --d) idx[d] = 0;
    }
  });
  return out;
}

using tl_test::error_of;

bool is_index_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const tl::IndexError&) {
    return true;
  } catch (...) {
  }
  return false;
}

Tensor index(std::vector<int64_t> v) {
  return tl::tensor(v);
}

// [[1, 2, 3], [4, 5, 6], [7, 8, 9]] as float32.
Tensor three_by_three() {
  return tl::tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}, {7.0, 8.0, 9.0}});
}

TEST(IndexSelectTest, RowsAndColumns) {
  const Tensor x = three_by_three();
  const Tensor rows = x.index_select(0, index({2, 0}));
  EXPECT_EQ(rows.sizes().vec(), (Sizes{2, 3}));
  EXPECT_EQ(rows.dtype(), x.dtype());
  EXPECT_EQ(values_of(rows), (Values{7, 8, 9, 1, 2, 3}));
  EXPECT_EQ(values_of(tl::index_select(x, -1, index({2, 0}))), (Values{3, 1, 6, 4, 9, 7}));
  // Repeated indices, a transposed input, an empty index, a 0-dim index.
  EXPECT_EQ(values_of(x.t().index_select(0, index({1, 1}))), (Values{2, 5, 8, 2, 5, 8}));
  EXPECT_EQ(x.index_select(1, index({})).sizes().vec(), (Sizes{3, 0}));
  EXPECT_EQ(values_of(x.index_select(0, tl::full({}, 1, tl::kInt64))), (Values{4, 5, 6}));
  // Integer data and a strided index.
  const Tensor ints = tl::tensor({10, 20, 30, 40});
  EXPECT_EQ(values_of(ints.index_select(0, index({3, 9, 0, 9}).slice(0, 0, 4, 2))),
            (Values{40, 10}));
}

TEST(IndexSelectTest, Errors) {
  const Tensor x = three_by_three();
  EXPECT_TRUE(is_index_error([&] { x.index_select(0, index({0, 3})); }));
  const std::string msg = error_of([&] { x.index_select(1, index({-1})); });
  EXPECT_NE(msg.find("index -1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 3"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { x.index_select(0, index({0}).to(tl::kInt32)); }).find("int64"),
            std::string::npos);
  EXPECT_THROW(x.index_select(0, tl::zeros({2, 2}, tl::kInt64)), tl::Error);
  EXPECT_TRUE(is_index_error([&] { x.index_select(2, index({0})); }));
}

TEST(GatherTest, DocumentationExample) {
  // torch.gather(torch.tensor([[1, 2], [3, 4]]), 1, torch.tensor([[0, 0], [1, 0]]))
  const Tensor t = tl::tensor({{1, 2}, {3, 4}});
  const Tensor idx = tl::tensor({{0, 0}, {1, 0}});
  const Tensor g = tl::gather(t, 1, idx);
  EXPECT_EQ(g.dtype(), tl::kInt64);
  EXPECT_EQ(values_of(g), (Values{1, 1, 4, 3}));
  // Along dim 0: out[i][j] = t[idx[i][j]][j].
  EXPECT_EQ(values_of(t.gather(0, idx)), (Values{1, 2, 3, 2}));
  // The index may be smaller than the input outside `dim`, and larger along it.
  const Tensor x = three_by_three();
  const Tensor g2 = x.gather(1, tl::tensor({{2, 2, 0, 1}}));
  EXPECT_EQ(g2.sizes().vec(), (Sizes{1, 4}));
  EXPECT_EQ(values_of(g2), (Values{3, 3, 1, 2}));
  // A transposed input and a negative dim.
  EXPECT_EQ(values_of(x.t().gather(-1, tl::tensor({{1}, {2}, {0}}))), (Values{4, 8, 3}));
}

TEST(GatherTest, Errors) {
  const Tensor x = three_by_three();
  const std::string msg = error_of([&] { x.gather(0, tl::tensor({{0, 5}})); });
  EXPECT_NE(msg.find("index 5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 3"), std::string::npos) << msg;
  EXPECT_TRUE(is_index_error([&] { x.gather(0, tl::tensor({{0, 5}})); }));
  EXPECT_THROW(x.gather(0, tl::tensor({0, 1})), tl::Error);             // rank mismatch
  EXPECT_THROW(x.gather(0, tl::zeros({1, 4}, tl::kInt64)), tl::Error);  // too big outside dim
  EXPECT_THROW(x.gather(0, tl::zeros({1, 1}, tl::kInt32)), tl::Error);
}

TEST(ScatterAddTest, DocumentationExample) {
  // src = ones(2, 5); index = [[0, 1, 2, 0, 0]]; zeros(3, 5).scatter_add_(0, index, src)
  Tensor target = tl::zeros({3, 5});
  const uint32_t before = target._version();
  Tensor& ret = target.scatter_add_(0, tl::tensor({{0, 1, 2, 0, 0}}), tl::ones({2, 5}));
  EXPECT_TRUE(ret.is_same(target));
  EXPECT_GT(target._version(), before);
  EXPECT_EQ(values_of(target), (Values{1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0}));

  // Repeated indices accumulate; the out-of-place form leaves its input alone.
  const Tensor base = tl::tensor({10, 20, 30});
  const Tensor out = tl::scatter_add(base, 0, tl::tensor({2, 2, 0}), tl::tensor({1, 2, 4}));
  EXPECT_EQ(values_of(out), (Values{14, 20, 33}));
  EXPECT_EQ(values_of(base), (Values{10, 20, 30}));
  EXPECT_EQ(values_of(base.scatter_add(0, tl::tensor({1}), tl::tensor({5, 6}))),
            (Values{10, 25, 30}));
}

TEST(ScatterAddTest, WritesThroughAViewAndBumpsTheSharedVersion) {
  Tensor base = tl::zeros({2, 3});
  Tensor col = base.t();  // [3, 2] view
  col.scatter_add_(1, tl::tensor({{1}, {0}, {1}}), tl::tensor({{1.0}, {2.0}, {3.0}}));
  EXPECT_EQ(values_of(base), (Values{0, 2, 0, 1, 0, 3}));
  EXPECT_EQ(base._version(), col._version());
  EXPECT_GT(base._version(), 0u);
}

TEST(ScatterAddTest, Errors) {
  Tensor target = tl::zeros({2, 2});
  const std::string msg = error_of([&] {
    target.scatter_add_(0, tl::tensor({{0, 2}}), tl::ones({1, 2}));
  });
  EXPECT_NE(msg.find("index 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 2"), std::string::npos) << msg;
  // Indices are checked before anything is written.
  EXPECT_EQ(values_of(target), (Values{0, 0, 0, 0}));
  EXPECT_THROW(target.scatter_add_(0, tl::tensor({{0}}), tl::ones({1, 1}, tl::kFloat64)),
               tl::Error);  // dtype mismatch
  EXPECT_THROW(target.scatter_add_(0, tl::tensor({{0, 0, 0}}), tl::ones({1, 3})),
               tl::Error);  // index wider than self outside dim
  EXPECT_THROW(target.scatter_add_(0, tl::zeros({1, 1}, tl::kInt32), tl::ones({1, 1})), tl::Error);
}

TEST(CatTest, AlongEachDim) {
  const Tensor a = tl::tensor({{1, 2}, {3, 4}});
  const Tensor b = tl::tensor({{5, 6}});
  const Tensor c0 = tl::cat({a, b});
  EXPECT_EQ(c0.sizes().vec(), (Sizes{3, 2}));
  EXPECT_EQ(values_of(c0), (Values{1, 2, 3, 4, 5, 6}));
  const Tensor c1 = tl::cat({a, b.t().expand({2, 2}), a.t()}, -1);
  EXPECT_EQ(c1.sizes().vec(), (Sizes{2, 6}));
  EXPECT_EQ(values_of(c1), (Values{1, 2, 5, 5, 1, 3, 3, 4, 6, 6, 2, 4}));
  EXPECT_EQ(values_of(tl::cat({a})), values_of(a));
  // Inputs with zero size along dim contribute nothing.
  EXPECT_EQ(values_of(tl::cat({tl::empty({0, 2}, tl::kInt64), b})), (Values{5, 6}));
}

TEST(CatTest, PromotesTypes) {
  const Tensor i = tl::tensor({1, 2}).to(tl::kInt32);
  const Tensor f = tl::tensor({0.5}, tl::kFloat32);
  const Tensor c = tl::cat({i, f});
  EXPECT_EQ(c.dtype(), tl::kFloat32);
  EXPECT_EQ(values_of(c), (Values{1, 2, 0.5}));
  EXPECT_EQ(tl::cat({i, tl::tensor({7})}).dtype(), tl::kInt64);
  EXPECT_EQ(tl::cat({tl::tensor({true}), i}).dtype(), tl::kInt32);
  EXPECT_EQ(tl::cat({f, tl::tensor({1.0}, tl::kFloat64)}).dtype(), tl::kFloat64);
}

TEST(CatTest, LegacyEmptyTensorsAreSkipped) {
  // PyTorch accepts 1-D tensors of shape [0] next to anything.
  const Tensor a = tl::ones({2, 3});
  const Tensor c = tl::cat({tl::empty({0}), a, tl::empty({0})}, 1);
  EXPECT_EQ(c.sizes().vec(), (Sizes{2, 3}));
  EXPECT_EQ(tl::cat({tl::empty({0}), tl::empty({0})}).sizes().vec(), (Sizes{0}));
}

TEST(CatTest, Errors) {
  const Tensor a = tl::zeros({2, 2});
  std::string msg = error_of([&] { tl::cat({a, tl::zeros({3, 3})}, 0); });
  EXPECT_NE(msg.find("Expected size 2 but got size 3 for tensor number 1"), std::string::npos)
      << msg;
  msg = error_of([&] { tl::cat({a, a, tl::zeros({2, 2, 2})}); });
  EXPECT_NE(msg.find("got 2 and 3"), std::string::npos) << msg;
  msg = error_of([&] { tl::cat({a, tl::zeros({})}); });
  EXPECT_NE(msg.find("zero-dimensional tensor (at position 1)"), std::string::npos) << msg;
  EXPECT_THROW(tl::cat({}), tl::Error);
  EXPECT_TRUE(is_index_error([&] { tl::cat({a, a}, 2); }));
}

TEST(StackTest, NewDimAtEachPosition) {
  const Tensor a = tl::tensor({{1, 2, 3}, {4, 5, 6}});
  const Tensor b = tl::tensor({{7, 8, 9}, {10, 11, 12}});
  const Tensor s0 = tl::stack({a, b});
  EXPECT_EQ(s0.sizes().vec(), (Sizes{2, 2, 3}));
  EXPECT_EQ(values_of(s0), (Values{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  const Tensor s1 = tl::stack({a, b}, 1);
  EXPECT_EQ(s1.sizes().vec(), (Sizes{2, 2, 3}));
  EXPECT_EQ(values_of(s1), (Values{1, 2, 3, 7, 8, 9, 4, 5, 6, 10, 11, 12}));
  const Tensor s2 = tl::stack({a, b}, -1);
  EXPECT_EQ(s2.sizes().vec(), (Sizes{2, 3, 2}));
  EXPECT_EQ(values_of(s2), (Values{1, 7, 2, 8, 3, 9, 4, 10, 5, 11, 6, 12}));
  // 0-dim inputs stack into a vector; mixed dtypes promote.
  const Tensor v = tl::stack({tl::full({}, 1, tl::kInt64), tl::full({}, 2.5, tl::kFloat32)});
  EXPECT_EQ(v.sizes().vec(), (Sizes{2}));
  EXPECT_EQ(v.dtype(), tl::kFloat32);
  EXPECT_EQ(values_of(v), (Values{1, 2.5}));
}

TEST(StackTest, Errors) {
  const std::string msg = error_of([&] { tl::stack({tl::zeros({2, 3}), tl::zeros({2, 4})}); });
  EXPECT_NE(msg.find("[2, 3] at entry 0 and [2, 4] at entry 1"), std::string::npos) << msg;
  EXPECT_THROW(tl::stack({}), tl::Error);
  EXPECT_TRUE(is_index_error([&] { tl::stack({tl::zeros({2})}, 3); }));
}

// nonzero: row-major indices of the non-zero elements, [n, dim], int64 (PyTorch's example).
TEST(NonzeroTest, IndicesInRowMajorOrder) {
  Tensor t =
      tl::tensor({0.6, 0.0, 0.0, 0.0, 0.0, 0.4, 0.0, 0.0, 0.0, 0.0, 1.2, 0.0, 0.0, 0.0, 0.0, -0.4})
          .view({4, 4});
  Tensor nz = t.nonzero();
  EXPECT_EQ(nz.sizes(), tl::IntArrayRef(Sizes{4, 2}));
  EXPECT_EQ(nz.dtype(), tl::kInt64);
  EXPECT_EQ(values_of(nz), (Values{0, 0, 1, 1, 2, 2, 3, 3}));
  // Strided input, bool and integer dtypes, nothing found, 0-dim.
  EXPECT_EQ(values_of(t.t().slice(0, 1, 4).nonzero()), (Values{0, 1, 1, 2, 2, 3}));
  EXPECT_EQ(values_of(tl::tensor({1, 0, 3}).to(tl::kInt32).nonzero()), (Values{0, 2}));
  EXPECT_EQ(values_of((tl::tensor({1, 0, 3}) > 2).nonzero()), (Values{2}));
  EXPECT_EQ(tl::zeros({2, 3}).nonzero().sizes(), tl::IntArrayRef(Sizes{0, 2}));
  EXPECT_EQ(tl::full({}, 5.0).nonzero().sizes(), tl::IntArrayRef(Sizes{1, 0}));
}

TEST(MaskedSelectTest, SelectsBroadcastsAndScattersTheGradient) {
  Tensor x = tl::tensor({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}).view({2, 3});
  Tensor mask = tl::tensor({1, 0, 1}) > 0;  // broadcast over rows
  EXPECT_EQ(values_of(x.masked_select(mask)), (Values{1, 3, 4, 6}));
  EXPECT_EQ(values_of(x.masked_select(x > 3.5)), (Values{4, 5, 6}));
  EXPECT_EQ(x.masked_select(x > 10).sizes(), tl::IntArrayRef(Sizes{0}));
  Tensor w = x.clone().requires_grad_(true);
  (w.masked_select(mask) * tl::tensor({1.0, 2.0, 3.0, 4.0})).sum().backward();
  EXPECT_EQ(values_of(w.grad()), (Values{1, 0, 2, 3, 0, 4}));
  EXPECT_THROW(x.masked_select(tl::ones({3})), tl::Error);  // not a bool mask
}

}  // namespace
