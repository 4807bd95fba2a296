// TensorOptions as in libtorch: `tl::zeros({2, 3}, tl::kFloat64)`,
// `tl::ones({4}, tl::TensorOptions().dtype(tl::kInt64).device("cpu"))`.
#pragma once

#include <optional>

#include "tensorlib/base/device.h"
#include "tensorlib/core/dtype.h"

namespace tl {

class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(ScalarType dtype) : dtype_(dtype) {}         // NOLINT(google-explicit-constructor)
  TensorOptions(Device device) : device_(device) {}          // NOLINT(google-explicit-constructor)
  TensorOptions(DeviceType type) : device_(Device(type)) {}  // NOLINT(google-explicit-constructor)
  TensorOptions(const char* device) : device_(Device(device)) {}  // NOLINT

  TensorOptions dtype(ScalarType d) const {
    auto o = *this;
    o.dtype_ = d;
    return o;
  }
  TensorOptions device(Device d) const {
    auto o = *this;
    o.device_ = d;
    return o;
  }
  TensorOptions requires_grad(bool r) const {
    auto o = *this;
    o.requires_grad_ = r;
    return o;
  }

  ScalarType dtype() const { return dtype_.value_or(get_default_dtype()); }
  bool has_dtype() const { return dtype_.has_value(); }
  std::optional<ScalarType> dtype_opt() const { return dtype_; }
  Device device() const { return device_; }
  bool requires_grad() const { return requires_grad_; }

 private:
  std::optional<ScalarType> dtype_;
  Device device_{DeviceType::CPU};
  bool requires_grad_ = false;
};

inline TensorOptions dtype(ScalarType d) {
  return TensorOptions().dtype(d);
}
inline TensorOptions device(Device d) {
  return TensorOptions().device(d);
}

}  // namespace tl
