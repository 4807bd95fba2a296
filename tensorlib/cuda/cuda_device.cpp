#include "tensorlib/cuda/cuda_device.h"

#include <cuda.h>

#include "tensorlib/cuda/cuda_internal.h"

namespace tl::cuda::detail {

namespace {

// Note [Driver entry points]
// Expandable segments need the driver API (cuMemCreate, cuMemMap, ...). tensorlib does not
// link libcuda: a machine without a driver must still load every tensorlib program (the CPU
// build of the tests runs there). The entry points come from the runtime instead
// (cudaGetDriverEntryPointByVersion), as PyTorch's DriverAPI does; when any is missing the
// device simply reports no expandable-segment support and the allocator uses ordinary
// segments.
struct DriverApi {
  decltype(&::cuMemAddressReserve) mem_address_reserve = nullptr;
  decltype(&::cuMemAddressFree) mem_address_free = nullptr;
  decltype(&::cuMemCreate) mem_create = nullptr;
  decltype(&::cuMemRelease) mem_release = nullptr;
  decltype(&::cuMemMap) mem_map = nullptr;
  decltype(&::cuMemUnmap) mem_unmap = nullptr;
  decltype(&::cuMemSetAccess) mem_set_access = nullptr;
  decltype(&::cuMemGetAllocationGranularity) get_granularity = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  bool ok = false;
};

template <typename F>
bool load(const char* name, F& fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &status) !=
          cudaSuccess ||
      status != cudaDriverEntryPointSuccess || p == nullptr) {
    (void)cudaGetLastError();
    return false;
  }
  fn = reinterpret_cast<F>(p);
  return true;
}

const DriverApi& driver() {
  static const DriverApi api = [] {
    DriverApi a;
    a.ok = load("cuMemAddressReserve", a.mem_address_reserve) &&
           load("cuMemAddressFree", a.mem_address_free) && load("cuMemCreate", a.mem_create) &&
           load("cuMemRelease", a.mem_release) && load("cuMemMap", a.mem_map) &&
           load("cuMemUnmap", a.mem_unmap) && load("cuMemSetAccess", a.mem_set_access) &&
           load("cuMemGetAllocationGranularity", a.get_granularity) &&
           load("cuDeviceGet", a.device_get) &&
           load("cuDeviceGetAttribute", a.device_get_attribute);
    return a;
  }();
  return api;
}

CUmemAllocationProp allocation_prop(int index) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = index;
  return prop;
}

CUdeviceptr to_dptr(void* p, size_t offset = 0) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p) + offset);
}

}  // namespace

CudaDevice::CudaDevice(int index) : index_(index) {
  DeviceGuard guard(index_);
  int vmm = 0;
  CUdevice dev = 0;
  if (driver().ok &&
      (driver().device_get(&dev, index_) != CUDA_SUCCESS ||
       driver().device_get_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                     dev) != CUDA_SUCCESS)) {
    vmm = 0;
  }
  if (vmm != 0 && driver().ok) {
    CUmemAllocationProp prop = allocation_prop(index_);
    size_t g = 0;
    if (driver().get_granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS &&
        g > 0 && (size_t{2} << 20) % g == 0) {
      vmm_granularity_ = g;
    }
  }
}

// The CUDA allocators are never destroyed (memory.cpp), so nothing runs at process exit.
CudaDevice::~CudaDevice() = default;

void* CudaDevice::raw_alloc(size_t nbytes) {
  DeviceGuard guard(index_);
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, nbytes);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // OOM is not sticky: the allocator retries or reports it
    return nullptr;
  }
  TL_CUDA_CHECK(err);
  return p;
}

void CudaDevice::raw_free(void* ptr, size_t /*nbytes*/) {
  DeviceGuard guard(index_);
  TL_CUDA_CHECK(cudaFree(ptr));
}

memory::MemoryInfo CudaDevice::memory_info() {
  DeviceGuard guard(index_);
  memory::MemoryInfo info;
  TL_CUDA_CHECK(cudaMemGetInfo(&info.free, &info.total));
  return info;
}

memory::EventId CudaDevice::record_event(memory::StreamId stream) {
  DeviceGuard guard(index_);
  cudaEvent_t e = nullptr;
  TL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  TL_CUDA_CHECK(cudaEventRecord(e, reinterpret_cast<cudaStream_t>(stream)));
  return reinterpret_cast<memory::EventId>(e);
}

bool CudaDevice::query_event(memory::EventId event) {
  cudaError_t err = cudaEventQuery(reinterpret_cast<cudaEvent_t>(event));
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  TL_CUDA_CHECK(err);
  return true;
}

void CudaDevice::synchronize_event(memory::EventId event) {
  TL_CUDA_CHECK(cudaEventSynchronize(reinterpret_cast<cudaEvent_t>(event)));
}

void CudaDevice::destroy_event(memory::EventId event) {
  (void)cudaEventDestroy(reinterpret_cast<cudaEvent_t>(event));
}

void CudaDevice::synchronize_device() {
  DeviceGuard guard(index_);
  TL_CUDA_CHECK(cudaDeviceSynchronize());
}

void* CudaDevice::reserve_range(size_t nbytes) {
  if (vmm_granularity_ == 0) return nullptr;
  CUdeviceptr p = 0;
  if (driver().mem_address_reserve(&p, nbytes, 0, 0, 0) != CUDA_SUCCESS) return nullptr;
  return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
}

// One physical allocation per 2 MiB chunk (PyTorch maps one handle per page), so any run of
// whole pages can be unmapped later without splitting a handle.
bool CudaDevice::map(void* base, size_t offset, size_t nbytes) {
  constexpr size_t kChunk = size_t{2} << 20;
  if (vmm_granularity_ == 0 || nbytes % kChunk != 0 || offset % kChunk != 0) return false;
  const DriverApi& d = driver();
  CUmemAllocationProp prop = allocation_prop(index_);
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t done = 0; done < nbytes; done += kChunk) {
    CUmemGenericAllocationHandle h = 0;
    const CUdeviceptr at = to_dptr(base, offset + done);
    bool ok = d.mem_create(&h, kChunk, &prop, 0) == CUDA_SUCCESS;
    if (ok && d.mem_map(at, kChunk, 0, h, 0) != CUDA_SUCCESS) {
      (void)d.mem_release(h);
      ok = false;
    }
    if (ok && d.mem_set_access(at, kChunk, &access, 1) != CUDA_SUCCESS) {
      (void)d.mem_unmap(at, kChunk);
      (void)d.mem_release(h);
      ok = false;
    }
    if (!ok) {  // out of memory: undo this call's chunks, the allocator retries or reports
      for (size_t undo = 0; undo < done; undo += kChunk) {
        const CUdeviceptr u = to_dptr(base, offset + undo);
        (void)d.mem_unmap(u, kChunk);
        (void)d.mem_release(handles_[u]);
        handles_.erase(u);
      }
      return false;
    }
    handles_[at] = h;
  }
  return true;
}

void CudaDevice::unmap(void* base, size_t offset, size_t nbytes) {
  constexpr size_t kChunk = size_t{2} << 20;
  const DriverApi& d = driver();
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t done = 0; done < nbytes; done += kChunk) {
    const CUdeviceptr at = to_dptr(base, offset + done);
    auto it = handles_.find(at);
    if (it == handles_.end()) continue;
    (void)d.mem_unmap(at, kChunk);
    (void)d.mem_release(it->second);
    handles_.erase(it);
  }
}

void CudaDevice::release_range(void* base, size_t nbytes) {
  if (vmm_granularity_ == 0) return;
  (void)driver().mem_address_free(to_dptr(base), nbytes);
}

}  // namespace tl::cuda::detail
