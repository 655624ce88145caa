// host_adam_avx512.cpp — Adam, Lion and Adagrad on 16 fp32 lanes (AVX-512F only, no BW). Compiled with
// -mavx512f -mavx2 -mfma -mf16c -ffp-contract=off (top CMakeLists.txt); called only when
// cpu::isa_supported(Isa::Avx512). See host_adam_kernels.h for what may live here.
// GCC 12 warns "__Y may be used uninitialized" inside its own avx512fintrin.h (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "host_adam_simd.h"

namespace zt::host_optim::detail {
namespace {

struct Avx512 {
  ZT_HOST_ADAM_COMMON_OPS(_mm512, 512, _mm256, 256)
  static I widen16(Half h) { return _mm512_cvtepu16_epi32(h); }
  static F sign(F c) {
    const F zero = _mm512_setzero_ps();
    const F s = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(c, zero, _CMP_GT_OQ), c, _mm512_set1_ps(1.0f));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(c, zero, _CMP_LT_OQ), s, _mm512_set1_ps(-1.0f));
  }
  static Half narrow16(I b) { return _mm512_cvtepi32_epi16(b); }  // VPMOVDW: every lane <= 0xffff
  static I nan_select(I mag, I rounded, I quiet) {
    return _mm512_mask_mov_epi32(rounded, _mm512_cmpgt_epu32_mask(mag, _mm512_set1_epi32(0x7f800000)), quiet);
  }
};
static_assert(Avx512::W == kAvx512Width, "the dispatcher splits by kAvx512Width");

}  // namespace

void adam_avx512(const AdamArgs& a, int64_t begin, int64_t end) { adam_dispatch<Avx512>(a, begin, end); }
void lion_avx512(const StateArgs& a, int64_t begin, int64_t end) { state_dispatch<Avx512>(a, begin, end, true); }
void adagrad_avx512(const StateArgs& a, int64_t begin, int64_t end) { state_dispatch<Avx512>(a, begin, end, false); }
void accumulate_avx512(const AccumulateArgs& a, int64_t begin, int64_t end) {
  accumulate_dispatch<Avx512>(a, begin, end);
}

}  // namespace zt::host_optim::detail
