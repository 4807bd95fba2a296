// Tensor factories: empty/zeros/ones/full, ranges, eye, random tensors, nested lists and
// from_blob.
#include <cmath>
#include <map>
#include <memory>
#include <mutex>

#include "tensorlib/core/generator.h"
#include "tensorlib/core/kernels.h"
#include "tensorlib/core/make_tensor.h"
#include "tensorlib/core/shape_util.h"
#include "tensorlib/core/tensor.h"
#include "tensorlib/cpu/loops.h"

namespace tl {

using detail::make_tensor;

PhiloxGenerator& default_generator() {
  static PhiloxGenerator gen;
  return gen;
}

namespace {
// One generator per CUDA device, made on first use (never destroyed: nothing at exit).
struct DeviceGenerators {
  std::mutex mutex;
  uint64_t seed = kDefaultSeed;  // the last manual_seed, for generators made later
  std::map<int, std::unique_ptr<PhiloxGenerator>> by_index;
};
DeviceGenerators& device_generators() {
  static auto* gens = new DeviceGenerators;
  return *gens;
}
}  // namespace

PhiloxGenerator& default_generator(Device device) {
  if (device.is_cpu()) return default_generator();
  DeviceGenerators& g = device_generators();
  std::lock_guard<std::mutex> lock(g.mutex);
  auto& slot = g.by_index[device.resolved().index()];
  if (!slot) slot = std::make_unique<PhiloxGenerator>(g.seed);
  return *slot;
}

void manual_seed(uint64_t seed) {
  default_generator().set_seed(seed);
  DeviceGenerators& g = device_generators();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.seed = seed;
  for (auto& [index, gen] : g.by_index) gen->set_seed(seed);
}

namespace {

// Runs `fill(T* data, n)` on a new contiguous CPU tensor, then moves it to the requested device.
template <typename F>
Tensor generate(IntArrayRef sizes, const TensorOptions& options, ScalarType dtype, const char* op,
                F fill) {
  Tensor out = make_tensor(sizes, dtype, Device(kCPU), op);
  TL_DISPATCH_ALL(dtype, op, [&]<typename T>() { fill(out.data_ptr<T>(), out.numel()); });
  return options.device().is_cpu() ? out : out.to(options.device());
}

ScalarType dtype_for(const TensorOptions& o, const Scalar& s) {
  if (o.has_dtype()) return o.dtype();
  if (s.is_bool()) return kBool;
  if (s.is_integral()) return kInt64;
  return get_default_dtype();
}

// rand/randn/randint: counters reserved from the generator of the result's device, then the
// backend's kernel (the CPU loop and the CUDA kernel draw the same numbers).
Tensor random_tensor(IntArrayRef sizes, const TensorOptions& options, ScalarType dtype,
                     const char* op, detail::RandomDist dist, int64_t low = 0, uint64_t range = 1) {
  Tensor out = make_tensor(sizes, dtype, options.device(), op);
  const int64_t n = out.numel();
  const int64_t per_counter = dist == detail::RandomDist::integer ? 2 : 4;
  PhiloxGenerator& gen = default_generator(out.device());
  const detail::RandomFill fill{
      dist, gen.seed(), gen.reserve(static_cast<uint64_t>((n + per_counter - 1) / per_counter)),
      low, range};
  if (n == 0) return out;
  detail::kernels_for(out.device()).random(out, fill);
  return out;
}

}  // namespace

Tensor empty(IntArrayRef sizes, TensorOptions options) {
  return make_tensor(sizes, options.dtype(), options.device(), "empty");
}

Tensor empty_strided(IntArrayRef sizes, IntArrayRef strides, TensorOptions options) {
  TL_CHECK(sizes.size() == strides.size(),
           "empty_strided: mismatch in length of strides and shape");
  int64_t extent = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) {
      extent = 0;
      break;
    }
    extent += (sizes[i] - 1) * strides[i];
  }
  Tensor base = make_tensor({extent}, options.dtype(), options.device(), "empty_strided");
  auto impl =
      std::make_shared<TensorImpl>(base.storage(), sizes.vec(), strides.vec(), 0, options.dtype());
  impl->set_origin("empty_strided", nullptr);
  return Tensor(std::move(impl));
}

namespace {
Tensor filled(IntArrayRef sizes, const Scalar& value, ScalarType dtype, Device device,
              const char* op) {
  Tensor out = make_tensor(sizes, dtype, device, op);
  detail::fill(out, value);  // a new tensor: version 0 (Note [Version counter])
  return out;
}
}  // namespace

Tensor zeros(IntArrayRef sizes, TensorOptions options) {
  return filled(sizes, 0, options.dtype(), options.device(), "zeros");
}
Tensor ones(IntArrayRef sizes, TensorOptions options) {
  return filled(sizes, 1, options.dtype(), options.device(), "ones");
}
Tensor full(IntArrayRef sizes, const Scalar& value, TensorOptions options) {
  return filled(sizes, value, dtype_for(options, value), options.device(), "full");
}

Tensor empty_like(const Tensor& t, std::optional<TensorOptions> o) {
  auto opts = o.value_or(t.options());
  return empty(t.sizes(),
               TensorOptions(opts.has_dtype() ? opts.dtype() : t.dtype()).device(opts.device()));
}
Tensor zeros_like(const Tensor& t, std::optional<TensorOptions> o) {
  return full_like(t, 0, o);
}
Tensor ones_like(const Tensor& t, std::optional<TensorOptions> o) {
  return full_like(t, 1, o);
}
Tensor full_like(const Tensor& t, const Scalar& value, std::optional<TensorOptions> o) {
  Tensor out = empty_like(t, o);
  detail::fill(out, value);
  return out;
}

Tensor arange(const Scalar& end, TensorOptions options) {
  return arange(0, end, 1, options);
}

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions options) {
  bool floating = start.is_floating_point() || end.is_floating_point() || step.is_floating_point();
  ScalarType dt = options.has_dtype() ? options.dtype() : (floating ? get_default_dtype() : kInt64);
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  TL_CHECK(st != 0, "arange: step must be nonzero");
  TL_CHECK((st > 0 && e >= s) || (st < 0 && e <= s),
           "arange: upper bound and larger bound inconsistent with step sign");
  int64_t n = static_cast<int64_t>(std::ceil((e - s) / st));
  return generate({n}, options, dt, "arange", [&]<typename T>(T* p, int64_t count) {
    if (!floating) {
      int64_t si = start.to_long(), sti = step.to_long();
      for (int64_t i = 0; i < count; ++i) p[i] = cpu::convert<T>(si + i * sti);
    } else {
      for (int64_t i = 0; i < count; ++i) p[i] = cpu::convert<T>(s + static_cast<double>(i) * st);
    }
  });
}

Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, TensorOptions options) {
  TL_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  double s = start.to_double(), e = end.to_double();
  double step = steps > 1 ? (e - s) / static_cast<double>(steps - 1) : 0.0;
  return generate({steps}, options, options.dtype(), "linspace", [&]<typename T>(T* p, int64_t n) {
    // Symmetric evaluation (from both ends) so the last value is exactly `end`, as PyTorch.
    int64_t half = n / 2;
    for (int64_t i = 0; i < n; ++i) {
      double v =
          i < half ? s + step * static_cast<double>(i) : e - step * static_cast<double>(n - 1 - i);
      p[i] = cpu::convert<T>(v);
    }
  });
}

Tensor eye(int64_t n, TensorOptions options) {
  return eye(n, n, options);
}

Tensor eye(int64_t n, int64_t m, TensorOptions options) {
  TL_CHECK(n >= 0 && m >= 0, "eye: n and m must be non-negative, got ", n, " and ", m);
  return generate({n, m}, options, options.dtype(), "eye", [&]<typename T>(T* p, int64_t count) {
    for (int64_t i = 0; i < count; ++i) p[i] = cpu::convert<T>(int64_t(i / m == i % m));
  });
}

Tensor rand(IntArrayRef sizes, TensorOptions options) {
  ScalarType dt = options.dtype();
  TL_CHECK(is_floating_point(dt), "rand: expected a floating point dtype, got ", dt);
  return random_tensor(sizes, options, dt, "rand", detail::RandomDist::uniform);
}

Tensor randn(IntArrayRef sizes, TensorOptions options) {
  ScalarType dt = options.dtype();
  TL_CHECK(is_floating_point(dt), "randn: expected a floating point dtype, got ", dt);
  return random_tensor(sizes, options, dt, "randn", detail::RandomDist::normal);
}

Tensor randint(int64_t high, IntArrayRef sizes, TensorOptions options) {
  return randint(0, high, sizes, options);
}

Tensor randint(int64_t low, int64_t high, IntArrayRef sizes, TensorOptions options) {
  TL_CHECK(low < high, "random_ expects 'from' to be less than 'to', but got from=", low,
           " >= to=", high);
  return random_tensor(sizes, options, options.dtype_opt().value_or(kInt64), "randint",
                       detail::RandomDist::integer, low, static_cast<uint64_t>(high - low));
}

Tensor rand_like(const Tensor& t) {
  return rand(t.sizes(), t.options());
}
Tensor randn_like(const Tensor& t) {
  return randn(t.sizes(), t.options());
}

Tensor from_blob(void* data, IntArrayRef sizes, TensorOptions options) {
  return from_blob(data, sizes, detail::contiguous_strides(sizes), options);
}

Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides, TensorOptions options) {
  TL_CHECK(sizes.size() == strides.size(), "from_blob: sizes ", sizes, " and strides ", strides,
           " differ in length");
  int64_t extent = 0;
  bool empty = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) empty = true;
    extent += (sizes[i] - 1) * strides[i];
  }
  size_t nbytes = empty ? 0 : (extent + 1) * element_size(options.dtype());
  auto storage = std::make_shared<StorageImpl>(data, nbytes, options.device(), nullptr);
  auto impl = std::make_shared<TensorImpl>(std::move(storage), sizes.vec(), strides.vec(), 0,
                                           options.dtype());
  impl->set_origin("from_blob", nullptr);
  return Tensor(std::move(impl));
}

Tensor from_blob(void* data, IntArrayRef sizes, std::function<void(void*)> deleter,
                 TensorOptions options) {
  size_t nbytes = detail::numel_of(sizes) * element_size(options.dtype());
  auto storage = std::make_shared<StorageImpl>(data, nbytes, options.device(), std::move(deleter));
  auto impl = std::make_shared<TensorImpl>(std::move(storage), sizes.vec(),
                                           detail::contiguous_strides(sizes), 0, options.dtype());
  impl->set_origin("from_blob", nullptr);
  return Tensor(std::move(impl));
}

NestedList::NestedList(std::initializer_list<NestedList> list)
    : is_scalar_(false), kind_(Scalar::Kind::Bool), children_(list) {
  sizes_.push_back(static_cast<int64_t>(children_.size()));
  for (size_t i = 0; i < children_.size(); ++i) {
    const auto& c = children_[i];
    if (i == 0) {
      sizes_.insert(sizes_.end(), c.sizes_.begin(), c.sizes_.end());
    } else {
      TL_CHECK(c.sizes_ == children_[0].sizes_, "tensor(): expected all nested lists to have the ",
               "same shape, but element ", i, " has shape ", IntArrayRef(c.sizes_),
               " and element 0 has ", IntArrayRef(children_[0].sizes_));
    }
    kind_ = std::max(kind_, c.kind_);
  }
}

namespace {
void flatten_into(const NestedList& l, std::vector<Scalar>& out) {
  if (l.is_scalar()) {
    out.push_back(l.scalar());
    return;
  }
  for (const auto& c : l.children()) flatten_into(c, out);
}
}  // namespace

Tensor tensor(const NestedList& values, TensorOptions options) {
  ScalarType dt = options.has_dtype()                     ? options.dtype()
                  : values.kind() == Scalar::Kind::Double ? get_default_dtype()
                  : values.kind() == Scalar::Kind::Int    ? kInt64
                                                          : kBool;
  std::vector<Scalar> flat;
  flatten_into(values, flat);
  return generate(values.sizes(), options, dt, "tensor", [&]<typename T>(T* p, int64_t n) {
    for (int64_t i = 0; i < n; ++i) p[i] = flat[i].to<T>();
  });
}

}  // namespace tl
