// Uses NVTX and nothing of CUDA: recorded by `tidemark record` through NVTX_INJECTION64_PATH
// (nvtx_record_test.cpp checks the trace). `spawn` first runs a copy of itself as a child
// process and prints its pid, so the child's own trace file can be checked too. Exits with 5
// (`steps`: only NVTX step ranges, exits with 0).
#include <nvtx3/nvToolsExt.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

extern char** environ;

// Iterations marked with NVTX ranges (Note [Step ranges] in nvtx_inject.cpp): three "step"
// ranges, "ProfilerStep#12" as a start/end range, "stepper" (not a step), "step 20".
void steps() {
  for (int i = 0; i < 3; ++i) {
    nvtxRangePushA("step");
    nvtxRangePop();
  }
  nvtxRangeId_t profiler_step = nvtxRangeStartA("ProfilerStep#12");
  nvtxRangeEnd(profiler_step);
  nvtxRangePushA("stepper");
  nvtxRangePop();
  nvtxRangePushA("step 20");
  nvtxRangePop();
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "steps") == 0) {
    steps();
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "spawn") == 0) {
    char child_arg[] = "child";
    char* child_argv[] = {argv[0], child_arg, nullptr};
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, child_argv, environ) != 0) return 1;
    int status = 0;
    waitpid(pid, &status, 0);
    std::printf("%d %d\n", static_cast<int>(pid), WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  nvtxNameCategoryA(3, "io");
  nvtxRangePushA("outer");
  nvtxRangePushA("inner");
  nvtxMarkA("hello");
  nvtxRangePop();
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.category = 3;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = "load";
  nvtxRangeId_t load = nvtxRangeStartEx(&a);
  nvtxRangePop();
  nvtxRangeEnd(load);

  nvtxDomainHandle_t domain = nvtxDomainCreateA("app");
  nvtxEventAttributes_t r{};
  r.version = NVTX_VERSION;
  r.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  r.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  r.message.registered = nvtxDomainRegisterStringA(domain, "registered step");
  nvtxDomainRangePushEx(domain, &r);
  nvtxEventAttributes_t m = r;
  m.messageType = NVTX_MESSAGE_TYPE_ASCII;
  m.message.ascii = "dmark";
  nvtxDomainMarkEx(domain, &m);
  nvtxDomainRangePop(domain);
  return 5;
}
