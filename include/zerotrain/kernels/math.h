// math.h — per-element math shared by the CPU kernels and the CUDA kernels (ZT_HD).
// Written once so the CPU tests check exactly the arithmetic the GPU runs.
#pragma once
#include <cmath>
#include <cstdint>

#include "zerotrain/core/dtype.h"

namespace zt::math {

// GELU, tanh approximation (GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// Written with E = exp(2u), u = sqrt(2/pi)(x + 0.044715 x^3): 1 + tanh(u) = 2E/(E+1) and
// 1 − tanh² = 4E/(E+1)², so no 1 + tanh cancellation for negative x, and with a branch-free
// exp so the CPU loops vectorise (glibc's scalar tanhf was a quarter of a CPU training step,
// docs/benchmarks.md). The same code runs in the CUDA kernels.
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)

// exp(2y): z = n·ln2 + r, |r| <= ln2/2 (Cody–Waite split of ln2), expm1(r) by its Taylor series
// to r^8 (truncation < 1e-9 relative): a few ulp. y is clamped to [-9, 9] (|n| <= 26), where
// tanh(y) already rounds to ±1 in fp32. NaN in, NaN out.
ZT_HD float exp2y(float y) {
  const float z = 2.0f * fminf(fmaxf(y, -9.0f), 9.0f);
  const float t = z * 1.44269504088896341f;
  const float nf = (t + 12582912.0f) - 12582912.0f;  // round to nearest: adding 1.5·2^23 drops the fraction
  const int32_t ni = static_cast<int32_t>(nf);
  const float r = (z - nf * 0.693145751953125f) - nf * 1.428606765330187e-06f;
  const float p =
      r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040 +
                                                                                                     r * (1.0f / 40320))))))));
  const float s = f32_from_bits(static_cast<uint32_t>((ni + 127) << 23));  // 2^ni
  return s + s * p;
}
ZT_HD float gelu(float x) {
  const float E = exp2y(kGeluScale * (x + 0.044715f * x * x * x));
  return x * E / (E + 1.0f);
}
ZT_HD float gelu_grad(float x) {
  const float E = exp2y(kGeluScale * (x + 0.044715f * x * x * x));
  const float inv = 1.0f / (E + 1.0f);
  return E * inv + 2.0f * x * E * inv * inv * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
}

// exp(x) for the softmax range x <= 0 (x = logit - row max), branch-free so it vectorises; the
// SIMD copies in csrc/kernels/cpu/cpu_vec_simd.h repeat these operations one for one (no FMA), so
// every ISA path is bitwise equal to this function. Cody-Waite reduction x = n ln2 + r,
// |r| <= ln2/2, n in [-126, 0]; exp(r) - 1 by its Taylor series to r^7 (truncation < 6e-9
// relative): within 4 ulp of exp. Below kExpNonposMin (= ln FLT_MIN) the result is 0, where
// exp would be subnormal (< 1.2e-38, nothing next to the row's max term e^0 = 1). -inf gives 0,
// NaN gives NaN; valid up to x = 88 (no overflow handling: never needed for x - max).
constexpr float kExpNonposMin = -87.3365f;
ZT_HD float exp_nonpos(float x) {
  const float xc = kExpNonposMin > x ? kExpNonposMin : x;  // NaN stays NaN
  const float t = xc * 1.44269504088896341f;
  const float nf = (t + 12582912.0f) - 12582912.0f;  // round to nearest: adding 1.5·2^23 drops the fraction
  const int32_t ni = static_cast<int32_t>(xc == xc ? nf : 0.0f);  // NaN: any n (r is NaN), no UB
  const float r = (xc - nf * 0.693145751953125f) - nf * 1.428606765330187e-06f;
  const float p =
      r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040)))))));
  const float s = f32_from_bits(static_cast<uint32_t>((ni + 127) << 23));  // 2^ni, a normal number
  const float e = s + s * p;
  return x < kExpNonposMin ? 0.0f : e;
}

// ReLU and its derivative (0 at x == 0).
ZT_HD float relu(float x) { return x > 0.0f ? x : 0.0f; }
ZT_HD float relu_grad(float x) { return x > 0.0f ? 1.0f : 0.0f; }

// LayerNorm row statistics: mean = sum x / C, var = sum (x - mean)^2 / C (biased, as PyTorch),
// rstd = 1 / sqrt(var + eps). Normalised value n = (x - mean) rstd; out = n w + b.
ZT_HD float layernorm_rstd(float var, float eps) { return 1.0f / sqrtf(var + eps); }
// Backward of one element given the row means of dnorm = w dout and of dnorm * n:
//   dx = rstd (dnorm - mean(dnorm) - n mean(dnorm n))
ZT_HD float layernorm_dinp(float dnorm, float n, float dnorm_mean, float dnorm_n_mean, float rstd) {
  return rstd * (dnorm - dnorm_mean - n * dnorm_n_mean);
}

// Causal attention scores are q.k scaled by 1/sqrt(head size).
ZT_HD float attention_scale(int head_size) { return 1.0f / sqrtf(static_cast<float>(head_size)); }

}  // namespace zt::math
