// ops_checks.h — argument checks shared by the zt::ops entry points (ops*.cpp; private to
// csrc/kernels), which then call dispatch::name. A failed check is a programming error: ZT_CHECK.
#pragma once
#include <string>
#include <tuple>
#include <utility>

#include "zerotrain/kernels/dispatch.h"
#include "zerotrain/kernels/ops.h"

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
// t: on the stream's device, n elements, the dtype of ref.
inline void check_like(const Stream& s, const TensorView& t, int64_t n, const TensorView& ref, const char* op,
                       const char* name) {
  check_tensor(s, t, op, name);
  check_numel(t, n, op, name);
  check_same(t, ref, op, name);
}
// A parameter gradient: t's dtype is ref's (the op's compute dtype) or fp32 (gradients
// accumulated straight into fp32).
inline void check_grad_dtype(const TensorView& t, const TensorView& ref, const char* op, const char* name) {
  ZT_CHECK(t.dtype == ref.dtype || t.dtype == DType::F32, where(op, name) + " is " + dtype_name(t.dtype) +
                                                              ", expected the op's dtype " + dtype_name(ref.dtype) +
                                                              " or fp32");
}
// check_like for a parameter gradient (check_grad_dtype's dtypes).
inline void check_grad(const Stream& s, const TensorView& t, int64_t n, const TensorView& ref, const char* op,
                       const char* name) {
  check_tensor(s, t, op, name);
  check_numel(t, n, op, name);
  check_grad_dtype(t, ref, op, name);
}
// t: on the stream's device, n elements, F32 (saved statistics, probabilities, losses).
inline void check_f32(const Stream& s, const TensorView& t, int64_t n, const char* op, const char* name) {
  check_tensor(s, t, op, name);
  check_numel(t, n, op, name);
  check_dtype(t, DType::F32, op, name);
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
