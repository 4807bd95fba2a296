// libcupti, opened at run time (dlopen) so that a machine without it, or with one that cannot
// start, runs the host program untraced instead of failing to load the injection library.
#pragma once

#include <cupti.h>

#include <string>

namespace tidemark::interpose {

struct CuptiApi {
  CUptiResult (*GetResultString)(CUptiResult, const char**) = nullptr;
  CUptiResult (*GetVersion)(uint32_t*) = nullptr;
  CUptiResult (*GetTimestamp)(uint64_t*) = nullptr;
  CUptiResult (*Subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult (*EnableCallback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                CUpti_CallbackId) = nullptr;
  CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
                                           CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*ActivityRegisterTimestampCallback)(CUpti_TimestampCallbackFunc) = nullptr;
  CUptiResult (*ActivityEnable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*ActivityGetNextRecord)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult (*ActivityFlushAll)(uint32_t) = nullptr;
  CUptiResult (*ActivityGetAttribute)(CUpti_ActivityAttribute, size_t*, void*) = nullptr;
  // Optional: the name of a call, to find every copy among the calls (callbacks.cpp).
  CUptiResult (*GetCallbackName)(CUpti_CallbackDomain, uint32_t, const char**) = nullptr;
  std::string path;  // the library that was opened
};

// Opens libcupti once (TIDEMARK_CUPTI_PATH, then libcupti.so.<major>, the build's toolkit,
// libcupti.so). Returns nullptr and sets *why when it is missing or lacks a function.
const CuptiApi* cupti_api(std::string* why) noexcept;

// "CUPTI_ERROR_UNKNOWN" and the like; "CUPTI error N" when even that is unavailable.
std::string cupti_error(const CuptiApi* api, CUptiResult r);

}  // namespace tidemark::interpose
