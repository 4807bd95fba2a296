// Internal helpers of the CUDA backend: error checks, a device guard, event emission and the
// pinned host cache. Included only by tensorlib/cuda/*.cpp (it includes the CUDA runtime).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "profiler/events/events.h"
#include "tensorlib/base/device.h"
#include "tensorlib/base/error.h"

namespace tl::cuda::detail {

/// Throws tl::Error naming the call and CUDA's error string; clears the sticky-free error.
void check(cudaError_t err, const char* what);
#define TL_CUDA_CHECK(call) ::tl::cuda::detail::check((call), #call)

/// Makes `index` the current device for a scope (cudaSetDevice), restoring the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

/// The current stream (as an integer) of CUDA device `index` on this thread.
uint64_t current_stream_id(int index);

/// Emits `sync` (when a sink listens) for a wait that began at t0_ns (ev::now_ns()).
void emit_sync(Device device, tidemark::events::SyncKind kind, uint64_t stream, uint64_t t0_ns);
void emit_memcpy(Device device, tidemark::events::CopyDirection dir, uint64_t bytes,
                 uint64_t stream, bool pinned, bool async);

/// Whether `ptr` is page-locked host memory (cudaHostAlloc / cudaHostRegister).
bool is_pinned_ptr(const void* ptr);

// ---- Pinned host memory cache (pinned.cpp) ---------------------------------------------
/// A page-locked block of at least `nbytes` (cached blocks reused by power-of-two size).
void* pinned_alloc(size_t nbytes);
/// Returns a block; it is reused only after the copies recorded on it have finished.
void pinned_free(void* ptr);
/// Records that an asynchronous copy on `stream` of device `device` reads or writes `ptr`.
void pinned_record_use(void* ptr, int device, uint64_t stream);

}  // namespace tl::cuda::detail
