// Builds the kernels' Strided<N> from tensors, and the stream and error plumbing every launch
// shares (Note [CUDA kernel design] in elementwise.cu). Internal to tensorlib/cuda/.
#pragma once

#include <array>
#include <cmath>
#include <cstring>
#include <string>

#include "tensorlib/core/tensor.h"
#include "tensorlib/cuda/cuda_internal.h"
#include "tensorlib/cuda/kernel_args.h"

namespace tl::cuda::detail {

/// The operands of one kernel on one CUDA device: sets that device for the scope and gives its
/// current stream (the allocator's stream semantics rely on every kernel running there).
class Launch {
 public:
  Launch(const char* op, Device device)
      : op_(op), index_(device.resolved().index()), guard_(index_) {}
  cudaStream_t stream() const { return reinterpret_cast<cudaStream_t>(current_stream_id(index_)); }
  /// Turns a launch's cudaGetLastError() into a tl::Error naming the op.
  void check(cudaError_t err) const {
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      TL_CHECK(false, op_, ": CUDA kernel launch failed on cuda:", index_, ": ",
               cudaGetErrorString(err));
    }
  }

 private:
  const char* op_;
  int index_;
  DeviceGuard guard_;
};

/// Operand k: a CUDA tensor of `shape` (possibly expanded), or a 0-dim CPU tensor passed by
/// value. Dims are coalesced where every operand allows (as cpu::StridedIter does). With
/// `strides[k]` given, operand k is addressed with those strides (over `shape`) instead.
template <int N>
kernels::Strided<N> make_strided(IntArrayRef shape, const std::array<const Tensor*, N>& ops,
                                 const std::array<const int64_t*, N>& strides = {}) {
  kernels::Strided<N> s{};
  s.numel = 1;
  for (int64_t d : shape) s.numel *= d;
  for (int k = 0; k < N; ++k) {
    const Tensor& t = *ops[k];
    s.by_value[k] = t.is_cpu();
    if (s.by_value[k]) {
      TL_INTERNAL_ASSERT(t.dim() == 0 && t.element_size() <= 8);
      std::memcpy(s.value[k], t.data_ptr(), t.element_size());
      s.data[k] = nullptr;
    } else {
      TL_INTERNAL_ASSERT(strides[k] != nullptr || t.sizes() == shape);
      s.data[k] = static_cast<char*>(t.data_ptr());
    }
  }
  int nd = 0;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    std::array<int64_t, N> st{};
    for (int k = 0; k < N; ++k)
      st[k] = s.by_value[k] ? 0 : strides[k] != nullptr ? strides[k][i] : ops[k]->strides()[i];
    if (nd > 0) {
      bool merge = true;
      for (int k = 0; k < N; ++k)
        if (st[k] != s.strides[k][nd - 1] * s.sizes[nd - 1]) merge = false;
      if (merge) {
        s.sizes[nd - 1] *= shape[i];
        continue;
      }
    }
    TL_CHECK(nd < kernels::kMaxDims, "CUDA kernels support at most ", kernels::kMaxDims,
             " non-mergeable dimensions, got a tensor of shape ", shape);
    s.sizes[nd] = shape[i];
    for (int k = 0; k < N; ++k) s.strides[k][nd] = st[k];
    ++nd;
  }
  if (nd == 0) {  // one element
    s.sizes[0] = 1;
    for (int k = 0; k < N; ++k) s.strides[k][0] = 0;
    nd = 1;
  }
  s.ndim = nd;
  // 32-bit indexing when the linear index (plus one grid stride) and every offset fit.
  constexpr int64_t kMax32 = int64_t{1} << 30;
  s.use32 = s.numel < kMax32;
  for (int k = 0; k < N && s.use32; ++k) {
    int64_t reach = 0;
    for (int d = 0; d < nd; ++d) reach += (s.sizes[d] - 1) * s.strides[k][d];
    s.use32 = reach < kMax32 && reach >= 0;
  }
  return s;
}

inline kernels::Number number_of(const Scalar& v) {
  kernels::Number n;
  n.f = v.to<double>();
  if (!v.is_floating_point()) {
    n.i = v.to<int64_t>();
  } else if (std::isfinite(n.f) && std::fabs(n.f) < 9.2e18) {
    n.i = static_cast<int64_t>(n.f);  // as the CPU's value.to<T>() truncates
  }
  return n;
}

}  // namespace tl::cuda::detail
