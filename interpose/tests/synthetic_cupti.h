// Synthetic CUPTI input for the tests: activity records laid out as CUPTI 13 writes them, in a
// buffer from the real buffer_requested that buffer_completed hands to the parser thread, and
// callback data as CUPTI passes it to a subscriber.
#pragma once

#include <cupti.h>
#include <gtest/gtest.h>

#include <cstring>
#include <new>

#include "interpose/activity.h"

namespace tidemark::interpose::testing {

class Buffer {
 public:
  Buffer() {
    size_t max_records = 0;
    activity::buffer_requested(&data_, &size_, &max_records);
  }
  template <typename R>
  R& add() {
    EXPECT_LE(used_ + sizeof(R), size_);
    auto* r = new (data_ + used_) R;
    std::memset(static_cast<void*>(r), 0, sizeof(R));
    used_ += sizeof(R);
    return *r;
  }
  void complete() { activity::buffer_completed(nullptr, 0, data_, size_, used_); }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0, used_ = 0;
};

inline CUpti_ActivityMemory4& memory(Buffer& b, bool alloc, CUpti_ActivityMemoryKind kind,
                                     uint64_t addr, uint64_t bytes, uint64_t ts,
                                     uint32_t device = 0) {
  auto& r = b.add<CUpti_ActivityMemory4>();
  r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  r.memoryOperationType = alloc ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                                : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  r.memoryKind = kind;
  r.address = addr;
  r.bytes = bytes;
  r.timestamp = ts;
  r.deviceId = device;
  r.streamId = CUPTI_INVALID_STREAM_ID;
  return r;
}

inline CUpti_ActivityMemcpy6& memcpy_rec(Buffer& b, CUpti_ActivityMemcpyKind kind,
                                         CUpti_ActivityMemoryKind src, CUpti_ActivityMemoryKind dst,
                                         bool async, uint64_t bytes, uint64_t start, uint64_t end,
                                         uint32_t device, uint32_t context, uint32_t stream) {
  auto& r = b.add<CUpti_ActivityMemcpy6>();
  r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  r.copyKind = static_cast<uint8_t>(kind);
  r.srcKind = static_cast<uint8_t>(src);
  r.dstKind = static_cast<uint8_t>(dst);
  r.flags = async ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0;
  r.bytes = bytes;
  r.start = start;
  r.end = end;
  r.deviceId = device;
  r.contextId = context;
  r.streamId = stream;
  return r;
}

inline CUpti_ActivitySynchronization2& sync_rec(Buffer& b, CUpti_ActivitySynchronizationType type,
                                                uint64_t start, uint64_t end, uint32_t context,
                                                uint32_t stream) {
  auto& r = b.add<CUpti_ActivitySynchronization2>();
  r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  r.type = type;
  r.start = start;
  r.end = end;
  r.contextId = context;
  r.streamId = stream;
  return r;
}

inline const int kCudaSuccess = 0;

// What CUPTI passes a subscriber at a call's entry or exit (`result`: the call's status).
inline CUpti_CallbackData callback_data(CUpti_ApiCallbackSite site, uint32_t correlation,
                                        const void* params = nullptr,
                                        const int* result = &kCudaSuccess) {
  CUpti_CallbackData d;
  std::memset(&d, 0, sizeof d);
  d.callbackSite = site;
  d.correlationId = correlation;
  d.functionParams = params;
  d.functionReturnValue = site == CUPTI_API_EXIT ? const_cast<int*>(result) : nullptr;
  d.functionName = "test";
  return d;
}

}  // namespace tidemark::interpose::testing
