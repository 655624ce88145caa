// loss_scaler.cpp — DeepSpeed's dynamic loss-scale update rules (docs/config.md §6).
#include "zerotrain/optim/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "zerotrain/core/check.h"

namespace zt {

LossScaler::LossScaler(const LossScalerConfig& cfg) : cfg_(cfg) {
  if (cfg_.flavor == LossScalerFlavor::Static) {
    ZT_CHECK(cfg_.static_scale > 0, "static loss scale must be > 0");
    state_.cur_scale = cfg_.static_scale;
  } else {
    ZT_CHECK(cfg_.loss_scale_window > 0, "loss_scale_window must be > 0 for dynamic loss scaling");
    state_.cur_scale = std::ldexp(1.0, cfg_.initial_scale_power);
  }
  state_.cur_iter = 0;
  state_.last_overflow_iter = -1;
  state_.cur_hysteresis = cfg_.hysteresis;
}

void LossScaler::update(bool overflow) {
  State& s = state_;
  if (cfg_.flavor == LossScalerFlavor::Static) {
    s.cur_iter += 1;
    return;
  }
  const bool zero = cfg_.flavor == LossScalerFlavor::Zero;
  if (overflow) {
    // Zero: hysteresis absorbs overflows until it reaches 1; only then does the scale drop.
    if (!zero || cfg_.hysteresis == 1 || s.cur_hysteresis == 1) {
      if (zero && s.cur_scale == cfg_.min_loss_scale)
        throw LossScaleAtMinimum("Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.");
      s.cur_scale = std::max(s.cur_scale / 2.0, cfg_.min_loss_scale);
    } else {
      s.cur_hysteresis -= 1;
    }
    s.last_overflow_iter = s.cur_iter;
  } else {
    if (zero && cfg_.consecutive_hysteresis) s.cur_hysteresis = cfg_.hysteresis;
    // stable counts clean updates since the last overflow (from last_overflow_iter = -1 at start).
    int64_t stable = s.cur_iter - s.last_overflow_iter - 1;
    if (stable > 0 && stable % cfg_.loss_scale_window == 0) {
      if (zero && !cfg_.consecutive_hysteresis) s.cur_hysteresis = cfg_.hysteresis;
      s.cur_scale *= 2.0;
    }
  }
  s.cur_iter += 1;
}

}  // namespace zt
