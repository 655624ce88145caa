// tensor.h — a non-owning view: pointer, dtype, shape (row-major, up to 4 dims), device.
// Views never free anything; storage is owned by a DeviceBuffer (allocator.h).
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "zerotrain/core/check.h"
#include "zerotrain/core/dtype.h"

namespace zt {

enum class DeviceKind : uint8_t { CPU = 0, CUDA = 1 };
const char* device_kind_name(DeviceKind k);

struct TensorView {
  static constexpr int kMaxDims = 4;
  void* data = nullptr;
  DType dtype = DType::F32;
  DeviceKind device = DeviceKind::CPU;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};

  TensorView() = default;
  TensorView(void* d, DType t, std::initializer_list<int64_t> dims, DeviceKind dev = DeviceKind::CPU)
      : data(d), dtype(t), device(dev) {
    ZT_CHECK(dims.size() <= kMaxDims, "TensorView supports at most 4 dims");
    for (int64_t s : dims) shape[ndim++] = s;
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  int64_t dim(int i) const { return shape[i < 0 ? ndim + i : i]; }
  template <typename T> T* ptr() const {
    ZT_CHECK(dtype_of<T>::value == dtype, std::string("TensorView dtype is ") + dtype_name(dtype));
    return static_cast<T*>(data);
  }
  // Elements [offset, offset+count) as a 1-D view.
  TensorView slice1d(int64_t offset, int64_t count) const {
    TensorView v(static_cast<char*>(data) + offset * static_cast<int64_t>(dtype_size(dtype)), dtype, {count}, device);
    return v;
  }
  std::string shape_string() const;  // "[4, 16]"
};

}  // namespace zt
