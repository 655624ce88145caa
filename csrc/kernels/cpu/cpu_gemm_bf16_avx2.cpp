// cpu_gemm_bf16_avx2.cpp — the AVX2 register tile of the CPU backend's Native bf16 GEMM:
// kMR2 × kNR2 fp32 accumulators (4 rows × three 8-lane registers: 12 of the 16 ymm registers,
// three for a B row, one for A's broadcast: per k three loads and four broadcasts feed twelve
// multiply-adds; over one GPT layer's GEMM shapes on Zen 3, one thread, the GEMM takes ~0.99× the
// time of OpenBLAS's sgemm when its panels start on a cache line, while its k loop takes
// ~1.02–1.08× the time of sgemm's kernel inside a step; a 6 × 16 tile, six broadcasts per k,
// was not faster), fed over packed fp32 panels,
// and the packing that widens bf16 to fp32 on the way. Compiled with -mavx2 -mfma (top CMakeLists.txt);
// called only when cpu_isa.h says the CPU has AVX2. Layout and contract:
// cpu_gemm_bf16_kernels.h. Each C element is the same sequence of fused multiply-adds in
// increasing k as in the AVX-512 tile, then the same alpha and beta operations (no contraction:
// -ffp-contract=off), so the two tiles give the same bits.
#include <immintrin.h>

#include <cstdint>

#include "cpu_gemm_bf16_kernels.h"

namespace zt::cpu_ops::bf16gemm {
namespace {

// 8 bf16 → 8 fp32 (exact: the bits shifted into the top half).
__m256 widen8(const uint16_t* src) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

float widen1(uint16_t h) { return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(h) << 16))); }

// Lanes j < n set (n in [0, 8]): the mask of a short fp32 row's loads and stores.
__m256i first_lanes(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// 8 fp32 → 8 bf16 bits, exactly dtype.h's f32_to_bf16_bits: round to nearest even (overflow
// rounds to inf), NaN → its top half with the quiet bit set.
__m128i to_bf16(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i top = _mm256_srli_epi32(u, 16);
  const __m256i lsb = _mm256_and_si256(top, _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  const __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(top, _mm256_set1_epi32(0x40)), nan);
  const __m256i packed = _mm256_packus_epi32(r, r);  // 16-bit values within each 128-bit half
  return _mm_unpacklo_epi64(_mm256_castsi256_si128(packed), _mm256_extracti128_si256(packed, 1));
}

// c[0, n) = bf16(alpha · acc + beta · c), n in [0, 8]; beta == 0 never reads c. The same
// operations as the AVX-512 tile's store16. A full row of 8 is loaded and stored whole; a short
// one goes through `part`, so nothing past c[n) is read or written.
__attribute__((always_inline)) inline void store8(uint16_t* c, __m256 acc, int n, float alpha, float beta) {
  if (n <= 0) return;
  if (alpha != 1.0f) acc = _mm256_mul_ps(acc, _mm256_set1_ps(alpha));
  if (n >= 8) {
    if (beta != 0.0f) acc = _mm256_add_ps(acc, _mm256_mul_ps(widen8(c), _mm256_set1_ps(beta)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(c), to_bf16(acc));
    return;
  }
  alignas(16) uint16_t part[8] = {};
  if (beta != 0.0f) {
    for (int j = 0; j < n; ++j) part[j] = c[j];
    acc = _mm256_add_ps(acc, _mm256_mul_ps(widen8(part), _mm256_set1_ps(beta)));
  }
  _mm_store_si128(reinterpret_cast<__m128i*>(part), to_bf16(acc));
  for (int j = 0; j < n; ++j) c[j] = part[j];
}

// c[0, n) = alpha · acc + beta · c in fp32 (one rounding each), n in [0, 8]; beta == 0 never reads c.
// A full row of 8 takes plain loads and stores: the masked ones are microcoded on AMD cores
// (~5% of a 256 × 1024 × 512 fp32-output GEMM on Zen 3, one thread).
__attribute__((always_inline)) inline void store8(float* c, __m256 acc, int n, float alpha, float beta) {
  if (n <= 0) return;
  if (alpha != 1.0f) acc = _mm256_mul_ps(acc, _mm256_set1_ps(alpha));
  if (n >= 8) {
    if (beta != 0.0f) acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(c), _mm256_set1_ps(beta)));
    _mm256_storeu_ps(c, acc);
    return;
  }
  const __m256i mask = first_lanes(n);
  if (beta != 0.0f) acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_maskload_ps(c, mask), _mm256_set1_ps(beta)));
  _mm256_maskstore_ps(c, mask, acc);
}

// Touches, for writing, the cache lines of the m × n block of C a tile is about to read and store,
// before its k loop, which hides the misses of C's strided rows. The AVX2 tile does so only where
// it reads C (beta != 0): where C is only written, the early touches cost more than the store
// misses they hide (the 15 GEMM shapes of zt_gemm_bf16_bench on Zen 3, one thread: native/fp32
// 1.14 → 1.05, median of 8 interleaved runs). The AVX-512 file has its own copy: code shared
// between files compiled for different ISAs could reach the linker as one copy built for the
// wider ISA.
template <typename Out>
__attribute__((always_inline)) inline void prefetch_tile(Out* c, int64_t ldc, int m, int n) {
  const int bytes = n * static_cast<int>(sizeof(Out));
  for (int i = 0; i < m; ++i) {
    const char* row = reinterpret_cast<const char*>(c + i * ldc);
    for (int off = 0; off < bytes; off += 64) __builtin_prefetch(row + off, 1, 3);
    __builtin_prefetch(row + bytes - 1, 1, 3);  // an unaligned row's last line
  }
}

// In-register transpose of an 8 × 8 matrix of fp32: on return r[j] holds what was column j.
// Inlined with its loops unrolled, so r, t and u stay in registers (out of line, GCC kept the three
// arrays on the stack, and the calls took ~3% of a one-rank native GPT step's samples).
__attribute__((always_inline)) inline void transpose8x8(__m256 r[8]) {
  __m256 t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  // u[4g + c]: rows 4g..4g+3 at columns c and 4 + c (one per 128-bit half)
#pragma GCC unroll 2
  for (int g = 0; g < 8; g += 4) {
    u[g] = _mm256_shuffle_ps(t[g], t[g + 2], 0x44);
    u[g + 1] = _mm256_shuffle_ps(t[g], t[g + 2], 0xee);
    u[g + 2] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0x44);
    u[g + 3] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0xee);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
    r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
  }
}

// pack_avx2 for blocks W wide (a multiple of 4). Row i of the run of rows lands in block i / W, at
// lane i % W: a run of 4 rows from a multiple of 4 never straddles two blocks, nor does a run of 8
// from a multiple of 8 when W is a multiple of 8 (the 24-wide B panels); with W = 4 (the A blocks)
// a run of 8 rows is two blocks' 4 lanes each. Nothing is written past the last block holding a row.
template <int W>
void pack_blocks(const uint16_t* x, int64_t ld, bool along_k, int64_t rows, int64_t K, float* dst) {
  static_assert(W % 4 == 0, "blocks hold whole runs of 4 rows");
  const int64_t block = K * W;  // elements per block
  const auto lane0 = [&](int64_t i) { return dst + i / W * block + i % W; };  // row i at k = 0
  // Rows i..i+7 at k (v: lane r holds row i + r), i a multiple of 8; high: rows i + 4.. exist.
  const auto store_rows8 = [&](float* lo, float* hi, int64_t k, __m256 v, bool high) {
    if constexpr (W % 8 == 0) {
      _mm256_storeu_ps(lo + k * W, v);  // one block holds all 8 (lanes past the rows are zeros in it)
    } else {
      _mm_storeu_ps(lo + k * W, _mm256_castps256_ps128(v));
      if (high) _mm_storeu_ps(hi + k * W, _mm256_extractf128_ps(v, 1));
    }
  };
  // Rows i..i+7 at k and k + 1 (v0, v1). With W = 4 a block's lanes at k and k + 1 are 32
  // contiguous bytes, stored whole (two 16-byte stores per k took ~1.5× the time per element of
  // the 24-wide panels' packing on Zen 3).
  const auto store_rows8_k2 = [&](float* lo, float* hi, int64_t k, __m256 v0, __m256 v1, bool high) {
    if constexpr (W % 8 == 0) {
      store_rows8(lo, hi, k, v0, high);
      store_rows8(lo, hi, k + 1, v1, high);
    } else {
      _mm256_storeu_ps(lo + k * W, _mm256_permute2f128_ps(v0, v1, 0x20));
      if (high) _mm256_storeu_ps(hi + k * W, _mm256_permute2f128_ps(v0, v1, 0x31));
    }
  };
  if (along_k) {  // each k's rows are contiguous: read once, in order, for every block of the run
    // W = 4: the run's whole runs of 8 rows go 4 k at a time, so each block's line of 4 k × 4 lanes
    // is written whole at once rather than 16 bytes at a time from k to k, between which the run's
    // other blocks, K · 16 bytes apart, can evict it.
    const int64_t rows8 = rows / 8 * 8;
    int64_t k_done = 0;  // k < k_done: rows [0, rows8) packed
    if constexpr (W == 4) {
      k_done = K / 4 * 4;
      for (int64_t k = 0; k < k_done; k += 4) {
        const uint16_t* src = x + k * ld;
        for (int64_t i = 0; i < rows8; i += 8) {
          float *lo = lane0(i), *hi = lane0(i + 4);
          store_rows8_k2(lo, hi, k, widen8(src + i), widen8(src + ld + i), true);
          store_rows8_k2(lo, hi, k + 2, widen8(src + 2 * ld + i), widen8(src + 3 * ld + i), true);
        }
      }
    }
    for (int64_t k = 0; k < K; ++k) {
      const uint16_t* src = x + k * ld;
      int64_t i = k < k_done ? rows8 : 0;
      for (; i + 8 <= rows; i += 8) store_rows8(lane0(i), lane0(i + 4), k, widen8(src + i), true);
      for (; i + 4 <= rows; i += 4) {
        const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i));
        _mm_storeu_ps(lane0(i) + k * W, _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(h), 16)));
      }
      for (; i < rows; ++i) lane0(i)[k * W] = widen1(src[i]);
    }
    return;
  }
  // Each row's k are contiguous: 8 rows × 8 k widened (rows past `rows` as zeros), transposed in
  // registers, each k's 8 lanes stored into the rows' block(s).
  const int64_t full = K / 8 * 8;
  for (int64_t i0 = 0; i0 < rows; i0 += 8) {
    const int g = static_cast<int>(rows - i0 < 8 ? rows - i0 : 8);
    float* lo = lane0(i0);
    float* hi = g > 4 ? lane0(i0 + 4) : nullptr;
    for (int64_t k = 0; k < full; k += 8) {
      __m256 r[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) r[i] = i < g ? widen8(x + (i0 + i) * ld + k) : _mm256_setzero_ps();
      transpose8x8(r);
#pragma GCC unroll 4
      for (int j = 0; j < 8; j += 2) store_rows8_k2(lo, hi, k + j, r[j], r[j + 1], g > 4);
    }
  }
  for (int64_t i = 0; i < rows; ++i) {
    float* out = lane0(i);
    for (int64_t k = full; k < K; ++k) out[k * W] = widen1(x[i * ld + k]);
  }
}

}  // namespace

void pack_avx2(const uint16_t* x, int64_t ld, bool along_k, int64_t rows, int64_t K, int W, float* dst) {
  if (W == kMR2) return pack_blocks<kMR2>(x, ld, along_k, rows, K, dst);
  pack_blocks<kNR2>(x, ld, along_k, rows, K, dst);  // W == kNR2 (the contract)
}

// The tile's k loop and stores over its first NV of three 8-lane columns: a panel's columns from
// 8 · NV on hold only the panel's zero padding (n <= 8 · NV), so they are neither multiplied nor
// stored. Each computed element takes the same fused multiply-adds whatever NV.
template <int NV, typename Out>
__attribute__((always_inline)) inline void tile_cols(const float* a, const float* b, int64_t K, Out* c, int64_t ldc,
                                                     int m, int n, float alpha, float beta) {
  __m256 acc[NV][kMR2];
#pragma GCC unroll 4
  for (int i = 0; i < kMR2; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[v][i] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const float* bk = b + k * kNR2;
    __m256 bv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) bv[v] = _mm256_loadu_ps(bk + 8 * v);
    const float* ak = a + k * kMR2;
#pragma GCC unroll 4
    for (int i = 0; i < kMR2; ++i) {
      const __m256 ai = _mm256_broadcast_ss(ak + i);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[v][i] = _mm256_fmadd_ps(ai, bv[v], acc[v][i]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < kMR2; ++i) {
    if (i >= m) break;
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) store8(c + i * ldc + 8 * v, acc[v][i], n - 8 * v, alpha, beta);
  }
}

// A panel's last columns are often short of 24 (N = 256: 16 of them): such a tile runs one or two
// of the three column vectors (at N = 256 the full-width tile spent a third of that panel's
// multiply-adds on padding).
template <typename Out>
void tile_avx2(const float* a, const float* b, int64_t K, Out* c, int64_t ldc, int m, int n, float alpha,
               float beta) {
  if (beta != 0.0f) prefetch_tile(c, ldc, m, n);
  if (n > 16) tile_cols<3>(a, b, K, c, ldc, m, n, alpha, beta);
  else if (n > 8) tile_cols<2>(a, b, K, c, ldc, m, n, alpha, beta);
  else tile_cols<1>(a, b, K, c, ldc, m, n, alpha, beta);
}

template void tile_avx2(const float*, const float*, int64_t, uint16_t*, int64_t, int, int, float, float);
template void tile_avx2(const float*, const float*, int64_t, float*, int64_t, int, int, float, float);

}  // namespace zt::cpu_ops::bf16gemm
