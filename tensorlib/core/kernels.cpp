// The list of backends and the lookup of their kernel tables (Note [Device dispatch]).
#include "tensorlib/core/kernels.h"

#include <optional>

#include "tensorlib/base/error.h"
#include "tensorlib/core/cuda_hooks.h"
#include "tensorlib/core/tensor.h"

namespace tl {

namespace cpu {
const detail::Kernels& kernels();  // tensorlib/cpu/kernels.cpp
}  // namespace cpu

namespace detail {

namespace {
// The backends of this build, by device type: a new backend adds its line here.
const Kernels* table_of(DeviceType type) {
  switch (type) {
    case DeviceType::CPU:
      return &cpu::kernels();
    case DeviceType::CUDA: {
      const CudaHooks* hooks = cuda_hooks();  // nullptr in a build without the backend
      return hooks != nullptr ? hooks->kernels() : nullptr;
    }
  }
  return nullptr;
}
}  // namespace

bool has_kernels(DeviceType type) {
  return table_of(type) != nullptr;
}

const Kernels& kernels_for(Device device) {
  const Kernels* k = table_of(device.type());
  TL_CHECK(k != nullptr, "no kernels for tensors on ", device, " in this build");
  return *k;
}

Device check_device(const char* op, std::initializer_list<const Tensor*> tensors,
                    bool allow_cpu_scalars) {
  std::optional<Device> device;
  for (const Tensor* t : tensors) {
    TL_CHECK(t->defined(), op, ": expected a defined tensor");
    if (allow_cpu_scalars && t->is_cpu() && t->dim() == 0) continue;
    const Device d = t->device().resolved();
    if (!device) {
      device = d;
    } else {
      TL_CHECK(*device == d,
               "Expected all tensors to be on the same device, but found at least "
               "two devices, ",
               *device, " and ", d, "! (in ", op, ")");
    }
  }
  if (!device) return Device(kCPU);  // only CPU scalars
  TL_CHECK(has_kernels(device->type()), op, ": expected CPU tensors, got a tensor on ", *device,
           " (the CUDA backend is not available in this build)");
  return *device;
}

void check_no_internal_overlap(const char* op, const Tensor& t) {
  for (int64_t i = 0; i < t.dim(); ++i) {
    TL_CHECK(!(t.strides()[i] == 0 && t.sizes()[i] > 1), op,
             ": unsupported operation: more than one element of the written-to tensor refers to "
             "a single memory location. Please clone() the tensor before performing the "
             "operation.");
  }
}

void Kernels::missing(const char* op) const {
  check_fail(__FILE__, __LINE__,
             str(op, ": not implemented for tensors on ", Device(device_type()), " yet"));
}

// The entries a backend leaves unfilled.
void Kernels::copy(const Tensor&, const Tensor&) const {
  missing("copy_");
}
void Kernels::fill(const Tensor&, const Scalar&) const {
  missing("fill_");
}
void Kernels::unary(math::UnaryOp, const Tensor&, const Tensor&) const {
  missing("unary");
}
void Kernels::binary(math::BinaryOp, const Tensor&, const Tensor&, const Tensor&,
                     const Scalar&) const {
  missing("binary");
}
void Kernels::where(const Tensor&, const Tensor&, const Tensor&, const Tensor&) const {
  missing("where");
}
void Kernels::clamp(const Tensor&, const Tensor&, const std::optional<Scalar>&,
                    const std::optional<Scalar>&) const {
  missing("clamp");
}
void Kernels::masked_fill(const Tensor&, const Tensor&, const Scalar&) const {
  missing("masked_fill");
}
void Kernels::index_select(const Tensor&, const Tensor&, int64_t, const Tensor&) const {
  missing("index_select");
}
void Kernels::gather(const Tensor&, const Tensor&, int64_t, const Tensor&) const {
  missing("gather");
}
void Kernels::scatter_add(const Tensor&, int64_t, const Tensor&, const Tensor&) const {
  missing("scatter_add");
}
Tensor Kernels::flat_nonzero(const Tensor&) const {
  missing("flat_nonzero");
}
void Kernels::unravel(const Tensor&, const Tensor&, IntArrayRef) const {
  missing("unravel");
}
void Kernels::im2col(const Tensor&, const Tensor&, const Window2d&, double) const {
  missing("im2col");
}
void Kernels::col2im(const Tensor&, const Tensor&, const Window2d&) const {
  missing("col2im");
}
void Kernels::reduce_rows(ReduceOp, const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t,
                          int64_t) const {
  missing("reduce_rows");
}
Tensor Kernels::sum_leading(const Tensor&, const std::vector<bool>&, bool, ScalarType) const {
  return Tensor();  // no fast path: the caller reduces rows
}
bool Kernels::adam_step(const AdamStep&, const Tensor&, const Tensor&, const Tensor&,
                        const Tensor&) const {
  return false;  // no fused path: the optimizer composes the update
}
void Kernels::softmax(const Tensor&, const Tensor&, int64_t, int64_t, int64_t, bool) const {
  missing("softmax");
}
void Kernels::random(const Tensor&, const RandomFill&) const {
  missing("random");
}
void Kernels::matmul(const Tensor&, const Tensor&, const Tensor&, const Scalar&, const Scalar&,
                     bool) const {
  missing("matmul");
}

// The image ops (Note [Image kernels]): no kernel, so the front-ends compose them; a backward
// entry is reached only through its forward's result.
Tensor Kernels::conv2d(const Tensor&, const Tensor&, const Tensor&, const Window2d&,
                       int64_t) const {
  return Tensor();
}
void Kernels::conv2d_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              const Tensor&, const Tensor&, const Window2d&, int64_t) const {
  missing("conv2d_backward");
}
Tensor Kernels::conv_transpose2d(const Tensor&, const Tensor&, const Tensor&, const Window2d&,
                                 int64_t) const {
  return Tensor();
}
void Kernels::conv_transpose2d_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                        const Tensor&, const Tensor&, const Window2d&,
                                        int64_t) const {
  missing("conv_transpose2d_backward");
}
Tensor Kernels::max_pool2d(const Tensor&, const Window2d&, Tensor&) const {
  return Tensor();
}
void Kernels::max_pool2d_backward(const Tensor&, const Tensor&, const Tensor&,
                                  const Window2d&) const {
  missing("max_pool2d_backward");
}
Tensor Kernels::avg_pool2d(const Tensor&, const Window2d&, const AvgPool2d&) const {
  return Tensor();
}
void Kernels::avg_pool2d_backward(const Tensor&, const Tensor&, const Window2d&,
                                  const AvgPool2d&) const {
  missing("avg_pool2d_backward");
}
Tensor Kernels::adaptive_avg_pool2d(const Tensor&, const Window2d&) const {
  return Tensor();
}
void Kernels::adaptive_avg_pool2d_backward(const Tensor&, const Tensor&, const Window2d&) const {
  missing("adaptive_avg_pool2d_backward");
}
Tensor Kernels::upsample2d(const Tensor&, const Window2d&, const Resize2d&) const {
  return Tensor();
}
void Kernels::upsample2d_backward(const Tensor&, const Tensor&, const Window2d&,
                                  const Resize2d&) const {
  missing("upsample2d_backward");
}

}  // namespace detail
}  // namespace tl
