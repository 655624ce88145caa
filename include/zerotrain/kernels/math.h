// math.h — per-element math shared by the CPU kernels and the CUDA kernels (ZT_HD).
// Written once so the CPU tests check exactly the arithmetic the GPU runs.
#pragma once
#include <cmath>

#include "zerotrain/core/dtype.h"

namespace zt::math {

// GELU, tanh approximation (GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
ZT_HD float gelu(float x) {
  float cube = 0.044715f * x * x * x;
  return 0.5f * x * (1.0f + tanhf(kGeluScale * (x + cube)));
}
ZT_HD float gelu_grad(float x) {
  float cube = 0.044715f * x * x * x;
  float t = tanhf(kGeluScale * (x + cube));
  float sech2 = 1.0f - t * t;
  return 0.5f * (1.0f + t) + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
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

// AdamW / Adam (DeepSpeed FusedAdam semantics). `g` is the already-unscaled, clipped gradient.
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   adam_w_mode: p -= lr (m/bc1 / (sqrt(v/bc2) + eps) + wd p)
//   else (L2):   g += wd p first, then p -= lr m/bc1 / (sqrt(v/bc2) + eps)
// bc1 = 1 - b1^t and bc2 = 1 - b2^t when bias correction is on, else 1.
struct AdamParams {
  float lr, beta1, beta2, eps, weight_decay;
  float bias_correction1, bias_correction2;
  bool adam_w_mode;
};
ZT_HD void adam_update(float& p, float& m, float& v, float g, const AdamParams& a) {
  if (!a.adam_w_mode) g += a.weight_decay * p;
  m = a.beta1 * m + (1.0f - a.beta1) * g;
  v = a.beta2 * v + (1.0f - a.beta2) * g * g;
  float denom = sqrtf(v / a.bias_correction2) + a.eps;
  float update = (m / a.bias_correction1) / denom;
  if (a.adam_w_mode) update += a.weight_decay * p;
  p -= a.lr * update;
}

}  // namespace zt::math
