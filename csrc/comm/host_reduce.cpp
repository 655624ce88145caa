// host_reduce.cpp — fixed-order fp32 reduction of n contributions (see host_reduce.h).
#include "zerotrain/comm/host_reduce.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "host_reduce_kernels.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/cpu_isa.h"

namespace zt {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
  }
  return "?";
}

namespace {

constexpr size_t kTile = 1024;  // elements per tile: acc[] stays in L1

// Order-independent max: NaN wins; of two equal zeros +0 wins.
inline float max_f32(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
  if (b > a || (b == a && std::signbit(a))) return b;
  return a;
}

// The element loops carry `omp simd`: per element they do exactly the scalar operations in the
// same order (widen, add left to right, divide, round once), so vector lanes change no bit; they
// only run at the baseline ISA's width (SSE2 on x86-64), which every CPU has. Sum and avg take
// the AVX2 kernels instead where cpu::active_isa() allows (host_reduce_kernels.h; the same bits).
template <typename T>
void reduce_typed(const void* const* srcs, int nsrc, void* dst_v, size_t count, ReduceOp op, int divisor) {
  T* dst = static_cast<T*>(dst_v);
  float acc[kTile];
  for (size_t base = 0; base < count; base += kTile) {
    const size_t m = count - base < kTile ? count - base : kTile;
    const T* s0 = static_cast<const T*>(srcs[0]) + base;
#pragma omp simd
    for (size_t i = 0; i < m; ++i) acc[i] = to_f32(s0[i]);
    for (int k = 1; k < nsrc; ++k) {
      const T* sk = static_cast<const T*>(srcs[k]) + base;
      if (op == ReduceOp::Max) {
        for (size_t i = 0; i < m; ++i) acc[i] = max_f32(acc[i], to_f32(sk[i]));
      } else {
#pragma omp simd
        for (size_t i = 0; i < m; ++i) acc[i] += to_f32(sk[i]);
      }
    }
    if (op == ReduceOp::Avg && divisor != 1) {  // divide (correctly rounded), not multiply by 1/n
      const float d = static_cast<float>(divisor);
#pragma omp simd
      for (size_t i = 0; i < m; ++i) acc[i] /= d;
    }
    T* out = dst + base;
#pragma omp simd
    for (size_t i = 0; i < m; ++i) out[i] = from_f32<T>(acc[i]);
  }
}

}  // namespace

void reduce_in_order(const void* const* srcs, int nsrc, void* dst, size_t count, DType dt, ReduceOp op,
                     int divisor) {
  ZT_CHECK(nsrc >= 1, "reduce_in_order needs at least one source");
  ZT_CHECK(divisor >= 1, "reduce_in_order divisor must be >= 1");
  if (nsrc == 1 && (op != ReduceOp::Avg || divisor == 1)) {  // nothing to combine: copied bit for bit
    if (dst != srcs[0]) std::memmove(dst, srcs[0], count * dtype_size(dt));
    return;
  }
  if (op != ReduceOp::Max && cpu::active_isa() != cpu::Isa::Scalar) {
    const int d = op == ReduceOp::Avg ? divisor : 1;
    switch (dt) {
      case DType::F32: return host_reduce::sum_f32_avx2(srcs, nsrc, dst, count, d);
      case DType::BF16: return host_reduce::sum_bf16_avx2(srcs, nsrc, dst, count, d);
      case DType::F16: return host_reduce::sum_f16_avx2(srcs, nsrc, dst, count, d);
    }
  }
  switch (dt) {
    case DType::F32: reduce_typed<float>(srcs, nsrc, dst, count, op, divisor); break;
    case DType::BF16: reduce_typed<bf16>(srcs, nsrc, dst, count, op, divisor); break;
    case DType::F16: reduce_typed<fp16>(srcs, nsrc, dst, count, op, divisor); break;
  }
}

}  // namespace zt
