// cpu_gemm_bf16_avx512.cpp — the register tiles of the CPU backend's bf16 GEMMs: kMR × kNR fp32
// accumulators fed by AVX-512F fused multiply-adds over packed fp32 panels (Native), or by
// AVX512_BF16 vdpbf16ps over packed bf16 pairs (Dot), and their packing. Compiled with -mavx512f
// -mfma (top CMakeLists.txt), the Dot tile's k loop alone with target("avx512bf16"); called only when
// cpu_isa.h says the CPU has them. Layout and contract: cpu_gemm_bf16_kernels.h.
// GCC 12 reports the deliberately undefined source operands inside avx512fintrin.h as
// uninitialised; they are not.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "cpu_gemm_bf16_kernels.h"

namespace zt::cpu_ops::bf16gemm {
namespace {

// fp32 → bf16 bits in the low half of each 32-bit lane, exactly dtype.h's f32_to_bf16_bits:
// round to nearest even (overflow rounds to inf), NaN → its top half with the quiet bit set.
__m512i to_bf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i top = _mm512_srli_epi32(u, 16);
  const __m512i lsb = _mm512_and_si512(top, _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_blend_epi32(nan, rounded, _mm512_or_si512(top, _mm512_set1_epi32(0x40)));
}

// c[0, n) as 16 lanes of bf16 bits, zero past n (n in [1, 16]); a short row one element at a time,
// as masked 16-bit loads need AVX512BW.
__m256i load_bits(const uint16_t* c, int n) {
  if (n >= 16) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c));
  alignas(32) uint16_t part[16] = {};
  for (int j = 0; j < n; ++j) part[j] = c[j];
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(part));
}

// c[0, n) = bf16(alpha · acc + beta · c), n in [0, 16]; beta == 0 never reads c.
void store16(uint16_t* c, __m512 acc, int n, float alpha, float beta) {
  if (n <= 0) return;
  const __mmask16 mask = n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1u);
  if (alpha != 1.0f) acc = _mm512_mul_ps(acc, _mm512_set1_ps(alpha));
  if (beta != 0.0f) {
    const __m512i wide = _mm512_cvtepu16_epi32(load_bits(c, n));
    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)), _mm512_set1_ps(beta)));
  }
  _mm512_mask_cvtepi32_storeu_epi16(c, mask, to_bf16(acc));
}

// c[0, n) = alpha · acc + beta · c in fp32 (one rounding each), n in [0, 16]; beta == 0 never reads c.
void store16(float* c, __m512 acc, int n, float alpha, float beta) {
  if (n <= 0) return;
  const __mmask16 mask = n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1u);
  if (alpha != 1.0f) acc = _mm512_mul_ps(acc, _mm512_set1_ps(alpha));
  if (beta != 0.0f) acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, c), _mm512_set1_ps(beta)));
  _mm512_mask_storeu_ps(c, mask, acc);
}

// Rows i < m of a tile's accumulators (acc0: columns 0–15, acc1: 16–31) stored as store16 does.
// Inlined into each tile with constant indices, so the accumulators stay in registers until here.
template <typename Out>
__attribute__((always_inline)) inline void store_tile(const __m512* acc0, const __m512* acc1, Out* c, int64_t ldc,
                                                      int m, int n, float alpha, float beta) {
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) {
    if (i >= m) break;
    store16(c + i * ldc, acc0[i], n, alpha, beta);
    store16(c + i * ldc + 16, acc1[i], n - 16, alpha, beta);
  }
}

// Touches, for writing, the cache lines of the m × n block of C a tile is about to store (and, with
// beta != 0, read): issued before the tile's k loop, whose ~kp · kMR dot products hide the misses
// that C's strided rows (one tile row per ldc) would otherwise take one by one.
template <typename Out>
__attribute__((always_inline)) inline void prefetch_tile(Out* c, int64_t ldc, int m, int n) {
  const int bytes = n * static_cast<int>(sizeof(Out));
  for (int i = 0; i < m; ++i) {
    const char* row = reinterpret_cast<const char*>(c + i * ldc);
    for (int off = 0; off < bytes; off += 64) __builtin_prefetch(row + off, 1, 3);
    __builtin_prefetch(row + bytes - 1, 1, 3);  // an unaligned row's last line
  }
}

// In-register transpose of a 16 × 16 matrix of 32-bit elements: on return r[j] holds what was
// column j (r[j][i] = old r[i][j]). Four stages of 16 shuffles: 32-bit and 64-bit interleaves
// inside each 128-bit lane, then two rounds of 128-bit lane shuffles.
void transpose16x16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  // u[4g + c], lane L = rows 4g..4g+3 at column 4L + c
  for (int g = 0; g < 16; g += 4) {
    u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
    u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
    u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
    u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88), v1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);
    const __m512i w0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd), w1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xdd);
    r[c] = _mm512_shuffle_i32x4(v0, v1, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(w0, w1, 0x88);
    r[8 + c] = _mm512_shuffle_i32x4(v0, v1, 0xdd);
    r[12 + c] = _mm512_shuffle_i32x4(w0, w1, 0xdd);
  }
}

// Scatter offsets of 16 consecutive k down one column of a packed block: lane l at l · W.
__m512i column_stride(int W) {
  return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                            _mm512_set1_epi32(W));
}

// 16 bf16 → 16 fp32 (exact: the bits shifted into the top half).
__m512 widen16(const uint16_t* src) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

float widen1(uint16_t h) { return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(h) << 16))); }

}  // namespace

void pack_avx512(const uint16_t* x, int64_t ld, bool along_k, int64_t rows, int64_t K, int W, float* dst) {
  if (along_k) {  // each k: `rows` contiguous values → one contiguous run of dst
    for (int64_t k = 0; k < K; ++k) {
      const uint16_t* src = x + k * ld;
      float* out = dst + k * W;
      int64_t i = 0;
      for (; i + 16 <= rows; i += 16) _mm512_storeu_ps(out + i, widen16(src + i));
      for (; i < rows; ++i) out[i] = widen1(src[i]);
    }
    return;
  }
  // Each row: 16 k at a time widened, then scattered down the block's column (stride W).
  const __m512i stride = column_stride(W);
  for (int64_t i = 0; i < rows; ++i) {
    const uint16_t* src = x + i * ld;
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) _mm512_i32scatter_ps(dst + k * W + i, stride, widen16(src + k), 4);
    for (; k < K; ++k) dst[k * W + i] = widen1(src[k]);
  }
}

void pack_pairs_avx512(const uint16_t* x, int64_t ld, bool along_k, int64_t rows, int64_t K, int W, uint32_t* dst) {
  const int64_t kp = (K + 1) / 2;
  const auto at = [&](int64_t i, int64_t k) -> uint32_t {
    if (k >= K) return 0;
    return along_k ? x[k * ld + i] : x[i * ld + k];
  };
  if (along_k) {  // each pair: two rows of x, interleaved 16 lanes at a time
    for (int64_t q = 0; q < kp; ++q) {
      const uint16_t* even = x + 2 * q * ld;
      uint32_t* out = dst + q * W;
      int64_t i = 0;
      if (2 * q + 1 < K) {
        const uint16_t* odd = even + ld;
        for (; i + 16 <= rows; i += 16) {
          const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(even + i)));
          const __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(odd + i)));
          _mm512_storeu_si512(out + i, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        }
        if (rows - i >= 2) {  // a short block (kMR = 12 rows): whole 32-bit pairs of rows by masked loads
          const int dw = static_cast<int>((rows - i) / 2);
          const __mmask16 m = static_cast<__mmask16>((1u << dw) - 1u);
          const __m512i lo = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(_mm512_maskz_loadu_epi32(m, even + i)));
          const __m512i hi = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(_mm512_maskz_loadu_epi32(m, odd + i)));
          _mm512_mask_storeu_epi32(out + i, static_cast<__mmask16>((1u << (2 * dw)) - 1u),
                                   _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
          i += 2 * dw;
        }
      }
      for (; i < rows; ++i) out[i] = at(i, 2 * q) | at(i, 2 * q + 1) << 16;
    }
    return;
  }
  // Each row's pairs are adjacent in memory: 16 rows × 16 pairs loaded (rows past `rows` as
  // zeros), transposed in registers, and each pair's 16 rows stored as one run of the block.
  const int64_t full = K / 32 * 16;  // pairs covered by whole 16-pair loads
  for (int64_t i0 = 0; i0 < rows; i0 += 16) {
    const int g = static_cast<int>(rows - i0 < 16 ? rows - i0 : 16);
    const __mmask16 keep = static_cast<__mmask16>((1u << g) - 1u);
    for (int64_t q = 0; q < full; q += 16) {
      __m512i r[16];
      for (int i = 0; i < 16; ++i) r[i] = i < g ? _mm512_loadu_si512(x + (i0 + i) * ld + 2 * q) : _mm512_setzero_si512();
      transpose16x16(r);
      for (int j = 0; j < 16; ++j) _mm512_mask_storeu_epi32(dst + (q + j) * W + i0, keep, r[j]);
    }
  }
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t q = full; q < kp; ++q) dst[q * W + i] = at(i, 2 * q) | at(i, 2 * q + 1) << 16;
  }
}

void widen_avx512(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, widen16(src + i));
  for (; i < n; ++i) dst[i] = widen1(src[i]);
}

void narrow_avx512(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_cvtepi32_storeu_epi16(dst + i, mask, to_bf16(_mm512_maskz_loadu_ps(mask, src + i)));
  }
}

// Subnormal inputs (exponent bits zero, mantissa not), which vcvtneps2bf16 flushes to zero.
__attribute__((target("avx512bf16"))) void narrow_avx512bf16(const float* src, uint16_t* dst, int64_t n) {
  const __m512i exponent = _mm512_set1_epi32(0x7f800000), mantissa = _mm512_set1_epi32(0x007fffff);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(mask, src + i);
    const __m512i u = _mm512_castps_si512(v);
    if (_mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(u, exponent), u, mantissa) != 0) {
      _mm512_mask_cvtepi32_storeu_epi16(dst + i, mask, to_bf16(v));
      continue;
    }
    const __m256i rounded = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
    if (mask == 0xffff) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), rounded);
    else _mm512_mask_cvtepi32_storeu_epi16(dst + i, mask, _mm512_cvtepu16_epi32(rounded));  // AVX-512F only
  }
}

template <typename Out>
void tile_avx512(const float* a, const float* b, int64_t K, Out* c, int64_t ldc, int m, int n, float alpha,
                 float beta) {
  __m512 acc0[kMR], acc1[kMR];
  prefetch_tile(c, ldc, m, n);
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m512 b0 = _mm512_loadu_ps(b + k * kNR), b1 = _mm512_loadu_ps(b + k * kNR + 16);
    const float* ak = a + k * kMR;
#pragma GCC unroll 12
    for (int i = 0; i < kMR; ++i) {
      const __m512 ai = _mm512_set1_ps(ak[i]);
      acc0[i] = _mm512_fmadd_ps(ai, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(ai, b1, acc1[i]);
    }
  }
  store_tile(acc0, acc1, c, ldc, m, n, alpha, beta);
}

namespace {

// The dpbf16 tile's k loop: acc0/acc1 (kMR each) = Σ_q pairs of a · pairs of b. Not a template:
// the avx512bf16 target attribute is kept on a plain function (GCC drops it from template
// instantiations); the accumulators stay in registers inside and are written out once.
__attribute__((target("avx512bf16"))) void dpbf16_accumulate(const uint32_t* a, const uint32_t* b, int64_t kp,
                                                             __m512* out0, __m512* out1) {
  __m512 acc0[kMR], acc1[kMR];
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
  for (int64_t q = 0; q < kp; ++q) {
    const __m512bh b0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + q * kNR));
    const __m512bh b1 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + q * kNR + 16));
    const uint32_t* aq = a + q * kMR;
#pragma GCC unroll 12
    for (int i = 0; i < kMR; ++i) {
      const __m512bh ai = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(aq[i])));
      acc0[i] = _mm512_dpbf16_ps(acc0[i], ai, b0);
      acc1[i] = _mm512_dpbf16_ps(acc1[i], ai, b1);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) {
    out0[i] = acc0[i];
    out1[i] = acc1[i];
  }
}

// dpbf16_accumulate with A's pairs read where they lie: row i's pair q is the 32 bits at
// rows[i] + 4q (bytes; any alignment), one broadcast load each, no packed block. Kept apart from
// dpbf16_accumulate, whose packed block needs one pointer: a shared loop with a run-time pair
// stride holds twelve row pointers there too and reloads one from the stack every iteration.
__attribute__((target("avx512bf16"))) void dpbf16_accumulate_rows(const char* const* rows, const uint32_t* b,
                                                                  int64_t kp, __m512* out0,
                                                                  __m512* out1) {
  __m512 acc0[kMR], acc1[kMR];
  const char* r[kMR];
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) {
    acc0[i] = acc1[i] = _mm512_setzero_ps();
    r[i] = rows[i];
  }
  for (int64_t q = 0; q < kp; ++q) {
    const __m512bh b0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + q * kNR));
    const __m512bh b1 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + q * kNR + 16));
#pragma GCC unroll 12
    for (int i = 0; i < kMR; ++i) {
      int pair;
      __builtin_memcpy(&pair, r[i] + 4 * q, sizeof(pair));
      const __m512bh ai = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair));
      acc0[i] = _mm512_dpbf16_ps(acc0[i], ai, b0);
      acc1[i] = _mm512_dpbf16_ps(acc1[i], ai, b1);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) {
    out0[i] = acc0[i];
    out1[i] = acc1[i];
  }
}

}  // namespace

template <typename Out>
void tile_dpbf16(const uint32_t* a, const uint32_t* b, int64_t kp, Out* c, int64_t ldc, int m, int n, float alpha,
                 float beta) {
  __m512 acc0[kMR], acc1[kMR];
  prefetch_tile(c, ldc, m, n);
  dpbf16_accumulate(a, b, kp, acc0, acc1);
  store_tile(acc0, acc1, c, ldc, m, n, alpha, beta);
}

template <typename Out>
void tile_dpbf16_rows(const uint16_t* a, int64_t lda, const uint32_t* b, int64_t kp, Out* c, int64_t ldc, int m,
                      int n, float alpha, float beta) {
  __m512 acc0[kMR], acc1[kMR];
  const char* rows[kMR];
  for (int i = 0; i < kMR; ++i) rows[i] = reinterpret_cast<const char*>(a + (i < m ? i : m - 1) * lda);
  prefetch_tile(c, ldc, m, n);
  dpbf16_accumulate_rows(rows, b, kp, acc0, acc1);
  store_tile(acc0, acc1, c, ldc, m, n, alpha, beta);
}

template void tile_avx512(const float*, const float*, int64_t, uint16_t*, int64_t, int, int, float, float);
template void tile_avx512(const float*, const float*, int64_t, float*, int64_t, int, int, float, float);
template void tile_dpbf16(const uint32_t*, const uint32_t*, int64_t, uint16_t*, int64_t, int, int, float, float);
template void tile_dpbf16(const uint32_t*, const uint32_t*, int64_t, float*, int64_t, int, int, float, float);
template void tile_dpbf16_rows(const uint16_t*, int64_t, const uint32_t*, int64_t, uint16_t*, int64_t, int, int, float,
                               float);
template void tile_dpbf16_rows(const uint16_t*, int64_t, const uint32_t*, int64_t, float*, int64_t, int, int, float,
                               float);

}  // namespace zt::cpu_ops::bf16gemm
