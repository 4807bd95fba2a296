#include "interpose/cupti_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace tidemark::interpose {

namespace {

template <typename F>
bool bind(void* lib, const char* name, F& fn, std::string& missing) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) missing = name;
  return fn != nullptr;
}

std::string g_why;
CuptiApi g_api;
bool g_ok = false;

void load() {
  std::string tried;
  void* lib = nullptr;
  const std::string major = "libcupti.so." + std::to_string(CUPTI_API_VERSION / 10000);
  const char* env = std::getenv("TIDEMARK_CUPTI_PATH");
  for (const char* candidate : {env, major.c_str(), TIDEMARK_CUPTI_DEFAULT, "libcupti.so"}) {
    if (!candidate || !*candidate) continue;
    lib = dlopen(candidate, RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      g_api.path = candidate;
      break;
    }
    tried += tried.empty() ? candidate : std::string(", ") + candidate;
  }
  if (!lib) {
    g_why = "libcupti not found (tried " + tried + "; set TIDEMARK_CUPTI_PATH)";
    return;
  }
  std::string missing;
  bool ok =
      bind(lib, "cuptiGetResultString", g_api.GetResultString, missing) &&
      bind(lib, "cuptiGetVersion", g_api.GetVersion, missing) &&
      bind(lib, "cuptiGetTimestamp", g_api.GetTimestamp, missing) &&
      bind(lib, "cuptiSubscribe", g_api.Subscribe, missing) &&
      bind(lib, "cuptiUnsubscribe", g_api.Unsubscribe, missing) &&
      bind(lib, "cuptiEnableCallback", g_api.EnableCallback, missing) &&
      bind(lib, "cuptiActivityRegisterCallbacks", g_api.ActivityRegisterCallbacks, missing) &&
      bind(lib, "cuptiActivityEnable", g_api.ActivityEnable, missing) &&
      bind(lib, "cuptiActivityGetNextRecord", g_api.ActivityGetNextRecord, missing) &&
      bind(lib, "cuptiActivityGetNumDroppedRecords", g_api.ActivityGetNumDroppedRecords, missing) &&
      bind(lib, "cuptiActivityFlushAll", g_api.ActivityFlushAll, missing) &&
      bind(lib, "cuptiActivityGetAttribute", g_api.ActivityGetAttribute, missing);
  if (!ok) {
    g_why = g_api.path + " is not a usable libcupti, or too old (no " + missing + ")";
    return;
  }
  // Optional: without it, CUPTI timestamps are mapped onto the event clock by an offset.
  g_api.ActivityRegisterTimestampCallback =
      reinterpret_cast<decltype(g_api.ActivityRegisterTimestampCallback)>(
          dlsym(lib, "cuptiActivityRegisterTimestampCallback"));
  g_api.GetCallbackName =
      reinterpret_cast<decltype(g_api.GetCallbackName)>(dlsym(lib, "cuptiGetCallbackName"));
  uint32_t version = 0;
  if (g_api.GetVersion(&version) == CUPTI_SUCCESS && version < 18) {  // 18: CUDA 12.0
    g_why = g_api.path + " is too old (CUPTI API version " + std::to_string(version) + ")";
    return;
  }
  g_ok = true;
}

}  // namespace

const CuptiApi* cupti_api(std::string* why) noexcept {
  static std::once_flag once;
  try {
    std::call_once(once, load);
  } catch (...) {
    if (why) *why = "cannot load libcupti";
    return nullptr;
  }
  if (!g_ok && why) *why = g_why;
  return g_ok ? &g_api : nullptr;
}

std::string cupti_error(const CuptiApi* api, CUptiResult r) {
  const char* s = nullptr;
  if (api && api->GetResultString && api->GetResultString(r, &s) == CUPTI_SUCCESS && s) return s;
  return "CUPTI error " + std::to_string(static_cast<int>(r));
}

}  // namespace tidemark::interpose
