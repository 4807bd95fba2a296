// Devices, streams, events and the host waits on them (tensorlib/cuda/cuda.h).
#include <array>
#include <atomic>
#include <mutex>
#include <utility>

#include "tensorlib/core/memory.h"
#include "tensorlib/cuda/cuda.h"
#include "tensorlib/cuda/cuda_internal.h"
#include "tensorlib/memory/caching_allocator.h"

namespace tl::cuda {

namespace ev = tidemark::events;

namespace detail {

void check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  (void)cudaGetLastError();
  TL_CHECK(false, "CUDA error: ", cudaGetErrorString(err), " (", cudaGetErrorName(err), ") in ",
           what);
}

DeviceGuard::DeviceGuard(int index) {
  TL_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != index) TL_CUDA_CHECK(cudaSetDevice(index));
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
}

void emit_sync(Device device, ev::SyncKind kind, uint64_t stream, uint64_t t0_ns) {
  if (!ev::enabled()) return;
  ev::Event e;
  e.kind = ev::Kind::sync;
  e.device = device.event_id();
  e.ts_ns = ev::now_ns();
  e.sync = {kind, stream, e.ts_ns - t0_ns};
  ev::dispatch(e);
}

void emit_memcpy(Device device, ev::CopyDirection dir, uint64_t bytes, uint64_t stream, bool pinned,
                 bool async) {
  if (!ev::enabled()) return;
  ev::Event e;
  e.kind = ev::Kind::memcpy;
  e.device = device.event_id();
  e.memcpy = {dir, bytes, stream, pinned, async};
  ev::dispatch(e);
}

bool is_pinned_ptr(const void* ptr) {
  if (ptr == nullptr) return false;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

namespace {
constexpr int kMaxDevices = 64;
constexpr int kStreamsPerPool = 32;

thread_local std::array<uint64_t, kMaxDevices> t_current_stream{};  // 0: the default stream

struct StreamPool {
  std::once_flag once;
  std::array<uint64_t, kStreamsPerPool> streams{};
  std::atomic<uint32_t> next{0};
};
// Never destroyed: streams outlive static tensors and are not destroyed at exit (the driver
// may already be gone then).
std::array<StreamPool, kMaxDevices>& pools() {
  static auto* p = new std::array<StreamPool, kMaxDevices>;
  return *p;
}
}  // namespace

uint64_t current_stream_id(int index) {
  TL_CHECK(index >= 0 && index < kMaxDevices, "CUDA device index out of range: ", index);
  return t_current_stream[static_cast<size_t>(index)];
}

int resolve(Device device) {
  TL_CHECK(device.is_cuda(), "expected a CUDA device, got ", device);
  const int index = device.has_index() ? device.index() : current_device();
  TL_CHECK(index < device_count(), "CUDA device ", index, " does not exist (", device_count(),
           " device(s))");
  return index;
}

}  // namespace detail

using detail::resolve;

int device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      n = 0;
    }
    return n;
  }();
  return count;
}

bool is_available() {
  return device_count() > 0;
}

int current_device() {
  int d = 0;
  TL_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

void set_device(int index) {
  TL_CHECK(index >= 0 && index < device_count(), "set_device: no CUDA device ", index);
  TL_CUDA_CHECK(cudaSetDevice(index));
}

void synchronize(Device device) {
  const int index = resolve(device);
  detail::DeviceGuard guard(index);
  const uint64_t t0 = ev::enabled() ? ev::now_ns() : 0;
  TL_CUDA_CHECK(cudaDeviceSynchronize());
  detail::emit_sync(Device(kCUDA, static_cast<Device::Index>(index)), ev::SyncKind::device, 0, t0);
}

// ---- Stream ------------------------------------------------------------------------------

Stream::Stream(Device device)
    : device_(Device(kCUDA, static_cast<Device::Index>(resolve(device)))), id_(0) {}

bool Stream::query() const {
  detail::DeviceGuard guard(device_.index());
  cudaError_t err = cudaStreamQuery(static_cast<cudaStream_t>(native()));
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  TL_CUDA_CHECK(err);
  return true;
}

void Stream::synchronize() const {
  detail::DeviceGuard guard(device_.index());
  const uint64_t t0 = ev::enabled() ? ev::now_ns() : 0;
  TL_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(native())));
  detail::emit_sync(device_, ev::SyncKind::stream, id_, t0);
}

void Stream::wait_stream(const Stream& other) const {
  if (other == *this) return;
  Event e(false);
  e.record(other);
  e.wait(*this);
}

Stream current_stream(Device device) {
  const int index = resolve(device);
  return Stream(Device(kCUDA, static_cast<Device::Index>(index)), detail::current_stream_id(index));
}

void set_current_stream(const Stream& stream) {
  const int index = resolve(stream.device());
  detail::t_current_stream[static_cast<size_t>(index)] = stream.id();
}

Stream default_stream(Device device) {
  return Stream(device);
}

Stream get_stream_from_pool(Device device) {
  const int index = resolve(device);
  detail::StreamPool& pool = detail::pools()[static_cast<size_t>(index)];
  std::call_once(pool.once, [&] {
    detail::DeviceGuard guard(index);
    for (uint64_t& s : pool.streams) {
      cudaStream_t st = nullptr;
      TL_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
      s = reinterpret_cast<uint64_t>(st);
    }
  });
  const uint32_t k = pool.next.fetch_add(1) % detail::kStreamsPerPool;
  return Stream(Device(kCUDA, static_cast<Device::Index>(index)), pool.streams[k]);
}

StreamGuard::StreamGuard(const Stream& stream)
    : previous_(current_stream(stream.device())), previous_device_(current_device()) {
  set_device(stream.device().index());
  set_current_stream(stream);
}

StreamGuard::~StreamGuard() {
  detail::t_current_stream[static_cast<size_t>(previous_.device().index())] = previous_.id();
  (void)cudaSetDevice(previous_device_);
}

// ---- Event -------------------------------------------------------------------------------

Event::Event(bool enable_timing) : timing_(enable_timing) {}

Event::~Event() {
  if (event_ != 0) (void)cudaEventDestroy(reinterpret_cast<cudaEvent_t>(event_));
}

Event::Event(Event&& other) noexcept
    : event_(std::exchange(other.event_, 0)),
      device_(other.device_),
      stream_(other.stream_),
      timing_(other.timing_) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_ != 0) (void)cudaEventDestroy(reinterpret_cast<cudaEvent_t>(event_));
    event_ = std::exchange(other.event_, 0);
    device_ = other.device_;
    stream_ = other.stream_;
    timing_ = other.timing_;
  }
  return *this;
}

void Event::create(int device) {
  detail::DeviceGuard guard(device);
  cudaEvent_t e = nullptr;
  TL_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing_ ? cudaEventDefault : cudaEventDisableTiming));
  event_ = reinterpret_cast<uint64_t>(e);
  device_ = device;
}

void Event::record() {
  record(current_stream(Device(kCUDA)));
}

void Event::record(const Stream& stream) {
  const int index = stream.device().index();
  if (event_ == 0) create(index);
  TL_CHECK(device_ == index, "Event::record: the event belongs to cuda:", device_,
           ", the stream to ", stream.device());
  detail::DeviceGuard guard(index);
  TL_CUDA_CHECK(cudaEventRecord(reinterpret_cast<cudaEvent_t>(event_),
                                static_cast<cudaStream_t>(stream.native())));
  stream_ = stream.id();
}

bool Event::query() const {
  if (event_ == 0) return true;
  cudaError_t err = cudaEventQuery(reinterpret_cast<cudaEvent_t>(event_));
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  TL_CUDA_CHECK(err);
  return true;
}

void Event::synchronize() const {
  if (event_ == 0) return;
  const uint64_t t0 = ev::enabled() ? ev::now_ns() : 0;
  TL_CUDA_CHECK(cudaEventSynchronize(reinterpret_cast<cudaEvent_t>(event_)));
  detail::emit_sync(Device(kCUDA, static_cast<Device::Index>(device_)), ev::SyncKind::event,
                    stream_, t0);
}

float Event::elapsed_time(const Event& end) const {
  TL_CHECK(event_ != 0 && end.event_ != 0, "elapsed_time: both events must be recorded");
  TL_CHECK(timing_ && end.timing_, "elapsed_time: both events need enable_timing");
  float ms = 0;
  TL_CUDA_CHECK(cudaEventElapsedTime(&ms, reinterpret_cast<cudaEvent_t>(event_),
                                     reinterpret_cast<cudaEvent_t>(end.event_)));
  return ms;
}

void Event::wait(const Stream& stream) const {
  if (event_ == 0) return;
  detail::DeviceGuard guard(stream.device().index());
  TL_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream.native()),
                                    reinterpret_cast<cudaEvent_t>(event_), 0));
}

void record_stream(const Tensor& tensor, const Stream& stream) {
  TL_CHECK(tensor.defined() && tensor.is_cuda(), "record_stream: expected a CUDA tensor");
  TL_CHECK(tensor.device().resolved() == stream.device(), "record_stream: the tensor is on ",
           tensor.device(), ", the stream on ", stream.device());
  const memory::DataPtr& p = tensor.storage()->data_ptr();
  if (p.owner == nullptr) return;  // from_blob memory: not the allocator's
  memory::caching_allocator(stream.device())->record_stream(p, stream.id());
}

}  // namespace tl::cuda
