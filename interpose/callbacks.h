// CUPTI Callback API: the host side of the CUDA calls whose activity records become events.
//
// Note [Call sites]
// Activity records are parsed on our own thread, long after the call (Note [Activity buffers]),
// so the stack and thread the recorder would see there are the parser's. Instead, on entry to a
// selected runtime or driver call (allocations, frees, pinned memory, synchronizations, blocking
// copies, virtual-memory mappings) the callback, on the calling thread, captures the host stack
// with the recorder's unwinder (CUDA's and CUPTI's own frames at the top dropped), takes the
// thread's id and reserves a few sequence numbers, and files them under the call's correlation
// id. When a record with that correlation id is parsed, its events are emitted with that thread,
// stack and seq (events::dispatch_stamped: Note [Stamped events] in profiler/events/events.h).
// A runtime call reaches the driver through nested
// driver calls that have correlation ids of their own; they file the same call site, so a record
// carrying either id finds it. The table is a fixed ring of the last kCallSites filed calls,
// in filing order, with an open-addressed index from correlation id to ring slot: every CUDA
// call takes a correlation id (kernel launches included, hundreds per training step), so the
// ids of the filed calls are sparse and only the number of filed calls may decide what is
// forgotten. An entry whose record never comes (a call CUPTI reports nothing for) is
// overwritten kCallSites filed calls later; a failed call's entry is dropped at its exit.
// Nothing is allocated on the calling threads.
//
// Virtual-memory mappings (cuMemMap / cuMemUnmap, PyTorch's expandable segments) are recorded
// from the callbacks themselves (segment_map / segment_unmap at the call's exit), because CUPTI
// does not document whether MEMORY2 reports them; MEMORY2 records of those calls, if any, are
// dropped so nothing is counted twice.
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "profiler/record/stacks.h"

namespace tidemark::interpose {
struct CuptiApi;
}

namespace tidemark::interpose::callbacks {

// Sequence numbers reserved per call: the events one record (or nested driver call) yields.
inline constexpr uint64_t kSeqsPerCall = 4;
// Filed calls whose record may still come: the ring's size (a PyTorch training loop files a
// few thousand between two activity flushes).
inline constexpr size_t kCallSites = 16384;

struct CallSite {
  uint64_t thread = 0;  // events::current_thread_id() of the calling thread
  uint64_t seq = 0;     // first of the sequence numbers reserved at the call
  uint32_t domain = 0;  // CUpti_CallbackDomain
  uint32_t cbid = 0;    // CUpti_CallbackId in that domain
  int n_ips = 0;
  uint64_t ips[record::kMaxStackDepth];  // innermost first
  std::span<const uint64_t> stack() const { return {ips, static_cast<size_t>(n_ips)}; }
};

// The ring of Note [Call sites]. Thread-safe; fixed memory after construction.
class CallSites {
 public:
  CallSites(size_t capacity, int stack_depth);
  // Files `site` under `correlation` (its stack cut to the depth), overwriting the call filed
  // `capacity` calls earlier.
  void put(uint32_t correlation, const CallSite& site) noexcept;
  // The call site of `correlation`, with a sequence number of its own for the next event
  // (fresh ones once the call's reserved numbers are used up). False when unknown.
  bool find(uint32_t correlation, CallSite* out, uint64_t* seq) noexcept;
  void drop(uint32_t correlation) noexcept;
  size_t size() const noexcept;
  int stack_depth() const noexcept { return depth_; }
  // Entries overwritten before any record asked for them.
  uint64_t aged_out() const noexcept;

 private:
  struct Slot {
    bool live = false, used = false;
    uint32_t correlation = 0;
    uint32_t seqs_used = 0;
    uint64_t thread = 0, seq = 0;
    uint32_t domain = 0, cbid = 0;
    int n_ips = 0;
  };
  // The index entry holding `correlation`'s slot, or npos.
  size_t index_of(uint32_t correlation) const noexcept;
  Slot* slot_of(uint32_t correlation) noexcept;  // the live slot of `correlation`, if any
  void unindex(size_t entry) noexcept;           // backward-shift deletion (no tombstones)
  size_t home(uint32_t correlation) const noexcept;

  mutable std::mutex mu_;
  std::vector<Slot> slots_;      // the ring, in filing order
  size_t next_ = 0;              // the slot the next put fills
  std::vector<uint32_t> index_;  // linear probing, 2^k >= 2 * slots: slot + 1, 0 when empty
  std::vector<uint64_t> ips_;    // slot i's stack at [i * depth_, (i + 1) * depth_)
  uint64_t aged_out_ = 0;
  int depth_;
};

// The callback CUPTI calls (and the tests call, with constructed CUpti_CallbackData). Never
// throws, never calls CUDA. Ignores everything before configure().
void CUPTIAPI on_api(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                     const void* data);

// Sets up the call-site table (stack_depth: the recording's, 0 for threads and order only) and
// the hook run on entry to cudaDeviceReset. The CUDA libraries' address ranges, whose frames are
// dropped from the top of a captured stack, are read from /proc/self/maps here. Idempotent.
void configure(int stack_depth, void (*on_device_reset)()) noexcept;

// Enables the callbacks of the calls listed in callbacks.cpp for `subscriber` (subscribed with
// on_api). Returns how many were enabled (a call this driver does not know is skipped).
int enable(const CuptiApi& api, CUpti_SubscriberHandle subscriber) noexcept;

// The call site of an activity record (Note [Call sites]); false when none is filed (the
// record's event then has no stack, and the parser's thread).
bool call_site(uint32_t correlation, CallSite* out, uint64_t* seq) noexcept;

// Whether a call's memory records are already recorded from its callbacks (cuMemMap & co.).
bool recorded_by_callback(const CallSite& site) noexcept;

struct Stats {
  uint64_t calls = 0;     // call sites filed
  uint64_t aged_out = 0;  // filed and overwritten unasked
  uint64_t mappings = 0;  // segment_map / segment_unmap emitted from callbacks
};
Stats stats() noexcept;

}  // namespace tidemark::interpose::callbacks
