// The seam between tensorlib's core and its CUDA backend beyond the op kernels (core/kernels.h).
// The core never includes CUDA headers: where it meets a CUDA tensor outside an op (item(),
// pinned memory, storage allocation) it calls these hooks, which the backend in
// tensorlib/cuda/ implements (docs/cuda.md). In a build without the backend cuda_hooks()
// returns nullptr.
#pragma once

#include <cstddef>

#include "tensorlib/base/device.h"
#include "tensorlib/memory/allocator.h"

namespace tl {

class Tensor;
class Scalar;

namespace detail {

class Kernels;

class CudaHooks {
 public:
  virtual ~CudaHooks() = default;
  /// Copies the single element of a CUDA tensor into `out` (element_size() bytes), waiting.
  virtual void read_scalar(const Tensor& t, void* out) const = 0;
  /// A storage allocation on the device's current stream.
  virtual memory::DataPtr allocate(Device device, size_t nbytes) const = 0;
  /// A copy of a CPU tensor in page-locked memory.
  virtual Tensor pin_memory(const Tensor& t) const = 0;
  /// Whether the tensor's data lives in page-locked host memory.
  virtual bool is_pinned(const Tensor& t) const = 0;
  /// Whether a CUDA device can be used (the driver answers and has at least one device).
  virtual bool is_available() const = 0;
  /// The op kernels (core/kernels.h).
  virtual const Kernels* kernels() const = 0;
};

/// The backend's hooks, or nullptr in a build without CUDA. The first call registers the
/// CUDA allocator factory.
const CudaHooks* cuda_hooks();

}  // namespace detail
}  // namespace tl
