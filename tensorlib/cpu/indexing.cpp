// The CPU backend's indexing kernels (their front-ends: ops/indexing.cpp).
//
// Note [Index checks]
// On the CPU every index is checked before anything is written, so a bad index raises
// tl::IndexError (naming the index, the dim and its size) and leaves an in-place target
// untouched. On CUDA tensors the kernels check indices on the device instead (a bad one stops
// the kernel, as PyTorch's device-side assert; cuda/indexing.cu). Negative indices are out of
// range, as in PyTorch's index_select, gather and scatter.
#include <cstring>
#include <vector>

#include "tensorlib/core/shape_util.h"
#include "tensorlib/core/tensor.h"
#include "tensorlib/cpu/kernels.h"
#include "tensorlib/cpu/loops.h"

namespace tl::cpu {
namespace {

void check_in_range(const char* op, int64_t index, int64_t dim, int64_t size) {
  TL_CHECK_INDEX(index >= 0 && index < size, op, "(): index ", index,
                 " is out of bounds for dimension ", dim, " with size ", size);
}

// Walks every position of `shape` in row-major order, calling f(index_off, self_off, other_off)
// with element offsets computed from the three stride lists; self's stride along `dim` is left
// out (the caller adds index * stride).
template <typename F>
void for_each_position(IntArrayRef shape, int64_t dim, IntArrayRef index_strides,
                       IntArrayRef self_strides, IntArrayRef other_strides, F f) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  const int64_t n = detail::numel_of(shape);
  std::vector<int64_t> self_step(self_strides.begin(), self_strides.end());
  self_step[dim] = 0;
  std::vector<int64_t> pos(nd, 0);
  int64_t oi = 0, os = 0, oo = 0;
  for (int64_t it = 0; it < n; ++it) {
    f(oi, os, oo);
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++pos[d] < shape[d]) {
        oi += index_strides[d];
        os += self_step[d];
        oo += other_strides[d];
        break;
      }
      oi -= index_strides[d] * (shape[d] - 1);
      os -= self_step[d] * (shape[d] - 1);
      oo -= other_strides[d] * (shape[d] - 1);
      pos[d] = 0;
    }
  }
}

// Checks every index of `index` against `size` before any element is touched.
void check_all_in_range(const char* op, const Tensor& index, int64_t dim, int64_t size) {
  const Tensor idx = index.contiguous();
  const int64_t* p = idx.data_ptr<int64_t>();
  for (int64_t i = 0; i < idx.numel(); ++i) check_in_range(op, p[i], dim, size);
}

}  // namespace

void Kernels::index_select(const Tensor& out, const Tensor& self, int64_t d,
                           const Tensor& index) const {
  const Tensor src = self.contiguous();
  const Tensor idx = index.contiguous();
  const int64_t n_idx = idx.numel();
  const int64_t dim_size = self.dim() == 0 ? 1 : self.size(d);
  check_all_in_range("index_select", idx, d, dim_size);
  if (out.numel() == 0) return;

  // Copy whole inner blocks: out[o, j, :] = src[o, index[j], :].
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < self.dim(); ++i) {
    if (i < d) outer *= self.size(i);
    if (i > d) inner *= self.size(i);
  }
  const size_t block = static_cast<size_t>(inner) * self.element_size();
  const int64_t* ip = idx.data_ptr<int64_t>();
  const char* s = static_cast<const char*>(src.data_ptr());
  char* o = static_cast<char*>(out.data_ptr());
  for (int64_t b = 0; b < outer; ++b) {
    for (int64_t j = 0; j < n_idx; ++j) {
      std::memcpy(o + (b * n_idx + j) * block, s + (b * dim_size + ip[j]) * block, block);
    }
  }
}

void Kernels::gather(const Tensor& out, const Tensor& self, int64_t d, const Tensor& idx) const {
  check_all_in_range("gather", idx, d, self.size(d));
  if (out.numel() == 0) return;
  const std::vector<int64_t> out_strides = detail::contiguous_strides(idx.sizes());
  TL_DISPATCH_ALL(self.dtype(), "gather", [&]<typename T>() {
    const int64_t* ip = idx.data_ptr<int64_t>();
    const T* sp = self.data_ptr<T>();
    T* op = out.data_ptr<T>();
    const int64_t dim_stride = self.stride(d);
    for_each_position(
        idx.sizes(), d, idx.strides(), self.strides(), out_strides,
        [&](int64_t oi, int64_t os, int64_t oo) { op[oo] = sp[os + ip[oi] * dim_stride]; });
  });
}

void Kernels::scatter_add(const Tensor& self, int64_t d, const Tensor& idx,
                          const Tensor& source) const {
  check_all_in_range("scatter_add_", idx, d, self.size(d));
  if (idx.numel() == 0) return;
  TL_DISPATCH_ALL(self.dtype(), "scatter_add_", [&]<typename T>() {
    using M = opmath_t<T>;
    const int64_t* ip = idx.data_ptr<int64_t>();
    T* dp = self.data_ptr<T>();
    const T* sp = source.data_ptr<T>();
    const int64_t dim_stride = self.stride(d);
    for_each_position(idx.sizes(), d, idx.strides(), self.strides(), source.strides(),
                      [&](int64_t oi, int64_t os, int64_t oo) {
                        T& dst = dp[os + ip[oi] * dim_stride];
                        dst = static_cast<T>(static_cast<M>(dst) + static_cast<M>(sp[oo]));
                      });
  });
}

Tensor Kernels::flat_nonzero(const Tensor& flags) const {
  const bool* p = flags.data_ptr<bool>();
  std::vector<int64_t> at;
  for (int64_t i = 0; i < flags.numel(); ++i)
    if (p[i]) at.push_back(i);
  Tensor out = empty({static_cast<int64_t>(at.size())}, kInt64);
  if (!at.empty()) std::memcpy(out.data_ptr(), at.data(), at.size() * sizeof(int64_t));
  return out;
}

void Kernels::unravel(const Tensor& out, const Tensor& flat, IntArrayRef sizes) const {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  const int64_t* f = flat.data_ptr<int64_t>();
  int64_t* o = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < flat.numel(); ++i) {
    int64_t rest = f[i];
    for (int64_t d = nd - 1; d >= 0; --d) {
      o[i * nd + d] = rest % sizes[d];
      rest /= sizes[d];
    }
  }
}

}  // namespace tl::cpu
