// The seam between tensorlib's core and its CUDA backend. The core never includes CUDA headers:
// where a tensor op meets a CUDA tensor (copies, fills, item(), pinned memory, storage
// allocation) it calls these hooks, which the backend in tensorlib/cuda/ implements
// (docs/cuda.md). In a build without the backend cuda_hooks() returns nullptr.
#pragma once

#include <cstddef>

#include "tensorlib/core/device.h"
#include "tensorlib/memory/allocator.h"

namespace tl {

class Tensor;
class Scalar;

namespace detail {

class CudaKernels;

class CudaHooks {
 public:
  virtual ~CudaHooks() = default;
  /// dst <- src, same sizes (src already expanded), any dtypes, at least one on a CUDA device.
  /// Blocking: returns once the data can be read (on the host) or used (on the device).
  virtual void copy(const Tensor& dst, const Tensor& src) const = 0;
  /// Fills a CUDA tensor (cudaMemsetAsync for zero on a contiguous tensor).
  virtual void fill(const Tensor& t, const Scalar& value) const = 0;
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
  /// The op kernels (core/cuda_kernels.h).
  virtual const CudaKernels* kernels() const = 0;
};

/// The backend's hooks, or nullptr in a build without CUDA. The first call registers the
/// CUDA allocator factory.
const CudaHooks* cuda_hooks();

}  // namespace detail
}  // namespace tl
