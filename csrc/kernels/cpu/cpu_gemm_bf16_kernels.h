// cpu_gemm_bf16_kernels.h — the register tile of the native bf16 GEMM (AVX512_BF16 vdpbf16ps,
// csrc/kernels/cpu/cpu_gemm_bf16_avx512.cpp); cpu_gemm_bf16.cpp packs the operands and drives it.
//
// Packed operands hold bf16 pairs along k, one uint32 each (the even k in the low half), zero
// past the matrix (odd K, rows past M, columns past N), kp = ceil(K / 2) pairs:
//   A block (kMR rows from i0): a[q · kMR + i] = (op(A)[i0 + i, 2q], op(A)[i0 + i, 2q + 1])
//   B panel (kNR columns from j0): b[q · kNR + j] = (op(B)[2q, j0 + j], op(B)[2q + 1, j0 + j])
// vdpbf16ps adds both products of a pair (each exact in fp32) to an fp32 accumulator; inputs and
// results below 2^-126 are flushed to zero, far under the bf16 output's rounding.
//
// Portability invariant (as cpu_vec_kernels.h): the ISA-flagged file includes only this header,
// <cstdint> and <immintrin.h>, and defines nothing with external linkage but tile_avx512bf16.
#pragma once
#include <cstdint>

namespace zt::cpu_ops::bf16gemm {

constexpr int kMR = 12;  // rows of a register tile
constexpr int kNR = 32;  // columns of a register tile: two 16-lane fp32 accumulators per row

// C[i, j] = bf16_rne(alpha · Σ_q a-pair · b-pair + beta · C[i, j]) for i < m <= kMR, j < n <= kNR
// (C: bf16 bits, row stride ldc); beta == 0 never reads C. Rounding as dtype.h's
// f32_to_bf16_bits (nearest even, NaN stays a quiet NaN). Call only when
// cpu::avx512_bf16_supported().
void tile_avx512bf16(const uint32_t* a, const uint32_t* b, int64_t kp, uint16_t* c, int64_t ldc, int m, int n,
                     float alpha, float beta);

}  // namespace zt::cpu_ops::bf16gemm
