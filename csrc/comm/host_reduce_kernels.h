// host_reduce_kernels.h — the SIMD paths of host_reduce.cpp's sum and avg, one function per
// element type (fp32, bf16, fp16 as raw 16-bit words), each bitwise the scalar kernel: widen,
// add the nsrc sources left to right in fp32, divide by `divisor` unless it is 1, round once.
// dst may be one of the sources (exactly, not partially overlapping). Defined in
// host_reduce_avx2.cpp (-mavx2 -mf16c); call only where cpu::active_isa() >= Avx2.
#pragma once
#include <cstddef>

namespace zt::host_reduce {

void sum_f32_avx2(const void* const* srcs, int nsrc, void* dst, size_t count, int divisor);
void sum_bf16_avx2(const void* const* srcs, int nsrc, void* dst, size_t count, int divisor);
void sum_f16_avx2(const void* const* srcs, int nsrc, void* dst, size_t count, int divisor);

}  // namespace zt::host_reduce
