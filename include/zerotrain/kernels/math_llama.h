// math_llama.h — per-element math of the Llama block's ops (RMSNorm backward, SiLU for SwiGLU),
// shared by the CPU kernels and the CUDA kernels (ZT_HD), as math.h.
#pragma once
#include "zerotrain/kernels/math.h"

namespace zt::math {

// RMSNorm: rstd = 1 / sqrt(mean x² + eps) (layernorm_rstd of the mean square), n = x rstd,
// out = n w. Backward of one element given the row mean of dnorm · n (dnorm = w dout):
//   dx = rstd (dnorm − n mean(dnorm n))
ZT_HD float rmsnorm_dinp(float dnorm, float n, float dnorm_n_mean, float rstd) {
  return rstd * (dnorm - n * dnorm_n_mean);
}

// Logistic sigmoid σ(x) = 1 / (1 + exp(−x)) from e = exp(−|x|) in (0, 1] (exp_nonpos: branch-free,
// no overflow): σ = 1 / (1 + e) for x >= 0, e / (1 + e) below. NaN in, NaN out.
ZT_HD float sigmoid(float x) {
  const float e = exp_nonpos(-fabsf(x));
  const float inv = 1.0f / (1.0f + e);
  return x >= 0.0f ? inv : e * inv;
}
// SiLU (SwiGLU's gate activation) silu(x) = x σ(x) and its derivative σ(x) (1 + x (1 − σ(x))).
ZT_HD float silu(float x) { return x * sigmoid(x); }
ZT_HD float silu_grad(float x) {
  const float s = sigmoid(x);
  return s * (1.0f + x * (1.0f - s));
}

}  // namespace zt::math
