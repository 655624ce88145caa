// host_adam_avx2.cpp — Adam, Lion and Adagrad on 8 fp32 lanes (AVX2, F16C). Compiled with
// -mavx2 -mfma -mf16c -ffp-contract=off (top CMakeLists.txt); called only when
// cpu::isa_supported(Isa::Avx2). See host_adam_kernels.h for what may live here.
#include <immintrin.h>

#include <cstdint>

#include "host_adam_simd.h"

namespace zt::host_optim::detail {
namespace {

struct Avx2 {
  ZT_HOST_ADAM_COMMON_OPS(_mm256, 256, _mm, 128)
  static I widen16(Half h) { return _mm256_cvtepu16_epi32(h); }
  static F sign(F c) {
    const F zero = _mm256_setzero_ps();
    const F s = _mm256_blendv_ps(c, _mm256_set1_ps(1.0f), _mm256_cmp_ps(c, zero, _CMP_GT_OQ));
    return _mm256_blendv_ps(s, _mm256_set1_ps(-1.0f), _mm256_cmp_ps(c, zero, _CMP_LT_OQ));
  }
  // Every lane is <= 0xffff, so the unsigned-saturating pack is exact.
  static Half narrow16(I b) { return _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1)); }
  // mag = |u| as bits, < 2^31: the signed compare is exact.
  static I nan_select(I mag, I rounded, I quiet) {
    return _mm256_blendv_epi8(rounded, quiet, _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f800000)));
  }
};
static_assert(Avx2::W == kAvx2Width, "the dispatcher splits by kAvx2Width");

}  // namespace

void adam_avx2(const AdamArgs& a, int64_t begin, int64_t end) { adam_dispatch<Avx2>(a, begin, end); }
void lion_avx2(const StateArgs& a, int64_t begin, int64_t end) { state_dispatch<Avx2>(a, begin, end, true); }
void adagrad_avx2(const StateArgs& a, int64_t begin, int64_t end) { state_dispatch<Avx2>(a, begin, end, false); }
void accumulate_avx2(const AccumulateArgs& a, int64_t begin, int64_t end) { accumulate_dispatch<Avx2>(a, begin, end); }

}  // namespace zt::host_optim::detail
