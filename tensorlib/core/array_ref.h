// IntArrayRef: a non-owning view of sizes or strides that accepts `{2, 3}`, a vector or one
// integer, as c10::IntArrayRef does.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <vector>

namespace tl {

template <typename T>
class ArrayRef {
 public:
  ArrayRef() = default;
  ArrayRef(const T& one) : data_(&one), size_(1) {}  // NOLINT(google-explicit-constructor)
  ArrayRef(const T* data, size_t n) : data_(data), size_(n) {}
  // Like c10::ArrayRef: valid for the full-expression that created the list (a call's args).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
  ArrayRef(std::initializer_list<T> list)  // NOLINT(google-explicit-constructor)
      : data_(list.begin()), size_(list.size()) {}
#pragma GCC diagnostic pop
  ArrayRef(const std::vector<T>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT
  ArrayRef(std::span<const T> s) : data_(s.data()), size_(s.size()) {}     // NOLINT

  const T* begin() const {
    return data_;
  }
  const T* end() const {
    return data_ + size_;
  }
  const T* data() const {
    return data_;
  }
  size_t size() const {
    return size_;
  }
  bool empty() const {
    return size_ == 0;
  }
  const T& operator[](size_t i) const {
    return data_[i];
  }
  const T& back() const {
    return data_[size_ - 1];
  }
  std::vector<T> vec() const {
    return std::vector<T>(begin(), end());
  }
  operator std::span<const T>() const {
    return {data_, size_};
  }  // NOLINT

  friend bool operator==(ArrayRef a, ArrayRef b) {
    if (a.size_ != b.size_) return false;
    for (size_t i = 0; i < a.size_; ++i)
      if (!(a.data_[i] == b.data_[i])) return false;
    return true;
  }

 private:
  const T* data_ = nullptr;
  size_t size_ = 0;
};

using IntArrayRef = ArrayRef<int64_t>;

// Prints "[3, 4]".
inline std::ostream& operator<<(std::ostream& os, IntArrayRef a) {
  os << '[';
  for (size_t i = 0; i < a.size(); ++i) os << (i ? ", " : "") << a[i];
  return os << ']';
}

}  // namespace tl
