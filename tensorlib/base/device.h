// Devices as in torch::Device: "cpu", "cuda", "cuda:1".
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "profiler/events/events.h"

namespace tl {

enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };
inline constexpr DeviceType kCPU = DeviceType::CPU;
inline constexpr DeviceType kCUDA = DeviceType::CUDA;

class Device {
 public:
  using Index = int8_t;
  Device(DeviceType type, Index index = -1);  // NOLINT(google-explicit-constructor)
  // Parses "cpu", "cuda", "cuda:N"; throws tl::Error naming the string otherwise.
  Device(std::string_view spec);  // NOLINT(google-explicit-constructor)
  Device(const char* spec) : Device(std::string_view(spec)) {}  // NOLINT

  DeviceType type() const { return type_; }
  Index index() const { return index_; }
  bool has_index() const { return index_ >= 0; }
  bool is_cpu() const { return type_ == DeviceType::CPU; }
  bool is_cuda() const { return type_ == DeviceType::CUDA; }
  std::string str() const;

  // The same device with the index made explicit (cpu -> cpu:0 for bookkeeping).
  Device resolved() const { return Device(type_, index_ < 0 ? Index(0) : index_); }
  tidemark::events::DeviceId event_id() const {
    return {static_cast<tidemark::events::DeviceType>(type_), resolved().index_};
  }

  friend bool operator==(const Device& a, const Device& b) {
    return a.type_ == b.type_ && a.index_ == b.index_;
  }

 private:
  DeviceType type_;
  Index index_;
};

std::ostream& operator<<(std::ostream& os, const Device& d);
std::ostream& operator<<(std::ostream& os, DeviceType t);

}  // namespace tl
