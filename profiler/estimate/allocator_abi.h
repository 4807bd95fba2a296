// The C interface of the estimate's allocator (profiler/estimate/allocator_abi.cpp), loaded by
// the in-process Python hook with ctypes: one PyTorch caching allocator per device, on a fake
// device of a given capacity, under a PYTORCH_CUDA_ALLOC_CONF. The hook asks for each storage
// the program makes on the (faked) GPU and frees it when the storage dies; the allocator's
// events (PyTorch's trace actions) are drained after each call into the snapshot's trace.
// Every function is called with the GIL held: one caller at a time. None throws: a C++ error
// is a return code with its message.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// One allocator event, in PyTorch's trace vocabulary (`kind` is tidemark::events::Kind:
// segment_alloc 0, segment_free 1, segment_map 2, segment_unmap 3, alloc 4, free_requested 5,
// free_completed 6, empty_cache 7, alloc_retry 8, oom 9).
typedef struct {
  uint64_t kind, addr, size, requested_size, stream, device_free;
} tidemark_estimate_event;

// A new allocator; null with `error` filled (a bad setting, named) on failure. `capacity`:
// bytes of device memory (0: as good as unlimited).
void* tidemark_estimate_open(uint64_t capacity, const char* alloc_conf, char* error,
                             size_t error_size);
void tidemark_estimate_close(void* allocator);
// `size` bytes on `stream`: 0 and the block's address in *addr, 1 when the device is out of
// memory (`error`: PyTorch's message), 2 on any other error (`error` says it). A request of 0
// bytes gets address 0 and no block.
int tidemark_estimate_alloc(void* allocator, uint64_t size, uint64_t stream, uint64_t* addr,
                            char* error, size_t error_size);
void tidemark_estimate_free(void* allocator, uint64_t addr);
// Returns 0, or 2 with nothing released when the allocator failed.
int tidemark_estimate_empty_cache(void* allocator);
void tidemark_estimate_reset_peak(void* allocator);
// Takes up to `n` events not yet taken into `out`; returns how many it wrote.
size_t tidemark_estimate_take_events(void* allocator, tidemark_estimate_event* out, size_t n);
// JSON text (PyTorch's memory_stats() keys, flat) or the segments (PyTorch's snapshot
// `segments`, without frames): writes at most `n` bytes, returns the length it needs.
size_t tidemark_estimate_stats_json(void* allocator, char* out, size_t n);
size_t tidemark_estimate_segments_json(void* allocator, char* out, size_t n);

#ifdef __cplusplus
}
#endif
