// Loads libtidemark_inject.so and calls InitializeInjection (twice, as a driver might) the way
// the CUDA driver does at cuInit, then exits with status 3: on a machine without a driver
// CUPTI cannot start, and the program must run on with its own exit status.
#include <dlfcn.h>

#include <cstdio>

int main() {
  void* lib = dlopen(TIDEMARK_INJECT_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::printf("dlopen: %s\n", dlerror());
    return 1;
  }
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection"));
  if (!init) return 1;
  std::printf("InitializeInjection: %d %d\n", init(), init());
  return 3;
}
