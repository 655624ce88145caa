// cpu_convert_avx2.cpp — bf16 <-> fp32 row passes with AVX2 (8 lanes), bitwise the per-element
// loops (dtype.h's bf16_bits_to_f32 / f32_to_bf16_bits: round to nearest even, overflow to inf,
// NaN to its top half with the quiet bit set). Compiled with -mavx2 (top CMakeLists.txt); called
// only when the op's SIMD table is the AVX2 one. Declared in cpu_gemm_bf16_kernels.h beside the
// AVX-512 passes. The scalar tails repeat dtype.h's conversions here because an ISA-flagged file
// includes no project header but cpu_gemm_bf16_kernels.h (its inline functions would be compiled
// with -mavx2 and could be the copy the linker keeps for every caller).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu_gemm_bf16_kernels.h"

namespace zt::cpu_ops::bf16gemm {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float widen1(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

uint16_t narrow1(float f) {
  const uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN: quiet
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace

void widen_avx2(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
  }
  for (; i < n; ++i) dst[i] = widen1(src[i]);
}

void narrow_avx2(const float* src, uint16_t* dst, int64_t n) {
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(src + i);
    const __m256i u = _mm256_castps_si256(v);
    const __m256i top = _mm256_srli_epi32(u, 16);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_and_si256(top, one), bias)), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(top, quiet), nan);
    // 8 lanes of 16 significant bits -> 8 uint16: pack within 128-bit halves, then join them.
    const __m256i packed = _mm256_packus_epi32(r, r);
    const __m128i lo = _mm256_castsi256_si128(packed), hi = _mm256_extracti128_si256(packed, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_unpacklo_epi64(lo, hi));
  }
  for (; i < n; ++i) dst[i] = narrow1(src[i]);
}

}  // namespace zt::cpu_ops::bf16gemm
