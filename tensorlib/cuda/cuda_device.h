// CudaDevice: the caching allocator's memory source on a CUDA device (cudaMalloc, events on
// streams, cudaMemGetInfo, and expandable segments through the driver's virtual memory API).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>

#include "tensorlib/memory/device_interface.h"

namespace tl::cuda::detail {

class CudaDevice final : public memory::DeviceInterface {
 public:
  explicit CudaDevice(int index);
  ~CudaDevice() override;

  Device device() const override { return Device(kCUDA, static_cast<Device::Index>(index_)); }
  void* raw_alloc(size_t nbytes) override;
  void raw_free(void* ptr, size_t nbytes) override;
  memory::MemoryInfo memory_info() override;

  memory::EventId record_event(memory::StreamId stream) override;
  bool query_event(memory::EventId event) override;
  void synchronize_event(memory::EventId event) override;
  void destroy_event(memory::EventId event) override;
  void synchronize_device() override;

  bool supports_expandable() const override { return vmm_granularity_ != 0; }
  void* reserve_range(size_t nbytes) override;
  bool map(void* base, size_t offset, size_t nbytes) override;
  void unmap(void* base, size_t offset, size_t nbytes) override;
  void release_range(void* base, size_t nbytes) override;

 private:
  int index_;
  size_t vmm_granularity_ = 0;  // 0: the driver's VMM API is not usable on this device
  std::mutex mu_;
  std::map<uintptr_t, unsigned long long> handles_;  // mapped chunk -> CUmemGenericAllocationHandle
};

}  // namespace tl::cuda::detail
