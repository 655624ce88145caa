// ops_checks.h — argument checks and backend dispatch shared by the zt::ops entry points
// (ops*.cpp; private to csrc/kernels). A failed check is a programming error: ZT_CHECK.
#pragma once
#include <string>
#include <tuple>
#include <utility>

#include "cpu_kernels.h"
#include "zerotrain/core/cpu_stream.h"
#include "zerotrain/kernels/ops.h"
#if defined(ZT_WITH_CUDA)
#include "zerotrain/kernels/cuda_ops.h"
#define ZT_ON_CUDA(...) __VA_ARGS__
#else
#define ZT_ON_CUDA(...) ZT_CHECK(false, "a CUDA stream was passed to a kernel, but the CUDA backend is not built")
#endif

namespace zt::ops::detail {

inline std::string where(const char* op, const char* name) { return std::string("ops::") + op + ": " + name; }

// t lives on the stream's device and has storage when it is not empty.
inline void check_tensor(const Stream& s, const TensorView& t, const char* op, const char* name) {
  ZT_CHECK(t.device == s.kind(), where(op, name) + " is on " + device_kind_name(t.device) + " but the stream is " +
                                     device_kind_name(s.kind()));
  ZT_CHECK(t.numel() >= 0, where(op, name) + " has a negative shape " + t.shape_string());
  ZT_CHECK(t.numel() == 0 || t.data != nullptr, where(op, name) + " has no storage");
}
inline void check_numel(const TensorView& t, int64_t n, const char* op, const char* name) {
  ZT_CHECK(t.numel() == n, where(op, name) + " has shape " + t.shape_string() + ", expected " + std::to_string(n) +
                               " elements");
}
inline void check_dtype(const TensorView& t, DType d, const char* op, const char* name) {
  ZT_CHECK(t.dtype == d, where(op, name) + " is " + dtype_name(t.dtype) + ", expected " + dtype_name(d));
}
inline void check_same(const TensorView& t, const TensorView& ref, const char* op, const char* name) {
  ZT_CHECK(t.dtype == ref.dtype, where(op, name) + " is " + dtype_name(t.dtype) + " but the op's dtype is " +
                                     dtype_name(ref.dtype));
}
// t holds a whole number of rows of `cols` elements.
inline void check_rows(const TensorView& t, int64_t cols, const char* op, const char* name) {
  ZT_CHECK(cols > 0 ? t.numel() % cols == 0 : t.numel() == 0,
           where(op, name) + " has shape " + t.shape_string() + ", not a whole number of rows of " +
               std::to_string(cols));
}
inline void check_ptr(const void* p, int64_t n, const char* op, const char* name) {
  ZT_CHECK(n == 0 || p != nullptr, where(op, name) + " is null");
}
// a and b: same device as the stream, same dtype, same element count.
inline void check_pair(const Stream& s, const char* op, const TensorView& a, const char* an, const TensorView& b,
                       const char* bn) {
  check_tensor(s, a, op, an);
  check_tensor(s, b, op, bn);
  check_same(b, a, op, bn);
  check_numel(b, a.numel(), op, bn);
}

}  // namespace zt::ops::detail
