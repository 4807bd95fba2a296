#include "tensorlib/core/cuda_hooks.h"

#ifdef TIDEMARK_WITH_CUDA
namespace tl::cuda::detail {
// tensorlib/cuda/copy.cpp: registers the CUDA allocator factory, returns the hooks.
const tl::detail::CudaHooks* init_backend();
}  // namespace tl::cuda::detail
#endif

namespace tl::detail {

const CudaHooks* cuda_hooks() {
#ifdef TIDEMARK_WITH_CUDA
  static const CudaHooks* hooks = tl::cuda::detail::init_backend();
  return hooks;
#else
  return nullptr;
#endif
}

}  // namespace tl::detail
