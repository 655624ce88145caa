// cpu_vec_avx512.cpp — the cpu_vec_kernels.h loops on 16 fp32 lanes (AVX-512F). Compiled with
// -mavx512f -mavx2 -mfma -ffp-contract=off (top CMakeLists.txt; no FMA is ever emitted); called
// only when cpu::isa_supported(Isa::Avx512). See cpu_vec_kernels.h for what may live here.
// GCC 12 reports the deliberately undefined source operands inside avx512fintrin.h
// (_mm512_undefined_*, used by cvtt/slli/blend) as uninitialised; they are not.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "cpu_vec_simd.h"

namespace zt::cpu_ops::vec {
namespace {

struct Avx512 {
  ZT_VEC_COMMON_OPS(_mm512, 512)
  static F sel_gt(F a, F b, F x, F y) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ), y, x); }
  static F sel_lt(F a, F b, F x, F y) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), y, x); }
};
static_assert(kBlock % Avx512::W == 0, "a block is a whole number of vectors");

}  // namespace

const Kernels kAvx512 = make_kernels<Avx512>("avx512");

}  // namespace zt::cpu_ops::vec
