// optimizer_math.h — the per-element optimizer updates (AdamW / Adam, SGD, Lion, Adagrad,
// LAMB), usable from host and device code (ZT_HD). Every backend (CPU kernels, CUDA kernels, the
// host SIMD paths for offload) evaluates exactly these operations in this order; `g` is the
// already-unscaled, clipped gradient. AdamW lives in zt::math, the others in zt::optim.
//
// Lion (Chen et al. 2023; DeepSpeed FusedLion / DeepSpeedCPULion parameters):
//   c = b1 m + (1-b1) g;  p = p (1 - lr wd) - lr sign(c);  m = b2 m + (1-b2) g
//   sign(c) is torch.sign: +1, -1, c itself for ±0 and NaN. (DeepSpeed's fused kernel moves an
//   element whose c is exactly 0 by +lr and its CPU kernel by ∓lr by the zero's sign bit; with
//   torch.sign zero padding stays zero.)
// Adagrad (torch.optim.Adagrad):
//   g' = g + wd p;  s = s + g' g';  p = p - clr g' / (sqrt(s) + eps),  clr = lr / (1 + (t-1) lr_decay)
// LAMB (DeepSpeed FusedLamb, per parameter tensor):
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g g
//   u = m / (sqrt(v) + eps)   (eps_inside_sqrt: m / sqrt(v + eps))   + wd p
//   ratio = 1 when ||p|| or ||u|| is 0, else clamp(||p|| / ||u||, min_coeff, max_coeff)
//           (the upper bound applied first)
//   p = p - step_size ratio u,  step_size = lr sqrt(bc2) / bc1 with bias correction, else lr
//   ||p|| is the norm of p before this step's update, over the whole parameter tensor.
// SGD with momentum, torch.optim.SGD semantics (DeepSpeed passes `"type": "SGD"` straight to torch):
//   d = g + weight_decay * p
//   momentum != 0:  buf = d on the first step, else buf = momentum * buf + (1 - dampening) * d
//                   d = nesterov ? d + momentum * buf : buf
//   p -= lr * d
#pragma once
#include <cmath>

#include "zerotrain/core/dtype.h"

namespace zt::math {

// AdamW / Adam (DeepSpeed FusedAdam semantics).
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

namespace zt::optim {

struct LionParams {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.99f;
  float after_decay = 1.0f;  // 1 - lr * weight_decay, in fp32
};

ZT_HD float torch_sign(float c) { return c > 0.0f ? 1.0f : (c < 0.0f ? -1.0f : c); }

ZT_HD void lion_update(float& p, float& m, float g, const LionParams& a) {
  const float c = a.beta1 * m + (1.0f - a.beta1) * g;
  p = p * a.after_decay - a.lr * torch_sign(c);
  m = a.beta2 * m + (1.0f - a.beta2) * g;
}

struct AdagradParams {
  float clr = 1e-2f;  // lr / (1 + (step - 1) * lr_decay)
  float eps = 1e-10f, weight_decay = 0.0f;
};

ZT_HD void adagrad_update(float& p, float& sum, float g, const AdagradParams& a) {
  if (a.weight_decay != 0.0f) g = g + a.weight_decay * p;
  sum = sum + g * g;
  p = p - a.clr * (g / (sqrtf(sum) + a.eps));
}

struct LambParams {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  float step_size = 1e-3f;  // lr sqrt(bc2) / bc1 (or lr), in fp32 as FusedLamb computes it
  float max_coeff = 10.0f, min_coeff = 0.01f;
  bool eps_inside_sqrt = false;
};

// Phase 1: the moments.
ZT_HD void lamb_moments(float& m, float& v, float g, const LambParams& a) {
  m = a.beta1 * m + (1.0f - a.beta1) * g;
  v = a.beta2 * v + (1.0f - a.beta2) * g * g;
}
// The update direction from the new moments (phase 1 norms it, phase 2 applies it).
ZT_HD float lamb_direction(float p, float m, float v, const LambParams& a) {
  const float denom = a.eps_inside_sqrt ? sqrtf(v + a.eps) : sqrtf(v) + a.eps;
  return m / denom + a.weight_decay * p;
}
// The trust ratio from the parameter's squared norms (summed over every rank's piece).
ZT_HD float lamb_ratio(float w_sq, float u_sq, const LambParams& a) {
  const float w = sqrtf(w_sq), u = sqrtf(u_sq);
  if (w == 0.0f || u == 0.0f) return 1.0f;
  float r = w / u;
  if (r > a.max_coeff) r = a.max_coeff;
  if (r < a.min_coeff) r = a.min_coeff;
  return r;
}
// Phase 2.
ZT_HD void lamb_apply(float& p, float m, float v, float ratio, const LambParams& a) {
  p = p - a.step_size * ratio * lamb_direction(p, m, v, a);
}

struct SgdParams {
  float lr = 1e-3f, momentum = 0.0f, dampening = 0.0f, weight_decay = 0.0f;
  bool nesterov = false;
};

// buf is read/written only when momentum != 0. first_step: no momentum buffer exists yet
// (torch creates it as a copy of d, without dampening).
ZT_HD void sgd_update(float& p, float& buf, float g, const SgdParams& s, bool first_step) {
  float d = g;
  if (s.weight_decay != 0.0f) d += s.weight_decay * p;
  if (s.momentum != 0.0f) {
    buf = first_step ? d : s.momentum * buf + (1.0f - s.dampening) * d;
    d = s.nesterov ? d + s.momentum * buf : buf;
  }
  p -= s.lr * d;
}

}  // namespace zt::optim
