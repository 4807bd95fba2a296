// The CUDA backend's kernel table (core/kernels.h, Note [Device dispatch]): operands turned
// into the kernels' plain arguments, launched on the device's current stream, launch errors
// turned into tl::Error naming the op. matmul lives in blas.cpp.
#include "tensorlib/core/kernels.h"

#include <algorithm>
#include <vector>

#include "tensorlib/core/philox.h"
#include "tensorlib/cuda/strided.h"

namespace tl::cuda::detail {

// copy.cpp
void copy_tensors(const Tensor& dst, const Tensor& src);
void fill_tensor(const Tensor& t, const Scalar& value);
void read_data_dependent(void* host, const void* dev, size_t bytes, int index);

// blas.cpp
void matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha,
            const Scalar& beta, bool use_beta);

namespace {

using kernels::RowOp;

RowOp row_op(tl::detail::ReduceOp op) {
  return static_cast<RowOp>(static_cast<uint8_t>(op));  // same order (static_asserts below)
}
static_assert(static_cast<int>(RowOp::logsumexp) ==
              static_cast<int>(tl::detail::ReduceOp::logsumexp));
static_assert(static_cast<int>(RowOp::argmin) == static_cast<int>(tl::detail::ReduceOp::argmin));
static_assert(static_cast<int>(kernels::RandomKind::integer) ==
              static_cast<int>(tl::detail::RandomDist::integer));
static_assert(static_cast<int>(kernels::RandomKind::normal) ==
              static_cast<int>(tl::detail::RandomDist::normal));

kernels::Window window_of(const tl::detail::Window2d& w) {
  return {w.batch, w.channels, w.height, w.width, w.kh, w.kw,    w.sh,
          w.sw,    w.ph,       w.pw,     w.dh,    w.dw, w.out_h, w.out_w};
}

class Kernels final : public tl::detail::Kernels {
 public:
  DeviceType device_type() const override { return kCUDA; }

  void copy(const Tensor& dst, const Tensor& src) const override { copy_tensors(dst, src); }

  void fill(const Tensor& t, const Scalar& value) const override { fill_tensor(t, value); }

  void unary(math::UnaryOp op, const Tensor& out, const Tensor& in) const override {
    Launch l(math::name(op), out.device());
    l.check(kernels::launch_unary(op, make_strided<2>(out.sizes(), {&out, &in}), out.dtype(),
                                  l.stream()));
  }

  void binary(math::BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
              const Scalar& alpha) const override {
    Launch l("binary op", out.device());
    const ScalarType dtype = a.dtype();
    l.check(kernels::launch_binary(op, make_strided<3>(out.sizes(), {&out, &a, &b}), dtype,
                                   number_of(alpha), l.stream()));
  }

  void where(const Tensor& out, const Tensor& cond, const Tensor& a,
             const Tensor& b) const override {
    Launch l("where", out.device());
    l.check(kernels::launch_where(make_strided<4>(out.sizes(), {&out, &cond, &a, &b}), out.dtype(),
                                  l.stream()));
  }

  void clamp(const Tensor& out, const Tensor& in, const std::optional<Scalar>& lo,
             const std::optional<Scalar>& hi) const override {
    Launch l("clamp", out.device());
    l.check(kernels::launch_clamp(make_strided<2>(out.sizes(), {&out, &in}), out.dtype(),
                                  lo.has_value(), lo ? number_of(*lo) : kernels::Number{},
                                  hi.has_value(), hi ? number_of(*hi) : kernels::Number{},
                                  l.stream()));
  }

  void masked_fill(const Tensor& self, const Tensor& mask, const Scalar& value) const override {
    Launch l("masked_fill_", self.device());
    l.check(kernels::launch_masked_fill(make_strided<2>(self.sizes(), {&self, &mask}), self.dtype(),
                                        number_of(value), l.stream()));
  }

  // A gather with the index expanded along the other dims.
  void index_select(const Tensor& out, const Tensor& self, int64_t dim,
                    const Tensor& index) const override {
    const Tensor src = self.dim() == 0 ? self.view({1}) : self;
    const Tensor dst = out.dim() == 0 ? out.view({1}) : out;
    std::vector<int64_t> shape(src.dim(), 1);
    shape[dim] = index.numel();
    gather(dst, src, dim, index.reshape(shape).expand(dst.sizes()));
  }

  void gather(const Tensor& out, const Tensor& self, int64_t dim,
              const Tensor& index) const override {
    if (out.numel() == 0) return;
    Launch l("gather", out.device());
    std::vector<int64_t> self_strides = self.strides().vec();
    self_strides[dim] = 0;
    const auto s = make_strided<3>(index.sizes(), {&index, &self, &out},
                                   {nullptr, self_strides.data(), nullptr});
    l.check(kernels::launch_gather(s, self.dtype(), self.stride(dim), self.size(dim), l.stream()));
  }

  void scatter_add(const Tensor& self, int64_t dim, const Tensor& index,
                   const Tensor& src) const override {
    if (index.numel() == 0) return;
    Launch l("scatter_add_", self.device());
    std::vector<int64_t> self_strides = self.strides().vec();
    self_strides[dim] = 0;
    const auto s = make_strided<3>(index.sizes(), {&index, &self, &src},
                                   {nullptr, self_strides.data(), src.strides().data()});
    l.check(
        kernels::launch_scatter_add(s, self.dtype(), self.stride(dim), self.size(dim), l.stream()));
  }

  Tensor flat_nonzero(const Tensor& flags) const override {
    TL_INTERNAL_ASSERT(flags.is_contiguous() && flags.dtype() == kBool);
    const TensorOptions i64 = TensorOptions(kInt64).device(flags.device());
    const int64_t n = flags.numel();
    if (n == 0) return empty({0}, i64);
    Launch l("nonzero", flags.device());
    Tensor positions = empty({n}, i64), count = empty({}, i64);
    size_t temp_bytes = 0;
    l.check(kernels::launch_select_flagged(nullptr, &temp_bytes, flags.data_ptr<bool>(), n, nullptr,
                                           nullptr, l.stream()));
    Tensor temp = empty({static_cast<int64_t>(std::max<size_t>(temp_bytes, 1))},
                        TensorOptions(kUInt8).device(flags.device()));
    l.check(kernels::launch_select_flagged(temp.data_ptr(), &temp_bytes, flags.data_ptr<bool>(), n,
                                           positions.data_ptr<int64_t>(), count.data_ptr<int64_t>(),
                                           l.stream()));
    int64_t k = 0;
    read_data_dependent(&k, count.data_ptr(), sizeof k, flags.device().resolved().index());
    return positions.slice(0, 0, k).clone();  // exact size: the n-element buffer is released
  }

  void unravel(const Tensor& out, const Tensor& flat, IntArrayRef sizes) const override {
    TL_CHECK(static_cast<int64_t>(sizes.size()) <= kernels::kMaxDims,
             "nonzero: CUDA tensors with "
             "more than ",
             kernels::kMaxDims, " dims are not supported, got ", sizes.size());
    Launch l("nonzero", out.device());
    l.check(kernels::launch_unravel(flat.data_ptr<int64_t>(), flat.numel(), sizes.data(),
                                    static_cast<int>(sizes.size()), out.data_ptr<int64_t>(),
                                    l.stream()));
  }

  void im2col(const Tensor& cols, const Tensor& img, const tl::detail::Window2d& w,
              double pad) const override {
    TL_INTERNAL_ASSERT(img.is_contiguous() && cols.is_contiguous());
    Launch l("im2col", cols.device());
    l.check(kernels::launch_im2col(img.data_ptr(), cols.data_ptr(), img.dtype(), window_of(w), pad,
                                   l.stream()));
  }

  void col2im(const Tensor& img, const Tensor& cols, const tl::detail::Window2d& w) const override {
    TL_INTERNAL_ASSERT(img.is_contiguous() && cols.is_contiguous());
    Launch l("col2im", img.device());
    l.check(kernels::launch_col2im(cols.data_ptr(), img.data_ptr(), img.dtype(), window_of(w),
                                   l.stream()));
  }

  void reduce_rows(tl::detail::ReduceOp op, const Tensor& out, const Tensor& indices,
                   const Tensor& rows, int64_t n_rows, int64_t row_len,
                   int64_t correction) const override {
    TL_INTERNAL_ASSERT(rows.is_contiguous() && out.is_contiguous());
    Launch l("reduction", out.device());
    // A split reduction's partials (Note [Split full reductions] in reduce.cu): at most
    // kMaxSplitBlocks * kPartialBytes = 64 KiB from the caching allocator.
    const int64_t chunks = kernels::reduce_chunks(n_rows, row_len);
    const Tensor partials = chunks > 1 ? empty({n_rows * chunks * kernels::kPartialBytes},
                                               TensorOptions(kUInt8).device(out.device()))
                                       : Tensor();
    l.check(kernels::launch_reduce_rows(
        row_op(op), rows.data_ptr(), rows.dtype(), out.data_ptr(), out.dtype(),
        indices.defined() ? static_cast<int64_t*>(indices.data_ptr()) : nullptr, n_rows, row_len,
        correction, partials.defined() ? partials.data_ptr() : nullptr, l.stream()));
  }

  void softmax(const Tensor& out, const Tensor& in, int64_t outer, int64_t len, int64_t inner,
               bool log) const override {
    TL_INTERNAL_ASSERT(in.is_contiguous() && out.is_contiguous());
    Launch l(log ? "log_softmax" : "softmax", out.device());
    l.check(kernels::launch_softmax(in.data_ptr(), out.data_ptr(), in.dtype(), outer, len, inner,
                                    log, l.stream()));
  }

  void random(const Tensor& out, const tl::detail::RandomFill& f) const override {
    TL_INTERNAL_ASSERT(out.is_contiguous());
    Launch l("random", out.device());
    const ScalarType dt = out.dtype();
    const kernels::RandomArgs args{
        static_cast<kernels::RandomKind>(f.dist),
        random::uniform_bits_for(static_cast<int>(element_size(dt)), dt == kBFloat16),
        f.seed,
        f.offset,
        f.low,
        f.range};
    l.check(kernels::launch_random(out.data_ptr(), dt, out.numel(), args, l.stream()));
  }

  void matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha,
              const Scalar& beta, bool use_beta) const override {
    detail::matmul(out, a, b, alpha, beta, use_beta);
  }
};

}  // namespace

const tl::detail::Kernels* op_kernels() {
  static const Kernels kernels;
  return &kernels;
}

// Device-to-device copy of any strides and dtypes on the destination's device (copy.cpp).
void copy_on_device(const Tensor& dst, const Tensor& src) {
  Launch l("copy_", dst.device());
  l.check(kernels::launch_copy(make_strided<2>(dst.sizes(), {&dst, &src}), dst.dtype(), src.dtype(),
                               l.stream()));
}

void fill_on_device(const Tensor& t, const Scalar& value) {
  Launch l("fill_", t.device());
  l.check(kernels::launch_fill(make_strided<1>(t.sizes(), {&t}), t.dtype(), number_of(value),
                               l.stream()));
}

}  // namespace tl::cuda::detail
