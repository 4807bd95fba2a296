// The CPU backend's copy and fill (their front-ends: ops/copy.cpp).
#include <cstring>

#include "tensorlib/core/tensor.h"
#include "tensorlib/cpu/kernels.h"
#include "tensorlib/cpu/loops.h"

namespace tl::cpu {

void Kernels::copy(const Tensor& dst, const Tensor& src) const {
  TL_DISPATCH_ALL(dst.dtype(), "copy_", [&]<typename D>() {
    TL_DISPATCH_ALL(src.dtype(), "copy_", [&]<typename S>() {
      if constexpr (std::is_same_v<D, S>) {
        if (dst.is_contiguous() && src.is_contiguous()) {
          if (dst.numel() > 0 && dst.data_ptr() != src.data_ptr())
            std::memmove(dst.data_ptr(), src.data_ptr(), dst.nbytes());
          return;
        }
      }
      unary_kernel<D, S>(dst, src, [](S v) { return convert<D>(v); });
    });
  });
}

void Kernels::fill(const Tensor& t, const Scalar& value) const {
  TL_DISPATCH_ALL(t.dtype(), "fill_", [&]<typename T>() {
    const T v = value.to<T>();
    StridedIter<1> it(t.sizes(), {&t});
    it.parallel_for_each_row([&](char** p, const int64_t* s, int64_t n) {
      if (s[0] == sizeof(T)) {
        T* o = reinterpret_cast<T*>(p[0]);
        for (int64_t i = 0; i < n; ++i) o[i] = v;
      } else {
        for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * s[0]) = v;
      }
    });
  });
}

}  // namespace tl::cpu
