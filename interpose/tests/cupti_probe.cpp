// A "CUDA program" for init_test, run against the stand-in libcupti (fake_cupti.cpp): loads
// libtidemark_inject.so and calls InitializeInjection as the driver would, makes a cudaMalloc
// from a function of its own (as the stand-in reports it to the subscriber), lets the stand-in
// write its MEMORY2 record, and exits with status 3. The trace must show the allocation with this
// program's stack and thread.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

using RuntimeCall = void (*)(uint32_t cbid, uint32_t correlation, int status);
RuntimeCall g_call = nullptr;

[[gnu::noinline]] void program_allocates_device_memory() {
  g_call(20 /* cudaMalloc_v3020 */, 7, 0);
  asm volatile("" ::: "memory");  // no tail call: this frame stays on the stack
}

}  // namespace

int main() {
  void* lib = dlopen(TIDEMARK_INJECT_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  const char* cupti_path = std::getenv("TIDEMARK_CUPTI_PATH");
  void* cupti = cupti_path ? dlopen(cupti_path, RTLD_NOW | RTLD_LOCAL) : nullptr;
  if (!lib || !cupti) {
    std::printf("dlopen: %s\n", dlerror());
    return 1;
  }
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection"));
  g_call = reinterpret_cast<RuntimeCall>(dlsym(cupti, "fake_cupti_runtime_call"));
  auto record = reinterpret_cast<void (*)(uint32_t, uint64_t, uint64_t)>(
      dlsym(cupti, "fake_cupti_memory_record"));
  if (!init || !g_call || !record) return 1;
  std::printf("InitializeInjection: %d\n", init());
  program_allocates_device_memory();
  record(7, 0x7f0000000000, 2 << 20);
  return 3;
}
