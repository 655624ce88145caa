// host_reduce_avx2.cpp — host_reduce's sum / avg with AVX2 (8 lanes): per element exactly the
// scalar loop's operations in its order (widen, add the sources left to right, divide, round once
// to nearest even), so every result is the scalar kernel's bit for bit; a NaN stays a NaN (its
// payload may be another source's). Compiled with -mavx2 -mf16c (top CMakeLists.txt); called only
// when cpu::active_isa() is AVX2 or above. Like every ISA-flagged file it includes no project
// header with inline functions (they could be compiled here with -mavx2 and be the copy the
// linker keeps for every caller), so the scalar tails repeat dtype.h's conversions.
#include "host_reduce_kernels.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace zt::host_reduce {
namespace {

constexpr size_t kTile = 1024;  // elements per tile: acc[] stays in L1

float f32_from(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}
uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

// The three element types: load 8 as fp32, store 8 rounded, and the same for one element.
struct F32 {
  using T = float;
  static __m256 load8(const T* p) { return _mm256_loadu_ps(p); }
  static void store8(T* p, __m256 v) { _mm256_storeu_ps(p, v); }
  static float load1(const T* p) { return *p; }
  static void store1(T* p, float v) { *p = v; }
};

struct Bf16 {
  using T = uint16_t;
  static __m256 load8(const T* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  // Nearest even (overflow to inf); a NaN keeps its top half with the quiet bit set.
  static void store8(T* p, __m256 v) {
    const __m256i u = _mm256_castps_si256(v), top = _mm256_srli_epi32(u, 16);
    const __m256i odd = _mm256_and_si256(top, _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff))), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(top, _mm256_set1_epi32(0x40)), nan);
    const __m256i packed = _mm256_packus_epi32(r, r);  // within 128-bit halves; then join them
    const __m128i lo = _mm256_castsi256_si128(packed), hi = _mm256_extracti128_si256(packed, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_unpacklo_epi64(lo, hi));
  }
  static float load1(const T* p) { return f32_from(static_cast<uint32_t>(*p) << 16); }
  static void store1(T* p, float v) {
    const uint32_t u = bits_of(v);
    *p = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u
                                                                : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
};

// IEEE binary16 through F16C: exact widening, rounding to nearest even with subnormals kept and
// overflow to inf; a NaN keeps the top of its payload with the quiet bit set — dtype.h's
// conversions.
struct F16 {
  using T = uint16_t;
  static __m256 load8(const T* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static void store8(T* p, __m256 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static float load1(const T* p) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(*p))); }
  static void store1(T* p, float v) {
    *p = static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(v), _MM_FROUND_TO_NEAREST_INT), 0));
  }
};

// dst[i] = round(((src[0][i] + src[1][i]) + ...) / divisor), tile by tile: a tile is read from
// every source before it is written, so dst may be any one of the sources.
template <typename E>
void sum(const void* const* srcs, int nsrc, void* dst_v, size_t count, int divisor) {
  using T = typename E::T;
  T* dst = static_cast<T*>(dst_v);
  alignas(32) float acc[kTile];
  const __m256 d8 = _mm256_set1_ps(static_cast<float>(divisor));
  const float d = static_cast<float>(divisor);
  for (size_t base = 0; base < count; base += kTile) {
    const size_t m = count - base < kTile ? count - base : kTile, m8 = m / 8 * 8;
    const T* s0 = static_cast<const T*>(srcs[0]) + base;
    for (size_t i = 0; i < m8; i += 8) _mm256_store_ps(acc + i, E::load8(s0 + i));
    for (size_t i = m8; i < m; ++i) acc[i] = E::load1(s0 + i);
    for (int k = 1; k < nsrc; ++k) {
      const T* sk = static_cast<const T*>(srcs[k]) + base;
      for (size_t i = 0; i < m8; i += 8) _mm256_store_ps(acc + i, _mm256_add_ps(_mm256_load_ps(acc + i), E::load8(sk + i)));
      for (size_t i = m8; i < m; ++i) acc[i] += E::load1(sk + i);
    }
    T* out = dst + base;
    if (divisor != 1) {  // divide (correctly rounded), not multiply by 1/n
      for (size_t i = 0; i < m8; i += 8) E::store8(out + i, _mm256_div_ps(_mm256_load_ps(acc + i), d8));
      for (size_t i = m8; i < m; ++i) E::store1(out + i, acc[i] / d);
    } else {
      for (size_t i = 0; i < m8; i += 8) E::store8(out + i, _mm256_load_ps(acc + i));
      for (size_t i = m8; i < m; ++i) E::store1(out + i, acc[i]);
    }
  }
}

}  // namespace

void sum_f32_avx2(const void* const* srcs, int nsrc, void* dst, size_t count, int divisor) {
  sum<F32>(srcs, nsrc, dst, count, divisor);
}
void sum_bf16_avx2(const void* const* srcs, int nsrc, void* dst, size_t count, int divisor) {
  sum<Bf16>(srcs, nsrc, dst, count, divisor);
}
void sum_f16_avx2(const void* const* srcs, int nsrc, void* dst, size_t count, int divisor) {
  sum<F16>(srcs, nsrc, dst, count, divisor);
}

}  // namespace zt::host_reduce
