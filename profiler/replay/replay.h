// tidemark::replay: what a run's memory would have been under other allocator settings
// (docs/replay.md). A trace's requests -- sizes, streams, the order of alloc, free_requested,
// free_completed and empty_cache -- are run through tensorlib's CachingAllocator (PyTorch's
// policy) on a FakeDevice, under a PYTORCH_CUDA_ALLOC_CONF and a capacity of the user's
// choosing, and the figures a user tunes by are measured: reserved and allocated peaks, device
// allocations, what is reserved but unallocated at the peak, the largest free block then, and
// the first OOM.
//
// Note [Replay fidelity]
// ~~~~~~~~~~~~~~~~~~~~~~
// Replayed under the settings it was recorded with, a trace recorded by tensorlib from the
// process's start gives back its segment events exactly (sizes, order and addresses), because
// the allocator is the same code and the fake device hands out the recorded addresses while the
// replay agrees with the recording (FakeDevice::prefer_address), so best fit breaks ties among
// equal blocks as it did. Where that cannot hold, the replay says why:
//  * an imported snapshot whose history began mid-run starts from the state rebuilt before it
//    (Plan::initial): each segment is reserved again at its address and its blocks are laid out
//    in address order; a layout the policy cannot rebuild (a large-pool block followed by free
//    space of 1 MiB or less, a segment size no request produces) comes out approximate and is
//    counted (Figures::unplaced);
//  * blocks freed before the end of a snapshot have estimated sizes (docs/importers.md), but
//    the replay asks for the requested sizes, so only the rounding PyTorch applied matters;
//  * a free that releases a segment outside any request (a user's empty_cache()) is explicit
//    in tensorlib traces; in a snapshot it is a run of segment_free entries, read as
//    empty_cache -- unless a new segment follows it, which is PyTorch freeing its cache when
//    cudaMalloc failed: then it is replayed as empty_cache only when the capacity is unknown
//    (Request::retry), since under a capacity the replayed allocator retries by itself;
//  * frees of memory allocated before the recording started are skipped and counted.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/analysis/trace.h"
#include "tensorlib/memory/alloc_config.h"

namespace tidemark::replay {

// Thrown for settings the replay cannot take (the message names the option and the problem).
class SettingsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// PYTORCH_CUDA_ALLOC_CONF as PyTorch reads it (`key:value,key:value`; max_split_size_mb,
// roundup_power2_divisions, garbage_collection_threshold, expandable_segments,
// max_non_split_rounding_mb). Keys that change nothing the replay models (pinned host memory,
// release_lock_on_cudamalloc, backend:native) are accepted and listed in `ignored`;
// backend:cudaMallocAsync and unknown keys are refused as PyTorch refuses them.
struct AllocConf {
  tl::memory::AllocatorConfig config;
  std::vector<std::string> ignored;
  std::string text() const;  // canonical, "" for the defaults ("(defaults)" when shown)
};
AllocConf parse_alloc_conf(std::string_view conf);

// The settings a trace was recorded under, from meta allocator_settings: tensorlib's
// TL_ALLOC_CONF, or the allocator_settings dict of a PyTorch snapshot as the importer renders
// it (`PYTORCH_CUDA_ALLOC_CONF:...,max_split_size:-1,expandable_segments:False,...`).
AllocConf recorded_settings(const std::string& meta_value);

// The caching allocator's own events (segment_*, alloc, free_*, empty_cache, alloc_retry,
// oom): what a replay reads as requests and answers with events of its own.
bool is_allocator_event(events::Kind k);

// One request of the trace, in a compact form a sweep replays many times.
struct Request {
  enum class Kind : uint8_t {
    alloc,        // `block` is handed out
    free,         // the caller frees `block`; `deferred`: reusable only at its `complete`
    complete,     // `block`'s deferred free completes (free_completed)
    failed,       // an allocation the recording could not serve (its oom event)
    empty_cache,  // the program released the cache
  };
  Kind kind = Kind::alloc;
  bool deferred = false;
  // empty_cache: read from a snapshot's run of segment frees followed by a new segment, what
  // PyTorch does when cudaMalloc fails (free the cache, retry). Replayed as empty_cache only
  // when the capacity is unknown; under a capacity the allocator retries by itself.
  // complete: the recording completed it in such a retry (its wait for every pending free),
  // so the replay leaves it to its own allocator's wait rather than completing it before the
  // request, which would let the request find the block free and skip the retry.
  bool retry = false;
  uint32_t block = 0;  // index into Plan::blocks (alloc, free, complete, failed)
  uint64_t seq = 0;    // of the recorded event it comes from
  uint64_t ts = 0;     // ... its time (absolute), thread and stack
  uint64_t thread = 0;
  uint64_t stack_id = 0;
};

struct BlockRequest {
  uint64_t seq = 0;   // of the recorded alloc (or oom)
  uint64_t addr = 0;  // recorded address
  uint64_t size = 0;  // recorded block size
  uint64_t requested = 0;
  uint64_t stream = 0;
  uint64_t ts = 0;  // of the alloc (absolute)
  uint64_t stack_id = 0;
  uint64_t thread = 0;
  events::Category category = events::Category::unknown;
};

// A segment (or mapped range) reserved before the history began (imported snapshots).
struct InitialSegment {
  uint64_t addr = 0, size = 0, stream = 0;
  events::Pool pool = events::Pool::small;
  bool mapped = false;  // a mapped range of an expandable segment
};

// The recorded figures the replay is compared with, from the trace itself.
struct Oom {
  uint64_t ts = 0;  // absolute
  uint64_t requested = 0, stream = 0;
  uint64_t allocated = 0, reserved = 0;
  uint64_t device_free = 0;  // what the device had left (recorded: as the device said)
  uint64_t stack_id = 0;
  struct Live {
    std::string site;  // Note [Allocation site] label
    uint64_t bytes = 0, count = 0;
  };
  std::vector<Live> live;  // the largest sites live then, most bytes first (replay only)
};

struct Figures {
  uint64_t peak_reserved = 0, peak_reserved_ts = 0;
  uint64_t peak_allocated = 0, peak_allocated_ts = 0;
  uint64_t device_allocations = 0;    // cudaMalloc and cuMemMap calls (segment_alloc, segment_map)
  uint64_t unallocated_at_peak = 0;   // reserved - allocated when reserved first peaked
  uint64_t largest_free_at_peak = 0;  // largest cached block then
  uint64_t final_reserved = 0, final_allocated = 0;
  uint64_t failed_requests = 0;  // allocations that raised OOM
  std::optional<Oom> first_oom;
};

// Everything the replay of one device needs, read from the trace once.
struct Plan {
  analysis::DeviceRef device;
  events::DeviceId event_device;     // the device as its events name it
  AllocConf recorded;                // the settings the trace was recorded under
  std::optional<uint64_t> capacity;  // recorded (or inferred, see capacity_source); none: unknown
  // Where the capacity comes from: the device total an oom event reported (a capacity limit
  // such as TL_HOST_CAPACITY shows there, not in the device's row), else the device's
  // recorded capacity, else (snapshots) the reserved + free memory at PyTorch's OOM.
  std::string capacity_source;
  uint64_t oom_device_total = 0;
  std::vector<BlockRequest> blocks;
  std::vector<Request> requests;
  // Recorded segment addresses, to hand out again: (index of the request they precede, base).
  std::vector<std::pair<uint32_t, uint64_t>> addresses;
  std::vector<InitialSegment> initial;    // imported snapshots: the state before the trace
  std::vector<uint32_t> initial_blocks;   // blocks live before the trace (by address)
  std::vector<uint32_t> initial_pending;  // ... of which freed, pending completion
  // What the settings read from the trace were corrected by ("" when nothing): a trace that
  // maps pages ran with expandable segments, whatever allocator_settings says (a program that
  // set TL_ALLOC_CONF itself, after the recorder started).
  std::string settings_note;
  uint64_t maps = 0;           // segment_map events
  uint64_t unknown_frees = 0;  // frees of blocks allocated before the recording: skipped
  uint64_t events = 0;         // the device's allocator events read
  bool imported = false;
  Figures recorded_figures;  // what the trace says happened
};

// Builds the plans of `devices` (every device with allocator events when empty) in one pass
// over the trace's events. Throws SettingsError when none has an allocation.
std::vector<Plan> build_plans(const analysis::Trace& trace,
                              const std::vector<int64_t>& devices = {});

// Note [Rederived start]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Most snapshots begin after warm-up: their segments were reserved before the window by
// steps the snapshot does not hold, under the settings the program ran with. Rebuilding those
// segments at their addresses (Start::recorded) is exact under the recorded settings, but
// under others it keeps the recorded answer: a default-settings window replayed under
// expandable segments still holds the default's segments. Start::rederived derives the state
// before the window under the settings asked instead: a fresh allocator allocates the blocks
// live before the window (in address order, at their requested sizes, those pending free then
// freed), and the window replays from there, its first step reserving what the program's
// warm-up would have. Start::automatic rebuilds the recorded state under the recorded settings
// and rederives it under any other. (A warm-up pass of the window before the measured one
// would reserve more than the recordings do: 2% more on a 2.7B model's training step.)
enum class Start : uint8_t { automatic, recorded, rederived };

struct Settings {
  AllocConf conf;
  Start start = Start::automatic;
  std::optional<uint64_t> capacity;       // none: the plan's, else unlimited
  std::optional<double> memory_fraction;  // set_per_process_memory_fraction
  std::string label;                      // for tables ("expandable_segments:True")
};

// A replayed allocator event, for writing the replayed trace: `event` as the allocator emitted
// it (ts_ns 0) and the recorded request it answered.
using EventFn = std::function<void(const events::Event& event, const Request& during)>;

struct Result {
  Figures figures;
  uint64_t capacity = 0;   // the capacity the device had (kUnlimited: none)
  uint64_t unplaced = 0;   // blocks of the starting state not rebuilt at their address
  bool rederived = false;  // the state before the window was rederived (Note [Rederived start])
  // With an EventFn: each block's address in the replay (0: never allocated), by block index.
  std::vector<uint64_t> addresses;
};
inline constexpr uint64_t kUnlimited = uint64_t{1} << 50;  // 1 PiB

// Whether `settings` replay `plan` from a rederived start (Note [Rederived start]): the plan
// began mid-run, and the settings ask for it or differ from the recorded ones.
bool rederives(const Plan& plan, const Settings& settings);

// Replays one plan. `on_event`, when given, sees every allocator event in order (a rederived
// start's under the starting state's request, seq 0). Thread-safe:
// plans are read only, so settings replay in parallel.
Result run(const Plan& plan, const Settings& settings, const EventFn& on_event = {},
           const analysis::Trace* trace_for_sites = nullptr);

// The default grid of `tidemark replay --sweep` (24 settings): expandable segments off/on x
// max_split_size_mb unset/64/256 x roundup_power2_divisions 0/4 x garbage_collection_threshold
// off/0.8 (with a memory fraction of 1, as PyTorch collects only under one).
std::vector<Settings> default_sweep();
// Replays every setting on `threads` threads (0: the machine's cores); results in order.
std::vector<Result> sweep(const Plan& plan, const std::vector<Settings>& settings,
                          unsigned threads = 0);

// The `allocator-settings` finding, the best setting of default_sweep() with the bytes the
// replay saves (Note [Allocator-settings finding]), is profiler/diagnose/allocator_settings.cpp:
// the diagnoses' library sits above this one and calls it like any other caller.

// Writes `trace` replayed under `settings` to `output` (finalized): every recorded event kept,
// the allocator events of the plans' devices replaced by the replay's, at the times of the
// requests that caused them; storage and category events follow their block's new address.
void write_replayed_trace(const analysis::Trace& trace, const std::vector<Plan>& plans,
                          const Settings& settings, const std::string& output);

}  // namespace tidemark::replay
