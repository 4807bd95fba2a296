// tl::cuda: devices, streams, events and synchronisation of tensorlib's CUDA backend
// (docs/cuda.md). Mirrors torch.cuda / c10::cuda. No CUDA header is needed to use it: streams
// and events are handed around as their cudaStream_t / cudaEvent_t values cast to integers.
// Every host wait here emits a `sync` event with its kind and measured duration.
#pragma once

#include <cstdint>

#include "tensorlib/base/device.h"
#include "tensorlib/core/tensor.h"

namespace tl::cuda {

/// True when the backend is built, the driver answers and at least one device exists.
bool is_available();
/// Number of CUDA devices (0 without a driver or device; never throws).
int device_count();
/// The current device of this thread (cudaGetDevice) and setting it.
int current_device();
void set_device(int index);
/// Waits for all work on `device` (cudaDeviceSynchronize); emits sync(kind device).
void synchronize(Device device = Device(kCUDA));

class Stream {
 public:
  /// The default (legacy) stream of `device`.
  explicit Stream(Device device = Device(kCUDA));
  Stream(Device device, uint64_t id) : device_(device.resolved()), id_(id) {}

  Device device() const { return device_; }
  /// The cudaStream_t as an integer; 0 is the legacy default stream.
  uint64_t id() const { return id_; }
  void* native() const { return reinterpret_cast<void*>(id_); }

  /// True when all work queued on the stream has finished (cudaStreamQuery).
  bool query() const;
  /// Waits for the stream's work (cudaStreamSynchronize); emits sync(kind stream).
  void synchronize() const;
  /// Makes later work on this stream wait for work queued so far on `other` (an event).
  void wait_stream(const Stream& other) const;

  friend bool operator==(const Stream& a, const Stream& b) {
    return a.device_ == b.device_ && a.id_ == b.id_;
  }

 private:
  Device device_;
  uint64_t id_;
};

/// The current stream of `device` on this thread (the default stream unless a StreamGuard or
/// set_current_stream changed it).
Stream current_stream(Device device = Device(kCUDA));
void set_current_stream(const Stream& stream);
Stream default_stream(Device device = Device(kCUDA));
/// A stream from the device's pool (32 non-blocking streams handed out round-robin, created on
/// first use and never destroyed), as c10::cuda::getStreamFromPool.
Stream get_stream_from_pool(Device device = Device(kCUDA));

/// Makes `stream` the current stream of its device (and its device current) for a scope.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
  int previous_device_;
};

/// A CUDA event (timing enabled), as torch.cuda.Event.
class Event {
 public:
  explicit Event(bool enable_timing = true);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  /// Records the event on `stream` (default: the current stream).
  void record();
  void record(const Stream& stream);
  bool query() const;
  /// Waits for the recorded work; emits sync(kind event).
  void synchronize() const;
  /// Milliseconds between this event and `end` (both recorded and completed).
  float elapsed_time(const Event& end) const;
  /// Makes `stream` wait for this event.
  void wait(const Stream& stream) const;

 private:
  void create(int device);
  uint64_t event_ = 0;  // cudaEvent_t
  int device_ = -1;
  uint64_t stream_ = 0;  // where it was last recorded
  bool timing_;
};

/// Tells the allocator that `stream` uses `tensor`'s memory: when the tensor is freed, its
/// block is reused only after the work queued on `stream` so far has finished
/// (Tensor.record_stream in PyTorch).
void record_stream(const Tensor& tensor, const Stream& stream);

/// dst <- src with an optional non-blocking copy: a host-to-device copy from pinned memory
/// and a device-to-host copy into pinned memory then return without waiting (no `sync`).
void copy_(Tensor& dst, const Tensor& src, bool non_blocking);
/// `t` on `device`, as Tensor::to(device) but with `non_blocking` (see copy_).
Tensor to(const Tensor& t, Device device, bool non_blocking);

/// Statistics of the pinned host memory cache (docs/cuda.md, "Pinned memory").
struct PinnedStats {
  int64_t allocated_bytes = 0;  // in blocks handed to tensors
  int64_t reserved_bytes = 0;   // cudaHostAlloc'd, in use or cached
  int64_t num_host_allocs = 0;  // cudaHostAlloc calls
};
PinnedStats pinned_memory_stats();
/// Frees cached pinned blocks whose copies have finished (cudaFreeHost).
void empty_pinned_cache();

}  // namespace tl::cuda
