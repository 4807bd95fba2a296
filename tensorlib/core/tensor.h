// Tensor: a strided view of a Storage, with libtorch's names and semantics.
//
// Note [Views and version counters]
// A view (transpose, narrow, select, ...) shares its base's Storage and its version counter,
// and records the tensor it views as base() (always the root: a view of a view points to the
// original tensor, as PyTorch's `._base`). In-place ops bump the shared counter, so autograd
// can tell when a saved tensor was modified through any alias.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "tensorlib/base/device.h"
#include "tensorlib/base/error.h"
#include "tensorlib/core/array_ref.h"
#include "tensorlib/core/dtype.h"
#include "tensorlib/core/scalar.h"
#include "tensorlib/core/storage.h"
#include "tensorlib/core/tensor_options.h"

namespace tl {

namespace autograd {
struct AutogradMeta;
struct Node;
}  // namespace autograd

struct VersionCounter {
  std::atomic<uint32_t> version{0};
};

class TensorImpl {
 public:
  TensorImpl(Storage storage, std::vector<int64_t> sizes, std::vector<int64_t> strides,
             int64_t storage_offset, ScalarType dtype);
  ~TensorImpl();
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;

  const Storage& storage() const { return storage_; }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int64_t storage_offset() const { return storage_offset_; }
  ScalarType dtype() const { return dtype_; }
  int64_t numel() const { return numel_; }
  bool is_contiguous() const { return is_contiguous_; }
  uint64_t id() const { return id_; }

  // Called once by the factory that made this tensor (emits tensor_create).
  void set_origin(const char* op, std::shared_ptr<TensorImpl> base);
  const char* op() const { return op_; }
  const std::shared_ptr<TensorImpl>& base() const { return base_; }
  const std::shared_ptr<VersionCounter>& version_counter() const { return version_; }
  void share_version_counter(std::shared_ptr<VersionCounter> v) { version_ = std::move(v); }

  // Created inside tl::InferenceMode (may not be saved for backward).
  bool is_inference() const { return inference_; }

  // Autograd state; null until the tensor requires a gradient or gets a grad_fn.
  autograd::AutogradMeta* autograd_meta() const { return autograd_meta_.get(); }
  autograd::AutogradMeta* ensure_autograd_meta();

  // In-place resize of the metadata (used by as_strided_ / set_ style internals).
  void set_sizes_and_strides(std::vector<int64_t> sizes, std::vector<int64_t> strides,
                             int64_t storage_offset);

 private:
  void refresh();

  Storage storage_;
  std::vector<int64_t> sizes_;
  std::vector<int64_t> strides_;
  int64_t storage_offset_;
  int64_t numel_ = 1;
  ScalarType dtype_;
  bool is_contiguous_ = true;
  uint64_t id_;
  const char* op_ = "empty";
  std::shared_ptr<TensorImpl> base_;
  std::shared_ptr<VersionCounter> version_;
  std::unique_ptr<autograd::AutogradMeta> autograd_meta_;
  bool inference_ = false;
};

class Tensor;
using TensorList = ArrayRef<Tensor>;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- Metadata ------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  IntArrayRef sizes() const { return impl()->sizes(); }
  IntArrayRef strides() const { return impl()->strides(); }
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return static_cast<int64_t>(impl()->sizes().size()); }
  int64_t ndimension() const { return dim(); }
  int64_t numel() const { return impl()->numel(); }
  int64_t storage_offset() const { return impl()->storage_offset(); }
  ScalarType dtype() const { return impl()->dtype(); }
  ScalarType scalar_type() const { return impl()->dtype(); }
  Device device() const { return impl()->storage()->device(); }
  TensorOptions options() const { return TensorOptions(dtype()).device(device()); }
  size_t element_size() const { return tl::element_size(dtype()); }
  size_t nbytes() const { return numel() * element_size(); }
  const Storage& storage() const { return impl()->storage(); }
  bool is_contiguous() const { return impl()->is_contiguous(); }
  bool is_floating_point() const { return tl::is_floating_point(dtype()); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }
  uint64_t id() const { return impl()->id(); }
  // True when this tensor shares another tensor's storage through a view op.
  bool is_view() const { return impl()->base() != nullptr; }
  // The tensor this one is a view of (undefined when not a view), as PyTorch's `._base`.
  Tensor _base() const { return Tensor(impl()->base()); }
  uint32_t _version() const { return impl()->version_counter()->version.load(); }
  void bump_version() const { impl()->version_counter()->version.fetch_add(1); }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  long use_count() const { return impl_.use_count(); }

  void* data_ptr() const;
  template <typename T>
  T* data_ptr() const {
    TL_CHECK(scalar_type_of<T>() == dtype(), "data_ptr<", dtype_name(scalar_type_of<T>()),
             ">() called on a tensor of dtype ", dtype());
    return static_cast<T*>(data_ptr());
  }
  template <typename T>
  const T* const_data_ptr() const {
    return data_ptr<T>();
  }
  // The value of a one-element tensor.
  Scalar item() const;
  template <typename T>
  T item() const {
    return item().to<T>();
  }

  // ---- Views (share storage, never copy) -------------------------------------------------
  Tensor view(IntArrayRef sizes) const;
  Tensor view_as(const Tensor& other) const { return view(other.sizes()); }
  Tensor reshape(IntArrayRef sizes) const;
  Tensor reshape_as(const Tensor& other) const { return reshape(other.sizes()); }
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor permute(IntArrayRef dims) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim = 0, std::optional<int64_t> start = std::nullopt,
               std::optional<int64_t> end = std::nullopt, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor expand(IntArrayRef sizes) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, IntArrayRef sizes) const;
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;
  Tensor as_strided(IntArrayRef sizes, IntArrayRef strides,
                    std::optional<int64_t> storage_offset = std::nullopt) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split_with_sizes(IntArrayRef split_sizes, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  std::vector<Tensor> unbind(int64_t dim = 0) const;
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor detach() const;
  // Detaches this tensor from the graph in place (not allowed on views, as PyTorch).
  Tensor& detach_();

  // ---- Autograd (tensorlib/autograd) ------------------------------------------------------
  bool requires_grad() const;
  // Leaves only (as PyTorch); returns *this.
  Tensor& requires_grad_(bool requires_grad = true);
  Tensor& set_requires_grad(bool r) { return requires_grad_(r); }
  // The accumulated gradient (undefined until a backward reaches this leaf).
  const Tensor& grad() const;
  Tensor& mutable_grad();
  std::shared_ptr<autograd::Node> grad_fn() const;
  // A tensor without grad_fn: user-created, or one that does not require grad.
  bool is_leaf() const;
  bool is_inference() const { return impl()->is_inference(); }
  uint32_t output_nr() const;
  // Backpropagates from this tensor (a scalar unless `gradient` is given).
  void backward(const Tensor& gradient = {}, bool retain_graph = false,
                bool create_graph = false) const;
  // Keeps .grad() for a non-leaf.
  void retain_grad() const;
  bool retains_grad() const;
  // Called with the gradient w.r.t. this tensor; may return a replacement (or undefined).
  void register_hook(std::function<Tensor(const Tensor&)> hook) const;
  // Called after a leaf's .grad() was updated.
  void register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const;

  // ---- Conversion and copy ---------------------------------------------------------------
  Tensor to(ScalarType dtype, bool copy = false) const;
  Tensor to(Device device, bool copy = false) const;
  Tensor to(Device device, ScalarType dtype, bool copy = false) const;
  Tensor to(TensorOptions options, bool copy = false) const;
  Tensor cpu() const { return to(Device(kCPU)); }
  Tensor cuda() const { return to(Device(kCUDA)); }
  // A copy in page-locked host memory (CPU tensors; needs the CUDA backend and a device), for
  // asynchronous host-to-device copies (docs/cuda.md). A pinned tensor is returned as is.
  Tensor pin_memory() const;
  bool is_pinned() const;
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(const Scalar& value);
  Tensor& zero_() { return fill_(0); }

  // ---- Elementwise (out of place, and in place with a trailing underscore) -----------------
  Tensor add(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor add(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor sub(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor sub(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(const Scalar& other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(const Scalar& other) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(const Scalar& exponent) const;
  Tensor& add_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& add_(const Scalar& other, const Scalar& alpha = 1);
  Tensor& sub_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& sub_(const Scalar& other, const Scalar& alpha = 1);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(const Scalar& other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(const Scalar& other);
  Tensor& pow_(const Tensor& exponent);
  Tensor& pow_(const Scalar& exponent);

  Tensor eq(const Tensor& other) const;
  Tensor eq(const Scalar& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(const Scalar& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(const Scalar& other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(const Scalar& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(const Scalar& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(const Scalar& other) const;

  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
  Tensor clamp_min(const Scalar& min) const { return clamp(min, std::nullopt); }
  Tensor clamp_max(const Scalar& max) const { return clamp(std::nullopt, max); }

#define TL_DECLARE_UNARY(name) \
  Tensor name() const;         \
  Tensor& name##_();
  TL_DECLARE_UNARY(neg)
  TL_DECLARE_UNARY(abs)
  TL_DECLARE_UNARY(exp)
  TL_DECLARE_UNARY(log)
  TL_DECLARE_UNARY(sqrt)
  TL_DECLARE_UNARY(rsqrt)
  TL_DECLARE_UNARY(sin)
  TL_DECLARE_UNARY(cos)
  TL_DECLARE_UNARY(tanh)
  TL_DECLARE_UNARY(sigmoid)
  TL_DECLARE_UNARY(relu)
  TL_DECLARE_UNARY(gelu)
  TL_DECLARE_UNARY(reciprocal)
#undef TL_DECLARE_UNARY

  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;
  Tensor& masked_fill_(const Tensor& mask, const Scalar& value);

  // ---- Reductions ------------------------------------------------------------------------
  Tensor sum(std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor sum(IntArrayRef dims, bool keepdim = false,
             std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor mean(std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor mean(IntArrayRef dims, bool keepdim = false,
              std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor prod(std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor prod(int64_t dim, bool keepdim = false,
              std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor max() const;
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  Tensor min() const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor var(bool unbiased = true) const;
  Tensor var(IntArrayRef dims, bool unbiased = true, bool keepdim = false) const;
  Tensor std(bool unbiased = true) const;
  Tensor std(IntArrayRef dims, bool unbiased = true, bool keepdim = false) const;
  // `t.var({1})` must reduce dim 1, not convert {1} to `unbiased`: a braced list prefers
  // these overloads (libtorch has this trap; tensorlib does not).
  Tensor var(std::initializer_list<int64_t> dims, bool unbiased = true,
             bool keepdim = false) const {
    return var(IntArrayRef(dims), unbiased, keepdim);
  }
  Tensor std(std::initializer_list<int64_t> dims, bool unbiased = true,
             bool keepdim = false) const {
    return std(IntArrayRef(dims), unbiased, keepdim);
  }
  Tensor logsumexp(IntArrayRef dims, bool keepdim = false) const;
  Tensor softmax(int64_t dim, std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor log_softmax(int64_t dim, std::optional<ScalarType> dtype = std::nullopt) const;

  // ---- Linear algebra and indexing -------------------------------------------------------
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor& scatter_add_(int64_t dim, const Tensor& index, const Tensor& src);
  /// The indices of the non-zero elements, int64 [n, dim()] in row-major order. Its size
  /// depends on the data: on CUDA the host waits for the count (a `sync`, data_dependent).
  Tensor nonzero() const;
  /// The elements where `mask` (bool, broadcast with this) is true, as a 1-D tensor; on CUDA a
  /// data-dependent sync point like nonzero().
  Tensor masked_select(const Tensor& mask) const;

  std::string toString() const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// ---- Factories ----------------------------------------------------------------------------
Tensor empty(IntArrayRef sizes, TensorOptions options = {});
Tensor empty_strided(IntArrayRef sizes, IntArrayRef strides, TensorOptions options = {});
Tensor zeros(IntArrayRef sizes, TensorOptions options = {});
Tensor ones(IntArrayRef sizes, TensorOptions options = {});
Tensor full(IntArrayRef sizes, const Scalar& value, TensorOptions options = {});
Tensor empty_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
Tensor zeros_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
Tensor ones_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
Tensor full_like(const Tensor& t, const Scalar& value,
                 std::optional<TensorOptions> options = std::nullopt);
Tensor arange(const Scalar& end, TensorOptions options = {});
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1,
              TensorOptions options = {});
Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, TensorOptions options = {});
Tensor eye(int64_t n, TensorOptions options = {});
Tensor eye(int64_t n, int64_t m, TensorOptions options = {});
Tensor rand(IntArrayRef sizes, TensorOptions options = {});
Tensor randn(IntArrayRef sizes, TensorOptions options = {});
Tensor randint(int64_t low, int64_t high, IntArrayRef sizes, TensorOptions options = kInt64);
Tensor randint(int64_t high, IntArrayRef sizes, TensorOptions options = kInt64);
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);
// Wraps memory the caller owns; `deleter` (optional) runs when the last view dies.
Tensor from_blob(void* data, IntArrayRef sizes, TensorOptions options = {});
Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides, TensorOptions options = {});
Tensor from_blob(void* data, IntArrayRef sizes, std::function<void(void*)> deleter,
                 TensorOptions options = {});

// Nested braces: tl::tensor({{1, 2}, {3, 4}}) gives an int64 tensor, any float makes it the
// default dtype, bools give bool (as torch.tensor).
class NestedList {
 public:
  NestedList(bool v) : scalar_(v), kind_(Scalar::Kind::Bool) {}      // NOLINT
  NestedList(int v) : scalar_(v), kind_(Scalar::Kind::Int) {}        // NOLINT
  NestedList(long v) : scalar_(v), kind_(Scalar::Kind::Int) {}       // NOLINT
  NestedList(long long v) : scalar_(v), kind_(Scalar::Kind::Int) {}  // NOLINT
  NestedList(float v) : scalar_(v), kind_(Scalar::Kind::Double) {}   // NOLINT
  NestedList(double v) : scalar_(v), kind_(Scalar::Kind::Double) {}  // NOLINT
  NestedList(std::initializer_list<NestedList> list);                // NOLINT

  bool is_scalar() const { return is_scalar_; }
  const Scalar& scalar() const { return scalar_; }
  const std::vector<NestedList>& children() const { return children_; }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  Scalar::Kind kind() const { return kind_; }

 private:
  bool is_scalar_ = true;
  Scalar scalar_;
  Scalar::Kind kind_;
  std::vector<NestedList> children_;
  std::vector<int64_t> sizes_;
};
Tensor tensor(const NestedList& values, TensorOptions options = {});
template <typename T>
Tensor tensor(const std::vector<T>& values, TensorOptions options = {}) {
  auto src = from_blob(const_cast<T*>(values.data()), {static_cast<int64_t>(values.size())},
                       scalar_type_of<T>());
  return src.to(options.has_dtype() ? options.dtype() : scalar_type_of<T>(), true)
      .to(options.device());
}

// Seeds the default generator (Philox 4x32-10, counter based): same seed, same numbers.
void manual_seed(uint64_t seed);

// ---- Views and shape, as free functions -------------------------------------------------
Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1);
Tensor permute(const Tensor& t, IntArrayRef dims);
Tensor reshape(const Tensor& t, IntArrayRef sizes);
Tensor flatten(const Tensor& t, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor squeeze(const Tensor& t);
Tensor unsqueeze(const Tensor& t, int64_t dim);
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
Tensor diagonal(const Tensor& t, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
Tensor as_strided(const Tensor& t, IntArrayRef sizes, IntArrayRef strides,
                  std::optional<int64_t> storage_offset = std::nullopt);
std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim = 0);
std::vector<Tensor> unbind(const Tensor& t, int64_t dim = 0);
std::vector<int64_t> broadcast_shapes(IntArrayRef a, IntArrayRef b);
std::vector<Tensor> broadcast_tensors(TensorList tensors);

// ---- Elementwise -------------------------------------------------------------------------
// The dtype PyTorch's type promotion gives for an op over these operands.
ScalarType result_type(const Tensor& a, const Tensor& b);
ScalarType result_type(const Tensor& a, const Scalar& b);

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Scalar& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Scalar& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Scalar& b);
Tensor pow(const Scalar& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& condition, const Scalar& a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, const Scalar& b);
Tensor clamp(const Tensor& t, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
Tensor neg(const Tensor& t);
Tensor abs(const Tensor& t);
Tensor exp(const Tensor& t);
Tensor log(const Tensor& t);
Tensor sqrt(const Tensor& t);
Tensor rsqrt(const Tensor& t);
Tensor sin(const Tensor& t);
Tensor cos(const Tensor& t);
Tensor tanh(const Tensor& t);
Tensor sigmoid(const Tensor& t);
Tensor relu(const Tensor& t);
Tensor gelu(const Tensor& t);
Tensor reciprocal(const Tensor& t);
Tensor masked_fill(const Tensor& t, const Tensor& mask, const Scalar& value);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
bool equal(const Tensor& a, const Tensor& b);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Scalar& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Scalar& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Scalar& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Scalar& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Scalar& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Scalar& b);
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, const Scalar& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Scalar& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Scalar& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Scalar& b);

// ---- Reductions --------------------------------------------------------------------------
Tensor sum(const Tensor& t, std::optional<ScalarType> dtype = std::nullopt);
Tensor sum(const Tensor& t, IntArrayRef dims, bool keepdim = false,
           std::optional<ScalarType> dtype = std::nullopt);
Tensor mean(const Tensor& t, std::optional<ScalarType> dtype = std::nullopt);
Tensor mean(const Tensor& t, IntArrayRef dims, bool keepdim = false,
            std::optional<ScalarType> dtype = std::nullopt);
Tensor prod(const Tensor& t, std::optional<ScalarType> dtype = std::nullopt);
Tensor prod(const Tensor& t, int64_t dim, bool keepdim = false,
            std::optional<ScalarType> dtype = std::nullopt);
Tensor max(const Tensor& t);
std::tuple<Tensor, Tensor> max(const Tensor& t, int64_t dim, bool keepdim = false);
Tensor min(const Tensor& t);
std::tuple<Tensor, Tensor> min(const Tensor& t, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& t, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& t, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor var(const Tensor& t, IntArrayRef dims, bool unbiased = true, bool keepdim = false);
Tensor std(const Tensor& t, IntArrayRef dims, bool unbiased = true, bool keepdim = false);
Tensor logsumexp(const Tensor& t, IntArrayRef dims, bool keepdim = false);
Tensor softmax(const Tensor& t, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
Tensor log_softmax(const Tensor& t, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);

// ---- Linear algebra (OpenBLAS for float32/float64 on the CPU) -------------------------------
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, const Scalar& beta = 1,
             const Scalar& alpha = 1);

// ---- Indexing and joining ----------------------------------------------------------------
Tensor index_select(const Tensor& t, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& t, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src);
Tensor nonzero(const Tensor& t);
Tensor masked_select(const Tensor& t, const Tensor& mask);
Tensor cat(TensorList tensors, int64_t dim = 0);
Tensor stack(TensorList tensors, int64_t dim = 0);

// Printing like PyTorch: tensor([[1., 2.], [3., 4.]]).
std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace tl
