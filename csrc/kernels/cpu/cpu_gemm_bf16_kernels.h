// cpu_gemm_bf16_kernels.h — the register tiles of the CPU backend's own bf16 GEMMs
// (csrc/kernels/cpu/cpu_gemm_bf16_avx512.cpp, cpu_gemm_bf16_avx2.cpp); cpu_gemm_bf16.cpp packs the
// operands and drives them.
//
// Native (FMA tile; kMR × kNR with AVX-512, kMR2 × kNR2 with AVX2): packed operands are fp32 (bf16
// widened exactly while packing), zero past the matrix:
//   A block (kMR rows from i0): a[k · kMR + i] = op(A)[i0 + i, k]
//   B panel (kNR columns from j0): b[k · kNR + j] = op(B)[k, j0 + j]
// A product of two bf16 values is exact in fp32, so each fused multiply-add rounds exactly as a
// separate multiply and add would: the result is fp32 accumulation in increasing k.
//
// Dot (vdpbf16ps tile): packed operands are bf16 pairs along k, one uint32 per pair (k even in
// the low half, k + 1 in the high half; zero past the matrix and past an odd K), kp = ceil(K / 2):
//   A block: a[q · kMR + i] = (op(A)[i0 + i, 2q], op(A)[i0 + i, 2q + 1])
//   B panel: b[q · kNR + j] = (op(B)[2q, j0 + j], op(B)[2q + 1, j0 + j])
// Each vdpbf16ps adds both products of a pair into the fp32 accumulator, rounding to nearest
// even with subnormal inputs and results flushed to zero: fp32 accumulation, in pairs.
//
// Portability invariant (as cpu_vec_kernels.h): the ISA-flagged file includes only this header,
// <cstdint> and <immintrin.h>, and defines nothing with external linkage but the functions
// declared here.
#pragma once
#include <cstdint>

namespace zt::cpu_ops::bf16gemm {

constexpr int kMR = 12;  // rows of an AVX-512 register tile
constexpr int kNR = 32;  // columns of an AVX-512 register tile: two 16-lane fp32 accumulators per row
constexpr int kMR2 = 4;   // rows of the AVX2 register tile
constexpr int kNR2 = 24;  // columns of the AVX2 register tile: three 8-lane fp32 accumulators per row

// C[i, j] = alpha · Σ_k a[k, i] · b[k, j] + beta · C[i, j] for i < m <= kMR, j < n <= kNR (row
// stride ldc); beta == 0 never reads C. Out = uint16_t: C holds bf16 bits and the fp32 result is
// rounded once as dtype.h's f32_to_bf16_bits (nearest even, NaN stays a quiet NaN); Out = float:
// C is fp32 (a bf16-input, fp32-output GEMM: weight gradients accumulated straight into fp32).
// Call only when cpu::isa_supported(Isa::Avx512).
template <typename Out>
void tile_avx512(const float* a, const float* b, int64_t K, Out* c, int64_t ldc, int m, int n, float alpha,
                 float beta);

// tile_avx512's contract on pair-packed operands (kp pairs). Call only when
// cpu::avx512_bf16_supported().
template <typename Out>
void tile_dpbf16(const uint32_t* a, const uint32_t* b, int64_t kp, Out* c, int64_t ldc, int m, int n, float alpha,
                 float beta);

// tile_dpbf16 with A read where it lies instead of from a packed block: row i < m of the tile's
// op(A) is a + i · lda (bf16 elements, k contiguous, any alignment), whose k-pairs are exactly the
// packed pairs when K is even (2 · kp == K: no pair runs past the row). Rows from m on are not read.
// Call only when cpu::avx512_bf16_supported().
template <typename Out>
void tile_dpbf16_rows(const uint16_t* a, int64_t lda, const uint32_t* b, int64_t kp, Out* c, int64_t ldc, int m,
                      int n, float alpha, float beta);

// One pair-packed block: dst[q · W + i] = (x(i, 2q), x(i, 2q + 1)) for i < rows <= W, q < ceil(K / 2),
// zero in the high half past an odd K; x(i, k) as for pack_avx512. The rows from `rows` to W are
// left alone. Call only when cpu::isa_supported(Isa::Avx512).
void pack_pairs_avx512(const uint16_t* x, int64_t ld, bool along_k, int64_t rows, int64_t K, int W, uint32_t* dst);

// One packed block: dst[k · W + i] = bf16 x(i, k) widened, for i < rows <= W, k < K; the rows
// from `rows` to W are left alone. x(i, k) is x[k · ld + i] (along_k: each k's rows are
// contiguous) or x[i · ld + k] (otherwise: each row's k are contiguous). Call only when
// cpu::isa_supported(Isa::Avx512).
void pack_avx512(const uint16_t* x, int64_t ld, bool along_k, int64_t rows, int64_t K, int W, float* dst);

// tile_avx512's contract for the kMR2 × kNR2 tile, with AVX2 and FMA: the same fused
// multiply-adds per element, the same bits. Call only when cpu::isa_supported(Isa::Avx2).
template <typename Out>
void tile_avx2(const float* a, const float* b, int64_t K, Out* c, int64_t ldc, int m, int n, float alpha, float beta);
// pack_avx512's contract for W = kMR2 or kNR2, over a run of consecutive blocks: row i < rows goes
// to block i / W (blocks K · W elements apart): dst[(i / W) · K · W + k · W + i % W] = x(i, k)
// widened; the last block's rows from `rows` on are left alone or set to zero (the caller zeroes
// them first), and nothing past that block is written. One call reads a run of rows whole (each
// k's rows in one pass when along_k). Call only when cpu::isa_supported(Isa::Avx2).
void pack_avx2(const uint16_t* x, int64_t ld, bool along_k, int64_t rows, int64_t K, int W, float* dst);

// The widened path's passes (cpu_gemm.cpp), bitwise as the per-element loops: dst[i] = bf16
// src[i] widened (exact), and dst[i] = f32_to_bf16_bits(src[i]), for i < n. Call only when
// cpu::isa_supported(Isa::Avx512).
void widen_avx512(const uint16_t* src, float* dst, int64_t n);
void narrow_avx512(const float* src, uint16_t* dst, int64_t n);
// narrow_avx512 on vcvtneps2bf16 (nearest even, NaN quieted as f32_to_bf16_bits does); a block of
// 16 holding a subnormal input, which the instruction flushes to zero, takes narrow_avx512's
// rounding. Bitwise narrow_avx512. Call only when cpu::avx512_bf16_supported().
void narrow_avx512bf16(const float* src, uint16_t* dst, int64_t n);
// The same passes with AVX2 (cpu_convert_avx2.cpp). Call only when cpu::isa_supported(Isa::Avx2).
void widen_avx2(const uint16_t* src, float* dst, int64_t n);
void narrow_avx2(const float* src, uint16_t* dst, int64_t n);

}  // namespace zt::cpu_ops::bf16gemm
