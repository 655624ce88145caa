// cpu_vec_simd.h — the SIMD loops of cpu_vec_kernels.h written once over a vector-traits type V,
// included by each ISA translation unit after it defines its V (cpu_vec_avx2.cpp,
// cpu_vec_avx512.cpp). Everything is in an anonymous namespace: each including file gets its own
// copy, compiled with its own flags (see cpu_vec_kernels.h for why that matters).
//
// V provides: F (W float lanes), I (W int32 lanes), constant W (kBlock % W == 0), load/store,
// set1, add/sub/mul/div, min/max (for non-NaN operands the same as fminf/fmaxf; for a NaN
// operand the second one, as MINPS/MAXPS), sel_gt(a, b, x, y) = a > b ? x : y and sel_lt
// (ordered compares: false for NaN), cvtt (truncating float -> int32), iadd, iset1, shl23,
// as_float (bit cast). One IEEE operation each; the file is compiled with -ffp-contract=off,
// so no multiply-add is fused and every lane computes what the scalar code computes.
#pragma once
#include <cstdint>

#include "cpu_vec_kernels.h"

// The members of V that AVX2 and AVX-512 spell alike but for the intrinsic prefix PS
// (_mm256 / _mm512) and the width SI (256 / 512): the types, W, one instruction each.
#define ZT_VEC_COMMON_OPS(PS, SI)                                                  \
  using F = __m##SI;                                                               \
  using I = __m##SI##i;                                                            \
  static constexpr int W = SI / 32;                                                \
  static F load(const float* p) { return PS##_loadu_ps(p); }                       \
  static void store(float* p, F a) { PS##_storeu_ps(p, a); }                       \
  static F set1(float a) { return PS##_set1_ps(a); }                               \
  static F add(F a, F b) { return PS##_add_ps(a, b); }                             \
  static F sub(F a, F b) { return PS##_sub_ps(a, b); }                             \
  static F mul(F a, F b) { return PS##_mul_ps(a, b); }                             \
  static F div(F a, F b) { return PS##_div_ps(a, b); }                             \
  static F min(F a, F b) { return PS##_min_ps(a, b); }                             \
  static F max(F a, F b) { return PS##_max_ps(a, b); }                             \
  static I cvtt(F a) { return PS##_cvttps_epi32(a); }                              \
  static I iadd(I a, I b) { return PS##_add_epi32(a, b); }                         \
  static I iset1(int32_t a) { return PS##_set1_epi32(a); }                         \
  static I shl23(I a) { return PS##_slli_epi32(a, 23); }                          \
  static F as_float(I a) { return PS##_castsi##SI##_ps(a); }

// The vector helpers below are forced inline: as calls, every 8/16-lane vector paid a call and
// the loops could not interleave independent iterations (exp_core showed as its own symbol).
#define ZT_VEC_INLINE __attribute__((always_inline)) inline

namespace zt::cpu_ops::vec {
namespace {

// inv_fact[k] = 1.0f / k! in float, the constant the scalar source writes as 1.0f / 6 etc.
// (k! is exact in float for k <= 10; constant evaluation rounds as the run-time division).
template <int Deg>
struct TaylorCoeffs {
  float inv_fact[Deg + 1];
  constexpr TaylorCoeffs() : inv_fact() {
    float f = 1.0f;
    for (int k = 0; k <= Deg; ++k) {
      f *= k > 0 ? static_cast<float>(k) : 1.0f;
      inv_fact[k] = 1.0f / f;
    }
  }
};

// The exp core shared by math::exp2y and math::exp_nonpos, operation by operation:
// n = round(z / ln2) (adding 1.5·2^23 drops the fraction), r = (z - n C1) - n C2 (Cody-Waite),
// p = expm1(r) by Horner on the Taylor coefficients 1/k! (k = Deg .. 1, each the float 1.0f / k!
// as the scalar source writes it), result 2^n + 2^n p. NaN lanes: r is NaN, so the result is.
template <class V, int Deg>
ZT_VEC_INLINE typename V::F exp_core(typename V::F z) {
  using F = typename V::F;
  const F t = V::mul(z, V::set1(1.44269504088896341f));
  const F nf = V::sub(V::add(t, V::set1(12582912.0f)), V::set1(12582912.0f));
  const F r = V::sub(V::sub(z, V::mul(nf, V::set1(0.693145751953125f))), V::mul(nf, V::set1(1.428606765330187e-06f)));
  constexpr TaylorCoeffs<Deg> c;
  F p = V::set1(c.inv_fact[Deg]);
  for (int k = Deg - 1; k >= 1; --k) p = V::add(V::set1(c.inv_fact[k]), V::mul(r, p));
  p = V::mul(r, p);
  const F s = V::as_float(V::shl23(V::iadd(V::cvtt(nf), V::iset1(127))));
  return V::add(s, V::mul(s, p));
}

// math::exp2y(y): clamp with fmaxf/fminf -> max/min with y first (a NaN y gives the clamp
// bound, as fmaxf(NaN, -9) = -9 does), z = 2 y, Taylor degree 8.
template <class V>
ZT_VEC_INLINE typename V::F exp2y_v(typename V::F y) {
  return exp_core<V, 8>(V::mul(V::set1(2.0f), V::min(V::max(y, V::set1(-9.0f)), V::set1(9.0f))));
}

// E = exp2y(kGeluScale * (x + 0.044715 x x x)), as math::gelu / gelu_grad compute it.
template <class V>
ZT_VEC_INLINE typename V::F gelu_e(typename V::F x) {
  const typename V::F cube = V::mul(V::mul(V::mul(V::set1(0.044715f), x), x), x);
  return exp2y_v<V>(V::mul(V::set1(0.7978845608028654f), V::add(x, cube)));
}

// math::exp_nonpos(x): clamp below at kExpNonposMin (NaN stays NaN), Taylor degree 7, 0 below.
template <class V>
ZT_VEC_INLINE typename V::F exp_nonpos_v(typename V::F x) {
  const typename V::F lo = V::set1(kExpMin);
  return V::sel_lt(x, lo, V::set1(0.0f), exp_core<V, 7>(V::sel_gt(lo, x, lo, x)));
}

template <class V>
void gelu_forward_v(float* out, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += V::W) {
    const typename V::F xv = V::load(x + i);
    const typename V::F e = gelu_e<V>(xv);
    V::store(out + i, V::div(V::mul(xv, e), V::add(e, V::set1(1.0f))));  // x E / (E + 1)
  }
}

// math::gelu_grad(x): E inv + 2 x E inv inv s (1 + 3·0.044715 x x), left to right.
template <class V>
ZT_VEC_INLINE typename V::F gelu_grad_v(typename V::F xv) {
  using F = typename V::F;
  const F e = gelu_e<V>(xv);
  const F inv = V::div(V::set1(1.0f), V::add(e, V::set1(1.0f)));
  F t = V::mul(V::mul(V::mul(V::mul(V::mul(V::set1(2.0f), xv), e), inv), inv), V::set1(0.7978845608028654f));
  t = V::mul(t, V::add(V::set1(1.0f), V::mul(V::mul(V::set1(3.0f * 0.044715f), xv), xv)));
  return V::add(V::mul(e, inv), t);
}

template <class V>
void gelu_backward_v(float* dinp, const float* x, const float* dout, int64_t n) {
  for (int64_t i = 0; i < n; i += V::W) {
    const typename V::F g = gelu_grad_v<V>(V::load(x + i));
    V::store(dinp + i, V::add(V::load(dinp + i), V::mul(V::load(dout + i), g)));
  }
}

// As gelu_backward_v with dinp = 0 and dout = d (0 + d·g: the same rounding, -0 becomes +0).
template <class V>
void gelu_backward_inplace_v(float* d, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += V::W) {
    const typename V::F g = gelu_grad_v<V>(V::load(x + i));
    V::store(d + i, V::add(V::set1(0.0f), V::mul(V::load(d + i), g)));
  }
}

template <class V>
float row_max_v(const float* x, int64_t n) {
  typename V::F m = V::set1(-__builtin_inff());
  for (int64_t i = 0; i < n; i += V::W) m = V::max(V::load(x + i), m);
  float lanes[V::W];
  V::store(lanes, m);
  float r = -__builtin_inff();
  for (int l = 0; l < V::W; ++l) r = lanes[l] > r ? lanes[l] : r;
  return r;
}

// The 16 partial sums live in kBlock / W vectors: lane l of vector h is acc16[h * W + l].
template <class V>
void row_exp_v(const float* x, float* e, int64_t n, float m, float* acc16) {
  constexpr int H = kBlock / V::W;
  typename V::F acc[H];
  for (int h = 0; h < H; ++h) acc[h] = V::load(acc16 + h * V::W);
  const typename V::F mv = V::set1(m);
  for (int64_t i = 0; i < n; i += kBlock) {
    for (int h = 0; h < H; ++h) {
      const typename V::F ev = exp_nonpos_v<V>(V::sub(V::load(x + i + h * V::W), mv));
      V::store(e + i + h * V::W, ev);
      acc[h] = V::add(acc[h], ev);
    }
  }
  for (int h = 0; h < H; ++h) V::store(acc16 + h * V::W, acc[h]);
}

template <class V>
void row_scale_v(float* d, const float* e, int64_t n, float inv, float dloss) {
  const typename V::F iv = V::set1(inv), dl = V::set1(dloss);
  for (int64_t i = 0; i < n; i += V::W) V::store(d + i, V::mul(dl, V::mul(V::load(e + i), iv)));
}

template <class V>
void exp_scale_v(const float* s, float* p, int64_t n, float m, float inv) {
  const typename V::F mv = V::set1(m), iv = V::set1(inv);
  for (int64_t i = 0; i < n; i += V::W) V::store(p + i, V::mul(exp_nonpos_v<V>(V::sub(V::load(s + i), mv)), iv));
}

template <class V>
void score_grad_v(float* d, const float* p, int64_t n, float dr, float scale) {
  const typename V::F drv = V::set1(dr), sv = V::set1(scale);
  for (int64_t i = 0; i < n; i += V::W)
    V::store(d + i, V::mul(V::mul(V::load(p + i), V::sub(V::load(d + i), drv)), sv));
}

// The LayerNorm sums keep their 16 partial sums as acc16 does in row_exp_v.
template <class V>
void sum16_v(const float* x, int64_t n, float* acc16) {
  constexpr int H = kBlock / V::W;
  typename V::F acc[H];
  for (int h = 0; h < H; ++h) acc[h] = V::load(acc16 + h * V::W);
  for (int64_t i = 0; i < n; i += kBlock)
    for (int h = 0; h < H; ++h) acc[h] = V::add(acc[h], V::load(x + i + h * V::W));
  for (int h = 0; h < H; ++h) V::store(acc16 + h * V::W, acc[h]);
}

template <class V>
void sqdev16_v(const float* x, int64_t n, float m, float* acc16) {
  constexpr int H = kBlock / V::W;
  typename V::F acc[H];
  const typename V::F mv = V::set1(m);
  for (int h = 0; h < H; ++h) acc[h] = V::load(acc16 + h * V::W);
  for (int64_t i = 0; i < n; i += kBlock) {
    for (int h = 0; h < H; ++h) {
      const typename V::F d = V::sub(V::load(x + i + h * V::W), mv);
      acc[h] = V::add(acc[h], V::mul(d, d));
    }
  }
  for (int h = 0; h < H; ++h) V::store(acc16 + h * V::W, acc[h]);
}

template <class V>
void ln_out_v(float* o, const float* x, const float* w, const float* b, int64_t n, float m, float rs) {
  const typename V::F mv = V::set1(m), rv = V::set1(rs);
  for (int64_t i = 0; i < n; i += V::W) {
    const typename V::F nr = V::mul(V::sub(V::load(x + i), mv), rv);
    V::store(o + i, V::add(V::mul(nr, V::load(w + i)), V::load(b + i)));
  }
}

template <class V>
void ln_dsums_v(const float* x, const float* dy, const float* w, int64_t n, float m, float rs, float* a16,
                float* b16) {
  constexpr int H = kBlock / V::W;
  typename V::F a[H], b[H];
  const typename V::F mv = V::set1(m), rv = V::set1(rs);
  for (int h = 0; h < H; ++h) a[h] = V::load(a16 + h * V::W), b[h] = V::load(b16 + h * V::W);
  for (int64_t i = 0; i < n; i += kBlock) {
    for (int h = 0; h < H; ++h) {
      const int64_t j = i + h * V::W;
      const typename V::F nr = V::mul(V::sub(V::load(x + j), mv), rv);
      const typename V::F dn = V::mul(V::load(w + j), V::load(dy + j));
      a[h] = V::add(a[h], dn);
      b[h] = V::add(b[h], V::mul(dn, nr));
    }
  }
  for (int h = 0; h < H; ++h) V::store(a16 + h * V::W, a[h]), V::store(b16 + h * V::W, b[h]);
}

// rstd * ((dnorm - dnorm_mean) - n * dnorm_n_mean), as math::layernorm_dinp evaluates it.
template <class V>
void ln_dinp_v(float* dx, const float* x, const float* dy, const float* w, int64_t n, float m, float rs, float dmean,
               float dnmean) {
  const typename V::F mv = V::set1(m), rv = V::set1(rs), dm = V::set1(dmean), dnm = V::set1(dnmean);
  for (int64_t i = 0; i < n; i += V::W) {
    const typename V::F nr = V::mul(V::sub(V::load(x + i), mv), rv);
    const typename V::F dn = V::mul(V::load(w + i), V::load(dy + i));
    const typename V::F g = V::mul(rv, V::sub(V::sub(dn, dm), V::mul(nr, dnm)));
    V::store(dx + i, V::add(V::load(dx + i), g));
  }
}

template <class V>
void ln_cols_v(float* acc_w, float* acc_b, const float* x, const float* dy, int64_t n, float m, float rs) {
  const typename V::F mv = V::set1(m), rv = V::set1(rs);
  for (int64_t i = 0; i < n; i += V::W) {
    const typename V::F g = V::load(dy + i);
    V::store(acc_w + i, V::add(V::load(acc_w + i), V::mul(V::mul(V::sub(V::load(x + i), mv), rv), g)));
    V::store(acc_b + i, V::add(V::load(acc_b + i), g));
  }
}

template <class V>
void add_to_v(float* acc, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += V::W) V::store(acc + i, V::add(V::load(acc + i), V::load(x + i)));
}

template <class V>
void dot16_v(const float* a, const float* b, int64_t n, float* acc16) {
  constexpr int H = kBlock / V::W;
  typename V::F acc[H];
  for (int h = 0; h < H; ++h) acc[h] = V::load(acc16 + h * V::W);
  for (int64_t i = 0; i < n; i += kBlock)
    for (int h = 0; h < H; ++h) acc[h] = V::add(acc[h], V::mul(V::load(a + i + h * V::W), V::load(b + i + h * V::W)));
  for (int h = 0; h < H; ++h) V::store(acc16 + h * V::W, acc[h]);
}

// math::sigmoid(x): e = exp_nonpos(−|x|) with −|x| as min(x, 0 − x) (the same value; ±0 give
// the same e = 1), inv = 1 / (1 + e), then x < 0 ? e inv : inv (a NaN x gives NaN either way).
template <class V>
ZT_VEC_INLINE typename V::F sigmoid_v(typename V::F x) {
  using F = typename V::F;
  const F zero = V::set1(0.0f), one = V::set1(1.0f);
  const F e = exp_nonpos_v<V>(V::min(x, V::sub(zero, x)));
  const F inv = V::div(one, V::add(one, e));
  return V::sel_lt(x, zero, V::mul(e, inv), inv);
}

// o = (g σ(g)) u: math::silu(g) * u.
template <class V>
void swiglu_forward_v(float* o, const float* g, const float* u, int64_t n) {
  for (int64_t i = 0; i < n; i += V::W) {
    const typename V::F gv = V::load(g + i);
    V::store(o + i, V::mul(V::mul(gv, sigmoid_v<V>(gv)), V::load(u + i)));
  }
}

// dg = (dy u) (σ (1 + g (1 − σ))), du = dy (g σ): math::silu_grad / silu, left to right.
template <class V>
void swiglu_backward_v(float* dg, float* du, const float* dy, const float* g, const float* u, int64_t n) {
  using F = typename V::F;
  const F one = V::set1(1.0f);
  for (int64_t i = 0; i < n; i += V::W) {
    const F gv = V::load(g + i), uv = V::load(u + i), dyv = V::load(dy + i);
    const F s = sigmoid_v<V>(gv);
    const F sg = V::mul(s, V::add(one, V::mul(gv, V::sub(one, s))));
    V::store(dg + i, V::mul(V::mul(dyv, uv), sg));
    V::store(du + i, V::mul(dyv, V::mul(gv, s)));
  }
}

template <class V>
constexpr Kernels make_kernels(const char* name) {
  return Kernels{name,           gelu_forward_v<V>, gelu_backward_v<V>, row_max_v<V>, row_exp_v<V>, row_scale_v<V>,
                 exp_scale_v<V>, score_grad_v<V>,   sum16_v<V>,         sqdev16_v<V>, ln_out_v<V>, ln_dsums_v<V>,
                 ln_dinp_v<V>,   ln_cols_v<V>,      gelu_backward_inplace_v<V>, add_to_v<V>, dot16_v<V>,
                 swiglu_forward_v<V>, swiglu_backward_v<V>};
}

}  // namespace
}  // namespace zt::cpu_ops::vec
