// clipping.cpp — DeepSpeed's gradient-clipping arithmetic (docs/config.md §6).
#include "zerotrain/optim/clipping.h"

#include <algorithm>

namespace zt {

ZeroClip zero_clip(double scaled_norm, double loss_scale, double gradient_clipping) {
  ZeroClip c;
  c.unscaled_norm = scaled_norm / loss_scale;
  if (gradient_clipping > 0.0) {
    c.clip = std::max(1.0, (c.unscaled_norm + 1e-6) / gradient_clipping);
    // NaN norm: std::max(1.0, NaN) returns 1.0; keep the NaN visible instead.
    if (c.unscaled_norm != c.unscaled_norm) c.clip = c.unscaled_norm;
  }
  c.coefficient = 1.0 / c.clip;
  c.grad_multiplier = 1.0 / (c.clip * loss_scale);
  return c;
}

double fp32_clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0;
  double coef = max_norm / (norm + 1e-6);
  if (coef != coef) return coef;  // NaN norm stays visible
  return std::min(1.0, coef);
}

}  // namespace zt
