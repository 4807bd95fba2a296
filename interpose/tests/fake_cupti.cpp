// A stand-in for libcupti (loaded through TIDEMARK_CUPTI_PATH) whose cuptiSubscribe answers as
// the real one does when another tool (torch.profiler, Nsight Systems, compute-sanitizer)
// already subscribed: the injection library must say so in one line and let the program run.
#include <cupti.h>

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
CUptiResult cuptiSubscribe(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) {
  return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
}
CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  return CUPTI_SUCCESS;
}
CUptiResult cuptiEnableCallback(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                CUpti_CallbackId) {
  return CUPTI_ERROR_UNKNOWN;
}
CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc,
                                           CUpti_BuffersCallbackCompleteFunc) {
  return CUPTI_ERROR_UNKNOWN;
}
CUptiResult cuptiActivityEnable(CUpti_ActivityKind) {
  return CUPTI_ERROR_UNKNOWN;
}
CUptiResult cuptiActivityGetNextRecord(uint8_t*, size_t, CUpti_Activity**) {
  return CUPTI_ERROR_MAX_LIMIT_REACHED;
}
CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* n) {
  *n = 0;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityFlushAll(uint32_t) {
  return CUPTI_ERROR_UNKNOWN;
}
CUptiResult cuptiActivityGetAttribute(CUpti_ActivityAttribute, size_t*, void*) {
  return CUPTI_ERROR_UNKNOWN;
}

}  // extern "C"
