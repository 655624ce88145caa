// cpu_vec_avx2.cpp — the cpu_vec_kernels.h loops on 8 fp32 lanes (AVX2). Compiled with
// -mavx2 -mfma -ffp-contract=off (top CMakeLists.txt; no FMA is ever emitted); called only when
// cpu::isa_supported(Isa::Avx2). See cpu_vec_kernels.h for what may live here.
#include <immintrin.h>

#include <cstdint>

#include "cpu_vec_simd.h"

namespace zt::cpu_ops::vec {
namespace {

struct Avx2 {
  ZT_VEC_COMMON_OPS(_mm256, 256)
  static F sel_gt(F a, F b, F x, F y) { return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_GT_OQ)); }
  static F sel_lt(F a, F b, F x, F y) { return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_LT_OQ)); }
};
static_assert(kBlock % Avx2::W == 0, "a block is a whole number of vectors");

}  // namespace

const Kernels kAvx2 = make_kernels<Avx2>("avx2");

}  // namespace zt::cpu_ops::vec
