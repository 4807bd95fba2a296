#include "interpose/callbacks.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "interpose/cupti_api.h"
#include "profiler/events/events.h"
#include "profiler/record/recorder.h"

namespace tidemark::interpose::callbacks {

namespace ev = tidemark::events;

// ---- The call-site ring (Note [Call sites]) ----------------------------------------------------

namespace {
size_t index_size(size_t slots) {
  size_t n = 2;
  while (n < 2 * slots) n *= 2;
  return n;
}
}  // namespace

CallSites::CallSites(size_t capacity, int stack_depth)
    : slots_(std::max<size_t>(capacity, 1)),
      index_(index_size(slots_.size()), 0),
      ips_(slots_.size() * static_cast<size_t>(std::clamp(stack_depth, 0, record::kMaxStackDepth))),
      depth_(std::clamp(stack_depth, 0, record::kMaxStackDepth)) {}

// Fibonacci hashing: consecutive ids spread over the index.
size_t CallSites::home(uint32_t correlation) const noexcept {
  return static_cast<size_t>((uint64_t{correlation} * 0x9E3779B97F4A7C15ull) >> 32) &
         (index_.size() - 1);
}

size_t CallSites::index_of(uint32_t correlation) const noexcept {
  const size_t mask = index_.size() - 1;
  for (size_t e = home(correlation);; e = (e + 1) & mask) {
    if (index_[e] == 0) return static_cast<size_t>(-1);
    if (slots_[index_[e] - 1].correlation == correlation) return e;
  }
}

CallSites::Slot* CallSites::slot_of(uint32_t correlation) noexcept {
  const size_t e = index_of(correlation);
  return e == static_cast<size_t>(-1) ? nullptr : &slots_[index_[e] - 1];
}

void CallSites::unindex(size_t entry) noexcept {
  const size_t mask = index_.size() - 1;
  size_t hole = entry;
  index_[hole] = 0;
  for (size_t e = (hole + 1) & mask; index_[e] != 0; e = (e + 1) & mask) {
    // An entry may move back into the hole unless its home lies cyclically in (hole, e].
    const size_t h = home(slots_[index_[e] - 1].correlation);
    const bool stays = hole <= e ? (hole < h && h <= e) : (hole < h || h <= e);
    if (stays) continue;
    index_[hole] = index_[e];
    index_[e] = 0;
    hole = e;
  }
}

void CallSites::put(uint32_t correlation, const CallSite& site) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (const size_t e = index_of(correlation); e != static_cast<size_t>(-1)) {  // filed again
    slots_[index_[e] - 1].live = false;
    unindex(e);
  }
  const size_t i = next_;
  next_ = (next_ + 1) % slots_.size();
  Slot& slot = slots_[i];
  if (slot.live) {  // the call filed `capacity` calls ago
    aged_out_ += slot.used ? 0 : 1;
    unindex(index_of(slot.correlation));
  }
  slot = {true,        false,       correlation,
          0,           site.thread, site.seq,
          site.domain, site.cbid,   std::clamp(site.n_ips, 0, depth_)};
  if (slot.n_ips > 0)
    std::memcpy(&ips_[i * depth_], site.ips, static_cast<size_t>(slot.n_ips) * sizeof(uint64_t));
  const size_t mask = index_.size() - 1;
  size_t e = home(correlation);
  while (index_[e] != 0) e = (e + 1) & mask;
  index_[e] = static_cast<uint32_t>(i + 1);
}

bool CallSites::find(uint32_t correlation, CallSite* out, uint64_t* seq) noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot* slot = slot_of(correlation);
    if (slot == nullptr) return false;
    slot->used = true;
    out->thread = slot->thread;
    out->domain = slot->domain;
    out->cbid = slot->cbid;
    out->seq = slot->seq;
    out->n_ips = slot->n_ips;
    if (slot->n_ips > 0)
      std::memcpy(out->ips, &ips_[static_cast<size_t>(slot - slots_.data()) * depth_],
                  static_cast<size_t>(slot->n_ips) * sizeof(uint64_t));
    if (slot->seqs_used < kSeqsPerCall) {
      *seq = slot->seq + slot->seqs_used++;
      return true;
    }
  }
  *seq = ev::reserve_seq(1);  // more events than reserved: after everything so far
  return true;
}

void CallSites::drop(uint32_t correlation) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (const size_t e = index_of(correlation); e != static_cast<size_t>(-1)) {
    slots_[index_[e] - 1].live = false;
    unindex(e);
  }
}

size_t CallSites::size() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<size_t>(
      std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.live; }));
}

uint64_t CallSites::aged_out() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return aged_out_;
}

// ---- The calls --------------------------------------------------------------------------------

namespace {

enum class Role : uint8_t {
  none,
  call,            // its activity records get the call's stack
  device_reset,    // also flushes CUPTI's buffers first
  vmm_reserve,     // cuMemAddressReserve: a virtual range (no memory)
  vmm_free_range,  // cuMemAddressFree
  vmm_create,      // cuMemCreate: physical memory, not yet mapped anywhere
  vmm_release,     // cuMemRelease
  vmm_map,         // cuMemMap: segment_map
  vmm_unmap,       // cuMemUnmap: segment_unmap
};

struct Traced {
  CUpti_CallbackDomain domain;
  CUpti_CallbackId cbid;
  Role role;
};

constexpr CUpti_CallbackDomain kRt = CUPTI_CB_DOMAIN_RUNTIME_API;
constexpr CUpti_CallbackDomain kDrv = CUPTI_CB_DOMAIN_DRIVER_API;

// The calls whose records the trace keeps (docs/interpose.md): memory, pinned memory, pools,
// synchronizations, copies (blocking ones are implicit syncs), and the driver calls they reach (or
// that a program such as PyTorch makes directly).
constexpr Traced kTraced[] = {
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaHostRegister_v4000, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaHostUnregister_v4000, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaThreadSynchronize_v3020, Role::call},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020, Role::device_reset},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemcpy, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize, Role::call},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, Role::vmm_reserve},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree, Role::vmm_free_range},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemCreate, Role::vmm_create},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemRelease, Role::vmm_release},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemMap, Role::vmm_map},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, Role::vmm_unmap},
};

// Note [Every copy has a call site]
// Besides the calls listed above, every copy is a call whose records get its stack: the
// runtime's cudaMemcpy* and the driver's cuMemcpy* in all their forms (2D, 3D, arrays, symbols,
// peers, batches, per-thread default streams, the _v2 driver entry points), which differ
// between CUDA versions. enable() finds them by name (cuptiGetCallbackName) among the ids this
// build's headers know, so no version's list is written down here. Roles are looked up by id in
// a table per domain, as every traced call's callback asks.
struct RoleTable {
  std::array<std::atomic<Role>, CUPTI_RUNTIME_TRACE_CBID_SIZE> runtime;
  std::array<std::atomic<Role>, CUPTI_DRIVER_TRACE_CBID_SIZE> driver;
  std::atomic<Role>* find(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    if (domain == kRt && cbid < runtime.size()) return &runtime[cbid];
    if (domain == kDrv && cbid < driver.size()) return &driver[cbid];
    return nullptr;
  }
};

RoleTable& roles() {
  static RoleTable* table = [] {
    auto* t = new RoleTable;  // never freed: callbacks may run until the process ends
    for (auto& r : t->runtime) r.store(Role::none, std::memory_order_relaxed);
    for (auto& r : t->driver) r.store(Role::none, std::memory_order_relaxed);
    for (const Traced& tr : kTraced)
      if (std::atomic<Role>* r = t->find(tr.domain, tr.cbid))
        r->store(tr.role, std::memory_order_relaxed);
    return t;
  }();
  return *table;
}

Role role_of(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  const std::atomic<Role>* r = roles().find(domain, cbid);
  return r ? r->load(std::memory_order_relaxed) : Role::none;
}

// Runtime calls reach these through nested driver calls: the driver call's site is the
// runtime call's.
constexpr uint64_t kNestedSlices = 4;

struct Mapping {
  uint64_t size;
  uint64_t segment;  // the reserved range holding it (its start)
  ev::DeviceId device;
};

struct AddressRange {
  uint64_t lo, hi;
};

struct State {
  explicit State(int depth) : sites(kCallSites, depth) {}
  CallSites sites;
  void (*on_device_reset)() = nullptr;
  std::vector<AddressRange> cuda_code;  // CUDA's, CUPTI's and our library's mappings
  std::atomic<uint64_t> calls{0}, mappings{0};
  std::mutex vmm_mu;
  std::map<uint64_t, uint64_t> reservations;           // start -> size
  std::unordered_map<uint64_t, ev::DeviceId> handles;  // cuMemCreate handle -> location
  std::map<uint64_t, Mapping> mapped;                  // start -> mapping
};

std::atomic<State*> g_state{nullptr};

// The runtime call this thread is inside (its call site), for nested driver calls.
struct InRuntime {
  int depth = 0;
  uint64_t nested = 0;
  CallSite site;
};
thread_local InRuntime t_runtime;

bool is_cuda_library(std::string_view path) {
  std::string_view name =
      path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1);
  for (std::string_view prefix :
       {"libcuda.so", "libcupti.so", "libcudart.so", "libnvperf", "libtidemark_inject.so"})
    if (name.substr(0, prefix.size()) == prefix) return true;
  return false;
}

// Frames of the CUDA libraries at the top of a stack captured in a callback (libcupti calling
// us, libcuda, a shared libcudart) say nothing about the program: drop them. A libcudart linked
// statically into the program (nvcc's default) stays, as the `cudaMalloc` frame a user expects.
int drop_cuda_frames(const State& s, uint64_t* ips, int n) {
  int first = 0;
  auto in_cuda = [&](uint64_t ip) {
    for (const AddressRange& r : s.cuda_code)
      if (ip >= r.lo && ip < r.hi) return true;
    return false;
  };
  while (first < n && in_cuda(ips[first])) ++first;
  if (first > 0) std::memmove(ips, ips + first, static_cast<size_t>(n - first) * sizeof(uint64_t));
  return n - first;
}

void emit(ev::Event& e, const CallSite& site, uint64_t seq) {
  if (ev::enabled()) ev::dispatch_stamped(e, site.thread, seq, site.stack());
}

// At the exit of a successful virtual-memory call, on the calling thread.
void vmm_exit(State& s, Role role, const CUpti_CallbackData& cb) {
  const void* params = cb.functionParams;
  if (!params) return;
  ev::Event e;
  bool have_event = false;
  auto set_event = [&](ev::Kind kind, const Mapping& m, uint64_t ptr, uint64_t size) {
    e.kind = kind;
    e.device = m.device;
    e.block.addr = ptr;
    e.block.size = size;
    e.block.segment = m.segment;
    have_event = true;
  };
  {
    std::lock_guard<std::mutex> lock(s.vmm_mu);
    switch (role) {
      case Role::vmm_reserve: {
        const auto& p = *static_cast<const cuMemAddressReserve_params*>(params);
        if (p.ptr) s.reservations[*p.ptr] = p.size;
        return;
      }
      case Role::vmm_free_range:
        s.reservations.erase(static_cast<const cuMemAddressFree_params*>(params)->ptr);
        return;
      case Role::vmm_create: {
        const auto& p = *static_cast<const cuMemCreate_params*>(params);
        if (!p.handle || !p.prop) return;
        const CUmemLocation& at = p.prop->location;
        s.handles[*p.handle] = at.type == CU_MEM_LOCATION_TYPE_DEVICE
                                   ? ev::DeviceId{ev::DeviceType::cuda, static_cast<int8_t>(at.id)}
                                   : ev::DeviceId{};
        return;
      }
      case Role::vmm_release:
        s.handles.erase(static_cast<const cuMemRelease_params*>(params)->handle);
        return;
      case Role::vmm_map: {
        const auto& p = *static_cast<const cuMemMap_params*>(params);
        Mapping m{p.size, p.ptr, ev::DeviceId{ev::DeviceType::cuda, 0}};
        // A handle created before recording started: cuda:0 (a callback may not ask CUDA).
        if (auto h = s.handles.find(p.handle); h != s.handles.end()) m.device = h->second;
        if (auto r = s.reservations.upper_bound(p.ptr); r != s.reservations.begin()) {
          --r;
          if (p.ptr < r->first + r->second) m.segment = r->first;
        }
        s.mapped[p.ptr] = m;
        set_event(ev::Kind::segment_map, m, p.ptr, p.size);
        break;
      }
      case Role::vmm_unmap: {
        const auto& p = *static_cast<const cuMemUnmap_params*>(params);
        Mapping m{p.size, p.ptr, ev::DeviceId{ev::DeviceType::cuda, 0}};
        auto it = s.mapped.upper_bound(p.ptr);
        if (it != s.mapped.begin() && std::prev(it)->first + std::prev(it)->second.size > p.ptr)
          --it;
        if (it != s.mapped.end() && it->first < p.ptr + p.size) m = it->second;
        while (it != s.mapped.end() && it->first < p.ptr + p.size) it = s.mapped.erase(it);
        set_event(ev::Kind::segment_unmap, m, p.ptr, p.size);
        break;
      }
      default:
        return;
    }
  }
  if (!have_event) return;
  e.block.pool = ev::Pool::large;
  CallSite site;
  uint64_t seq = 0;
  if (!s.sites.find(cb.correlationId, &site, &seq)) {
    site.thread = ev::current_thread_id();
    site.n_ips = 0;
    seq = ev::reserve_seq(1);
  }
  s.mappings.fetch_add(1, std::memory_order_relaxed);
  emit(e, site, seq);
}

}  // namespace

// Note [Call sites]. The stack is captured here, in this function's own body, so that the
// frames to skip are exactly this one (and CUDA's, by address, above it).
void CUPTIAPI on_api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  State* s = g_state.load(std::memory_order_acquire);
  if (!s || !data || (domain != kRt && domain != kDrv)) return;
  const Role role = role_of(domain, cbid);
  if (role == Role::none) return;
  const auto& cb = *static_cast<const CUpti_CallbackData*>(data);
  const bool runtime = domain == kRt;
  try {
    if (cb.callbackSite == CUPTI_API_ENTER) {
      if (role == Role::device_reset && s->on_device_reset) s->on_device_reset();
      if (!runtime && t_runtime.depth > 0) {
        CallSite site = t_runtime.site;
        site.domain = domain;
        site.cbid = cbid;
        site.seq = ++t_runtime.nested < kNestedSlices
                       ? t_runtime.site.seq + t_runtime.nested * kSeqsPerCall
                       : ev::reserve_seq(kSeqsPerCall);
        s->sites.put(cb.correlationId, site);
        return;
      }
      CallSite local;
      CallSite& site = runtime ? t_runtime.site : local;
      site.thread = ev::current_thread_id();
      site.seq = ev::reserve_seq(runtime ? kSeqsPerCall * kNestedSlices : kSeqsPerCall);
      site.domain = domain;
      site.cbid = cbid;
      site.n_ips = 0;
      if (const int depth = s->sites.stack_depth(); depth > 0) {
        // Room for CUDA's frames above the program's.
        site.n_ips = record::capture_stack(site.ips, std::min(depth + 24, record::kMaxStackDepth),
                                           /*skip=*/1);
        site.n_ips = drop_cuda_frames(*s, site.ips, site.n_ips);
      }
      s->sites.put(cb.correlationId, site);
      s->calls.fetch_add(1, std::memory_order_relaxed);
      if (runtime) {
        ++t_runtime.depth;
        t_runtime.nested = 0;
      }
      return;
    }
    if (cb.callbackSite != CUPTI_API_EXIT) return;
    if (runtime && t_runtime.depth > 0) --t_runtime.depth;
    const int status =
        cb.functionReturnValue ? *static_cast<const int*>(cb.functionReturnValue) : 0;
    if (status != 0) {  // failed: CUPTI records nothing for it
      s->sites.drop(cb.correlationId);
      return;
    }
    if (!runtime && role >= Role::vmm_reserve) vmm_exit(*s, role, cb);
  } catch (...) {  // never across CUPTI's C frames
  }
}

void configure(int stack_depth, void (*on_device_reset)()) noexcept {
  try {
    auto* s = new State(stack_depth);
    s->on_device_reset = on_device_reset;
    for (const store::ModuleInfo& m : record::read_modules())
      if (is_cuda_library(m.path)) s->cuda_code.push_back({m.start, m.end});
    // An earlier table stays allocated: a callback may still be reading it.
    g_state.store(s, std::memory_order_release);
  } catch (...) {
  }
}

int enable(const CuptiApi& api, CUpti_SubscriberHandle subscriber) noexcept {
  int enabled = 0;
  for (const Traced& t : kTraced)
    if (api.EnableCallback(1, subscriber, t.domain, t.cbid) == CUPTI_SUCCESS) ++enabled;
  if (!api.GetCallbackName) return enabled;
  // Note [Every copy has a call site].
  RoleTable& table = roles();
  for (const auto& [domain, prefix, size] :
       {std::tuple{kRt, std::string_view("cudaMemcpy"), table.runtime.size()},
        std::tuple{kDrv, std::string_view("cuMemcpy"), table.driver.size()}}) {
    for (CUpti_CallbackId cbid = 1; cbid < size; ++cbid) {
      std::atomic<Role>* role = table.find(domain, cbid);
      const char* name = nullptr;
      if (role->load(std::memory_order_relaxed) != Role::none ||
          api.GetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || !name ||
          std::string_view(name).substr(0, prefix.size()) != prefix)
        continue;
      role->store(Role::call, std::memory_order_relaxed);
      if (api.EnableCallback(1, subscriber, domain, cbid) == CUPTI_SUCCESS) ++enabled;
    }
  }
  return enabled;
}

bool call_site(uint32_t correlation, CallSite* out, uint64_t* seq) noexcept {
  State* s = g_state.load(std::memory_order_acquire);
  return s && correlation != 0 && s->sites.find(correlation, out, seq);
}

bool recorded_by_callback(const CallSite& site) noexcept {
  if (site.domain != kDrv) return false;
  const Role role = role_of(kDrv, site.cbid);
  return role == Role::vmm_map || role == Role::vmm_unmap || role == Role::vmm_create ||
         role == Role::vmm_release;
}

Stats stats() noexcept {
  State* s = g_state.load(std::memory_order_acquire);
  if (!s) return {};
  return {s->calls.load(), s->sites.aged_out(), s->mappings.load()};
}

}  // namespace tidemark::interpose::callbacks
