// cpu_kernels.h — helpers shared by the CPU kernels (private to csrc/kernels). The kernels'
// declarations and contract: zerotrain/kernels/cpu_ops.h.
#pragma once
#include <cstdint>

#include "zerotrain/core/check.h"
#include "zerotrain/core/dtype.h"
#include "zerotrain/core/tensor.h"
#include "zerotrain/kernels/cpu_ops.h"

namespace zt::cpu_ops {

// Calls f(T{}) with T the storage type of `t` (float, bf16, fp16).
template <typename F>
void dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(float{}); return;
    case DType::BF16: f(bf16{}); return;
    case DType::F16: f(fp16{}); return;
  }
  ZT_CHECK(false, "unknown dtype");
}

// OpenMP regions only pay off above this many elements of work.
constexpr int64_t kParallelGrain = 1 << 14;

}  // namespace zt::cpu_ops
