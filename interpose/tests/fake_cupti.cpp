// A stand-in for libcupti, loaded through TIDEMARK_CUPTI_PATH, for driving the injection library
// end to end without a driver. With FAKE_CUPTI_BUSY=1 its cuptiSubscribe answers as the real one
// does when another tool (torch.profiler, Nsight Systems, compute-sanitizer) already subscribed.
// Otherwise it keeps the subscriber's callback and the buffer callbacks, and a test program
// plays CUDA through the two fake_cupti_* functions: a runtime call (callbacks at entry and
// exit, on the calling thread) and the MEMORY2 record CUPTI would write for it. Built as
// libcupti.so (in a directory of its own), so its frames count as CUPTI's.
#include <cupti.h>

#include <cstdlib>
#include <cstring>

namespace {
CUpti_CallbackFunc g_callback = nullptr;
void* g_userdata = nullptr;
CUpti_BuffersCallbackRequestFunc g_request = nullptr;
CUpti_BuffersCallbackCompleteFunc g_complete = nullptr;
}  // namespace

extern "C" {

CUptiResult cuptiGetResultString(CUptiResult r, const char** s) {
  *s = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
           ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
           : "CUPTI_ERROR_UNKNOWN";
  return CUPTI_SUCCESS;
}
CUptiResult cuptiGetVersion(uint32_t* v) {
  *v = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiGetTimestamp(uint64_t* t) {
  *t = 0;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* h, CUpti_CallbackFunc f, void* userdata) {
  const char* busy = std::getenv("FAKE_CUPTI_BUSY");
  if (busy && *busy == '1') return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  g_callback = f;
  g_userdata = userdata;
  *h = reinterpret_cast<CUpti_SubscriberHandle>(&g_callback);
  return CUPTI_SUCCESS;
}
CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  g_callback = nullptr;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiEnableCallback(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                CUpti_CallbackId) {
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                           CUpti_BuffersCallbackCompleteFunc complete) {
  g_request = request;
  g_complete = complete;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityEnable(CUpti_ActivityKind) {
  return CUPTI_SUCCESS;
}
// Walks buffers of CUpti_ActivityMemory4 records (the only kind this stand-in writes).
CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  uint8_t* next =
      *record ? reinterpret_cast<uint8_t*>(*record) + sizeof(CUpti_ActivityMemory4) : buffer;
  if (next + sizeof(CUpti_ActivityMemory4) > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* n) {
  *n = 0;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityFlushAll(uint32_t) {
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityGetAttribute(CUpti_ActivityAttribute, size_t*, void*) {
  return CUPTI_ERROR_UNKNOWN;
}

// A runtime call as CUPTI reports it to the subscriber, on the calling thread.
void fake_cupti_runtime_call(CUpti_CallbackId cbid, uint32_t correlation, int status) {
  if (!g_callback) return;
  CUpti_CallbackData d;
  std::memset(&d, 0, sizeof d);
  d.correlationId = correlation;
  d.functionName = "fake";
  d.callbackSite = CUPTI_API_ENTER;
  g_callback(g_userdata, CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &d);
  d.callbackSite = CUPTI_API_EXIT;
  d.functionReturnValue = &status;
  g_callback(g_userdata, CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &d);
}

// The MEMORY2 record of a device allocation, in a buffer of its own, completed at once.
void fake_cupti_memory_record(uint32_t correlation, uint64_t address, uint64_t bytes) {
  if (!g_request || !g_complete) return;
  uint8_t* buffer = nullptr;
  size_t size = 0, max_records = 0;
  g_request(&buffer, &size, &max_records);
  if (!buffer || size < sizeof(CUpti_ActivityMemory4)) return;
  auto* r = reinterpret_cast<CUpti_ActivityMemory4*>(buffer);
  std::memset(static_cast<void*>(r), 0, sizeof *r);
  r->kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  r->memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  r->memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  r->correlationId = correlation;
  r->address = address;
  r->bytes = bytes;
  r->timestamp = 1000;
  r->streamId = CUPTI_INVALID_STREAM_ID;
  g_complete(nullptr, 0, buffer, size, sizeof *r);
}

}  // extern "C"
