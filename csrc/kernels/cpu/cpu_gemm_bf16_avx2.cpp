// cpu_gemm_bf16_avx2.cpp — the AVX2 register tile of the CPU backend's Native bf16 GEMM:
// kMR2 × kNR2 fp32 accumulators (4 rows × three 8-lane registers: 12 of the 16 ymm registers,
// three for a B row, one for A's broadcast: per k three loads and four broadcasts feed twelve
// multiply-adds; inside a Zen 3 training step it takes within ~5% of the time of OpenBLAS's
// sgemm kernel, whose tile has this shape, when its panels start on a cache line; a 6 × 16 tile,
// six broadcasts per k, took ~1.2×), fed over packed fp32 panels,
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

// Touches, for writing, the cache lines of the m × n block of C a tile is about to store (and,
// with beta != 0, read), before its k loop, which hides the misses of C's strided rows. The
// AVX-512 file has its own copy: code shared between files compiled for different ISAs could
// reach the linker as one copy built for the wider ISA.
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
void transpose8x8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  // u[4g + c]: rows 4g..4g+3 at columns c and 4 + c (one per 128-bit half)
  for (int g = 0; g < 8; g += 4) {
    u[g] = _mm256_shuffle_ps(t[g], t[g + 2], 0x44);
    u[g + 1] = _mm256_shuffle_ps(t[g], t[g + 2], 0xee);
    u[g + 2] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0x44);
    u[g + 3] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0xee);
  }
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
    r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
  }
}

}  // namespace

void pack_avx2(const uint16_t* x, int64_t ld, bool along_k, int64_t rows, int64_t K, int W, float* dst) {
  if (along_k) {  // each k: `rows` contiguous values → one contiguous run of dst
    // A full block narrower than 8 (the 4-row A blocks) takes 8 lanes per k but the last (see
    // below): the lanes past W read the elements after the block's (inside x, as ld >= 8 and a
    // later k follows) and land on the next k's first rows, which its own store overwrites.
    const bool spill = rows == W && W % 8 != 0 && ld >= 8;
    for (int64_t k = 0; k < K; ++k) {
      const uint16_t* src = x + k * ld;
      float* out = dst + k * W;
      int64_t i = 0;
      if (spill && k + 1 < K) {
        for (; i < rows; i += 8) _mm256_storeu_ps(out + i, widen8(src + i));
        continue;
      }
      for (; i + 8 <= rows; i += 8) _mm256_storeu_ps(out + i, widen8(src + i));
      for (; i + 4 <= rows; i += 4) {  // the 4-row A blocks
        const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i));
        _mm_storeu_ps(out + i, _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(h), 16)));
      }
      for (; i < rows; ++i) out[i] = widen1(src[i]);
    }
    return;
  }
  // Each row's k are contiguous: 8 rows × 8 k widened (rows past `rows` as zeros), transposed in
  // registers, and each k's 8 lanes stored as one run of the block. Where the run is wider than
  // the rest of the block's row (the 4-row A blocks), its last lanes (zeros) land on the next k's
  // first rows, which the next store overwrites; the block's last k is stored lane by lane, so
  // nothing is written past the block. (Masked stores would do, but run slowly on AMD cores.)
  const int64_t full = K / 8 * 8;
  for (int64_t i0 = 0; i0 < rows; i0 += 8) {
    const int g = static_cast<int>(rows - i0 < 8 ? rows - i0 : 8);
    const bool spills = i0 + 8 > W;
    for (int64_t k = 0; k < full; k += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = i < g ? widen8(x + (i0 + i) * ld + k) : _mm256_setzero_ps();
      transpose8x8(r);
      for (int j = 0; j < 8; ++j) {
        float* out = dst + (k + j) * W + i0;
        if (!spills || k + j + 1 < K) {
          _mm256_storeu_ps(out, r[j]);
          continue;
        }
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, r[j]);
        for (int i = 0; i < g; ++i) out[i] = lanes[i];
      }
    }
  }
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t k = full; k < K; ++k) dst[k * W + i] = widen1(x[i * ld + k]);
  }
}

template <typename Out>
void tile_avx2(const float* a, const float* b, int64_t K, Out* c, int64_t ldc, int m, int n, float alpha,
               float beta) {
  __m256 acc0[kMR2], acc1[kMR2], acc2[kMR2];
  prefetch_tile(c, ldc, m, n);
#pragma GCC unroll 4
  for (int i = 0; i < kMR2; ++i) acc0[i] = acc1[i] = acc2[i] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const float* bk = b + k * kNR2;
    const __m256 b0 = _mm256_loadu_ps(bk), b1 = _mm256_loadu_ps(bk + 8), b2 = _mm256_loadu_ps(bk + 16);
    const float* ak = a + k * kMR2;
#pragma GCC unroll 4
    for (int i = 0; i < kMR2; ++i) {
      const __m256 ai = _mm256_broadcast_ss(ak + i);
      acc0[i] = _mm256_fmadd_ps(ai, b0, acc0[i]);
      acc1[i] = _mm256_fmadd_ps(ai, b1, acc1[i]);
      acc2[i] = _mm256_fmadd_ps(ai, b2, acc2[i]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < kMR2; ++i) {
    if (i >= m) break;
    store8(c + i * ldc, acc0[i], n, alpha, beta);
    store8(c + i * ldc + 8, acc1[i], n - 8, alpha, beta);
    store8(c + i * ldc + 16, acc2[i], n - 16, alpha, beta);
  }
}

template void tile_avx2(const float*, const float*, int64_t, uint16_t*, int64_t, int, int, float, float);
template void tile_avx2(const float*, const float*, int64_t, float*, int64_t, int, int, float, float);

}  // namespace zt::cpu_ops::bf16gemm
