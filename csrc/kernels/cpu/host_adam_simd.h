// host_adam_simd.h — the Adam, Lion and Adagrad loops written once over a vector-traits type V, included by each
// SIMD translation unit after it defines its V (host_adam_avx2.cpp, host_adam_avx512.cpp).
// Everything here is in an anonymous namespace: each including file gets its own copy,
// compiled with its own flags (see host_adam_kernels.h for why that matters).
//
// V provides: type F (W float lanes), constant W, set1/add/sub/mul/div/sqrt (one IEEE
// operation each, no FMA), sign (torch.sign by compares and blends), and load/store for the storage tags below plus bf16_round (value
// of from_f32<bf16>(x) read back as fp32).
//
// The arithmetic is math::adam_update, operation by operation, in its evaluation order:
//   g  = to_f32(g) * grad_scale;            L2 mode: g = g + wd * p
//   m  = b1 * m + (1 - b1) * g;             v = b2 * v + ((1 - b2) * g) * g
//   den = sqrt(v / bc2) + eps;              u = (m / bc1) / den;   AdamW: u = u + wd * p
//   p  = p - lr * u
// then p, m, v are stored in their dtypes and out = from_f32<O>(to_f32(p_stored)).
#pragma once
#include <cstdint>

#include "host_adam_kernels.h"

namespace zt::host_optim::detail {
namespace {

struct F32Tag {};
struct Bf16Tag {};
struct F16Tag {};
struct NoneTag {};

// The members of V that differ between AVX2 and AVX-512 only by the intrinsic prefix PS
// (_mm256 / _mm512) and vector width SI (256 / 512), and HPS / HSI for half-width vectors:
// the vector types, W, 16-bit loads/stores, one IEEE operation each,
// fp32 load/store, bf16 load (zero-extend, shift into the high half) and the bf16 rounding of
// zt::f32_to_bf16_bits per lane: NaN -> (u >> 16) | 0x40, else (u + 0x7fff + ((u >> 16) & 1)) >> 16
// (ties to even; overflow rounds to inf). fp16 -> fp32 (VCVTPH2PS) is exact, subnormals included;
// only a signalling NaN's quiet bit may differ from f16_bits_to_f32, and the gradient is always
// multiplied (which quiets it) before use. fp32 -> fp16 (VCVTPS2PH, round to nearest even):
// overflow to inf, subnormals kept, NaN payload truncated with the quiet bit set, which is
// f32_to_f16_bits (the tests check every path on every fp16 pattern and on edge fp32 patterns).
// V supplies widen16 / narrow16 (16 <-> 32-bit lanes) and nan_select.
#define ZT_HOST_ADAM_COMMON_OPS(PS, SI, HPS, HSI)                                                         \
  using F = __m##SI;                                                                                     \
  using I = __m##SI##i;                                                                                  \
  using Half = __m##HSI##i; /* W 16-bit values */                                                        \
  static constexpr int64_t W = SI / 32;                                                                  \
  static Half load_half(const void* base, int64_t i) {                                                   \
    return HPS##_loadu_si##HSI(reinterpret_cast<const Half*>(static_cast<const uint16_t*>(base) + i));   \
  }                                                                                                      \
  static void store_half(void* base, int64_t i, Half h) {                                                \
    HPS##_storeu_si##HSI(reinterpret_cast<Half*>(static_cast<uint16_t*>(base) + i), h);                  \
  }                                                                                                      \
  static F set1(float x) { return PS##_set1_ps(x); }                                                     \
  static F add(F a, F b) { return PS##_add_ps(a, b); }                                                   \
  static F sub(F a, F b) { return PS##_sub_ps(a, b); }                                                   \
  static F mul(F a, F b) { return PS##_mul_ps(a, b); }                                                   \
  static F div(F a, F b) { return PS##_div_ps(a, b); }                                                   \
  static F sqrt(F a) { return PS##_sqrt_ps(a); }                                                         \
  static F load(F32Tag, const void* base, int64_t i) { return PS##_loadu_ps(static_cast<const float*>(base) + i); } \
  static void store(F32Tag, void* base, int64_t i, F x) { PS##_storeu_ps(static_cast<float*>(base) + i, x); }    \
  static F load(Bf16Tag, const void* base, int64_t i) {                                                  \
    return PS##_castsi##SI##_ps(PS##_slli_epi32(widen16(load_half(base, i)), 16));                       \
  }                                                                                                      \
  static I bf16_bits(F x) {                                                                              \
    const I u = PS##_castps_si##SI(x);                                                                     \
    const I lsb = PS##_and_si##SI(PS##_srli_epi32(u, 16), PS##_set1_epi32(1));                             \
    const I rounded = PS##_srli_epi32(PS##_add_epi32(PS##_add_epi32(u, PS##_set1_epi32(0x7fff)), lsb), 16); \
    const I quiet = PS##_or_si##SI(PS##_srli_epi32(u, 16), PS##_set1_epi32(0x40));                         \
    return nan_select(PS##_and_si##SI(u, PS##_set1_epi32(0x7fffffff)), rounded, quiet);                    \
  }                                                                                                      \
  static F bf16_round(F x) { return PS##_castsi##SI##_ps(PS##_slli_epi32(bf16_bits(x), 16)); }           \
  static void store(Bf16Tag, void* base, int64_t i, F x) { store_half(base, i, narrow16(bf16_bits(x))); } \
  static F load(F16Tag, const void* base, int64_t i) { return PS##_cvtph_ps(load_half(base, i)); }       \
  static void store(F16Tag, void* base, int64_t i, F x) {                                                \
    store_half(base, i, PS##_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));                \
  }

template <class V, class P, class M, class G, class O>
void adam_loop(const AdamArgs& a, int64_t begin, int64_t end) {
  using F = typename V::F;
  const F gs = V::set1(a.grad_scale), lr = V::set1(a.lr), wd = V::set1(a.weight_decay);
  const F b1 = V::set1(a.beta1), b2 = V::set1(a.beta2), eps = V::set1(a.eps);
  const F omb1 = V::set1(1.0f - a.beta1), omb2 = V::set1(1.0f - a.beta2);
  const F bc1 = V::set1(a.bias_correction1), bc2 = V::set1(a.bias_correction2);
  const bool l2 = !a.adam_w_mode;
  for (int64_t i = begin; i < end; i += V::W) {
    F p = V::load(P{}, a.p, i), m = V::load(M{}, a.m, i), v = V::load(M{}, a.v, i);
    F g = V::mul(V::load(G{}, a.g, i), gs);
    if (l2) g = V::add(g, V::mul(wd, p));
    m = V::add(V::mul(b1, m), V::mul(omb1, g));
    v = V::add(V::mul(b2, v), V::mul(V::mul(omb2, g), g));
    const F den = V::add(V::sqrt(V::div(v, bc2)), eps);
    F u = V::div(V::div(m, bc1), den);
    if (!l2) u = V::add(u, V::mul(wd, p));
    p = V::sub(p, V::mul(lr, u));
    V::store(P{}, a.p, i, p);
    V::store(M{}, a.m, i, m);
    V::store(M{}, a.v, i, v);
    if constexpr (!__is_same(O, NoneTag)) {
      if constexpr (__is_same(P, Bf16Tag)) p = V::bf16_round(p);  // the stored master weight
      V::store(O{}, a.out, i, p);
    }
  }
}

// Storage tag for a dtype code, as a call f(tag).
template <class Fn>
void with_tag(uint8_t code, Fn&& f) {
  switch (code) {
    case kF32: f(F32Tag{}); return;
    case kBF16: f(Bf16Tag{}); return;
    case kF16: f(F16Tag{}); return;
    default: f(NoneTag{}); return;
  }
}

// p and m/v are F32 or BF16 (checked by the dispatcher), so only those are instantiated.
template <class Fn>
void with_master_tag(uint8_t code, Fn&& f) {
  if (code == kBF16) f(Bf16Tag{});
  else f(F32Tag{});
}

// optim::lion_update, operation by operation:
//   g = to_f32(g) * grad_scale;  c = b1 * m + (1 - b1) * g;  p = p * after_decay - lr * sign(c)
//   m = b2 * m + (1 - b2) * g
// sign is V::sign: +1 / -1, c itself for ±0 and NaN.
template <class V, class P, class S, class G, class O>
void lion_loop(const StateArgs& a, int64_t begin, int64_t end) {
  using F = typename V::F;
  const F gs = V::set1(a.grad_scale), lr = V::set1(a.lr), ad = V::set1(a.after_decay);
  const F b1 = V::set1(a.beta1), b2 = V::set1(a.beta2);
  const F omb1 = V::set1(1.0f - a.beta1), omb2 = V::set1(1.0f - a.beta2);
  for (int64_t i = begin; i < end; i += V::W) {
    F p = V::load(P{}, a.p, i), m = V::load(S{}, a.s, i);
    const F g = V::mul(V::load(G{}, a.g, i), gs);
    const F c = V::add(V::mul(b1, m), V::mul(omb1, g));
    p = V::sub(V::mul(p, ad), V::mul(lr, V::sign(c)));
    m = V::add(V::mul(b2, m), V::mul(omb2, g));
    V::store(P{}, a.p, i, p);
    V::store(S{}, a.s, i, m);
    if constexpr (!__is_same(O, NoneTag)) V::store(O{}, a.out, i, p);
  }
}

// optim::adagrad_update, operation by operation:
//   g = to_f32(g) * grad_scale;  wd != 0: g = g + wd * p;  s = s + g * g
//   p = p - clr * (g / (sqrt(s) + eps))
template <class V, class P, class S, class G, class O>
void adagrad_loop(const StateArgs& a, int64_t begin, int64_t end) {
  using F = typename V::F;
  const F gs = V::set1(a.grad_scale), clr = V::set1(a.clr), eps = V::set1(a.eps), wd = V::set1(a.weight_decay);
  const bool decay = a.weight_decay != 0.0f;
  for (int64_t i = begin; i < end; i += V::W) {
    F p = V::load(P{}, a.p, i), s = V::load(S{}, a.s, i);
    F g = V::mul(V::load(G{}, a.g, i), gs);
    if (decay) g = V::add(g, V::mul(wd, p));
    s = V::add(s, V::mul(g, g));
    p = V::sub(p, V::mul(clr, V::div(g, V::add(V::sqrt(s), eps))));
    V::store(P{}, a.p, i, p);
    V::store(S{}, a.s, i, s);
    if constexpr (!__is_same(O, NoneTag)) V::store(O{}, a.out, i, p);
  }
}

// Calls f(P{}, S{}, G{}, O{}) with the storage tags of the operands' dtype codes (p and the
// states: F32 or BF16, checked by the dispatcher, so only those are instantiated; g never none).
// Each tag type is named in the lambda that receives it (decltype of a captured parameter in a
// nested generic lambda can come out as a reference with GCC).
template <class Fn>
void with_operand_tags(uint8_t pt, uint8_t st, uint8_t gt, uint8_t ot, Fn&& f) {
  with_master_tag(pt, [&](auto p) {
    using P = decltype(p);
    with_master_tag(st, [&](auto s) {
      using S = decltype(s);
      with_tag(gt, [&](auto g) {
        using G = decltype(g);
        with_tag(ot, [&](auto o) {
          if constexpr (!__is_same(G, NoneTag)) f(P{}, S{}, G{}, decltype(o){});
        });
      });
    });
  });
}

// zero_ops::accumulate with alpha 1: dst = (overwrite ? 0 : dst) + src, one IEEE add per lane.
template <class V, class D, class S>
void accumulate_loop(const AccumulateArgs& a, int64_t begin, int64_t end) {
  const typename V::F zero = V::set1(0.0f);
  for (int64_t i = begin; i < end; i += V::W) {
    const typename V::F base = a.overwrite ? zero : V::load(D{}, a.dst, i);
    V::store(D{}, a.dst, i, V::add(base, V::load(S{}, a.src, i)));
  }
}

template <class V>
void accumulate_dispatch(const AccumulateArgs& a, int64_t begin, int64_t end) {
  with_master_tag(a.dt, [&](auto d) {
    using D = decltype(d);
    with_tag(a.st, [&](auto s) {
      using S = decltype(s);
      if constexpr (!__is_same(S, NoneTag)) accumulate_loop<V, D, S>(a, begin, end);
    });
  });
}

template <class V>
void adam_dispatch(const AdamArgs& a, int64_t begin, int64_t end) {
  with_operand_tags(a.pt, a.st, a.gt, a.ot, [&](auto p, auto s, auto g, auto o) {
    adam_loop<V, decltype(p), decltype(s), decltype(g), decltype(o)>(a, begin, end);
  });
}

// lion_loop or adagrad_loop for the operands' dtypes.
template <class V>
void state_dispatch(const StateArgs& a, int64_t begin, int64_t end, bool lion) {
  with_operand_tags(a.pt, a.st, a.gt, a.ot, [&](auto p, auto s, auto g, auto o) {
    if (lion) lion_loop<V, decltype(p), decltype(s), decltype(g), decltype(o)>(a, begin, end);
    else adagrad_loop<V, decltype(p), decltype(s), decltype(g), decltype(o)>(a, begin, end);
  });
}

}  // namespace
}  // namespace zt::host_optim::detail
