#include "tensorlib/base/device.h"

#include <charconv>

#include "tensorlib/base/error.h"

namespace tl {

Device::Device(DeviceType type, Index index) : type_(type), index_(index) {
  TL_CHECK(index >= -1, "device index must be -1 or non-negative, got ", int(index));
  TL_CHECK(type != DeviceType::CPU || index <= 0, "CPU device index must be -1 or 0, got ",
           int(index));
}

Device::Device(std::string_view spec) : type_(DeviceType::CPU), index_(-1) {
  std::string_view kind = spec;
  std::string_view idx;
  if (auto colon = spec.find(':'); colon != std::string_view::npos) {
    kind = spec.substr(0, colon);
    idx = spec.substr(colon + 1);
  }
  if (kind == "cpu") {
    type_ = DeviceType::CPU;
  } else if (kind == "cuda") {
    type_ = DeviceType::CUDA;
  } else {
    TL_CHECK(false, "expected a device string like 'cpu', 'cuda' or 'cuda:1', got '", spec, "'");
  }
  if (spec.find(':') != std::string_view::npos) {
    int v = -1;
    auto [p, ec] = std::from_chars(idx.data(), idx.data() + idx.size(), v);
    TL_CHECK(ec == std::errc() && p == idx.data() + idx.size() && v >= 0 && v < 128,
             "invalid device index in '", spec, "'");
    TL_CHECK(type_ != DeviceType::CPU || v == 0, "CPU device index must be 0, got '", spec, "'");
    index_ = static_cast<Index>(v);
  }
}

std::string Device::str() const {
  std::string s = type_ == DeviceType::CPU ? "cpu" : "cuda";
  if (index_ >= 0 && type_ != DeviceType::CPU) {
    s += ':';  // appended piecewise: `s += ":" + to_string()` trips GCC 12's -Wrestrict at -O3
    s += std::to_string(index_);
  }
  return s;
}

std::ostream& operator<<(std::ostream& os, const Device& d) {
  return os << d.str();
}
std::ostream& operator<<(std::ostream& os, DeviceType t) {
  return os << (t == DeviceType::CPU ? "cpu" : "cuda");
}

}  // namespace tl
