// loss_scaler.h — fp16 loss scaling with DeepSpeed's exact update rules (docs/config.md §6).
//
// Flavors:
//   Zero     — ZeRO stages 1/2/3 (DeepSpeed `DynamicLossScaler`): hysteresis, optional
//              consecutive_hysteresis, and an error when an overflow arrives at the minimum scale.
//   NonZero  — stage 0 fp16 (DeepSpeed `FP16_Optimizer`): no hysteresis, no error at the minimum
//              (the scale just stays at min_loss_scale).
//   Static   — fp16.loss_scale > 0 (or bf16/fp32 with scale 1): the scale never changes.
// The engine multiplies the loss by scale() before backward, checks the gradients for inf/NaN, and
// calls update(overflow) once per optimizer-step attempt; on overflow the step is skipped (and the
// LR schedule is not stepped).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace zt {

enum class LossScalerFlavor { Zero, NonZero, Static };

struct LossScalerConfig {
  LossScalerFlavor flavor = LossScalerFlavor::Zero;
  double static_scale = 1.0;         // Static only (fp16.loss_scale, or 1.0 for bf16/fp32)
  int initial_scale_power = 16;      // dynamic: initial scale 2^p (p may be negative)
  int64_t loss_scale_window = 1000;  // clean updates between doublings (> 0 when dynamic)
  int64_t hysteresis = 2;            // Zero only; <= 0 means the scale never decreases
  bool consecutive_hysteresis = false;  // Zero only: refill hysteresis on every clean step
  double min_loss_scale = 1.0;
};

// Thrown by update(true) in the Zero flavor when the scale is already at min_loss_scale.
// The message is DeepSpeed's; the trainer reports it (with the step) and stops the run.
class LossScaleAtMinimum : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class LossScaler {
 public:
  // Checkpointed state (DeepSpeed keeps the same four fields in its scaler object).
  struct State {
    double cur_scale = 1.0;
    int64_t cur_iter = 0;
    int64_t last_overflow_iter = -1;
    int64_t cur_hysteresis = 0;
  };

  explicit LossScaler(const LossScalerConfig& cfg);  // ZT_CHECKs window > 0 when dynamic
  double scale() const { return state_.cur_scale; }
  bool dynamic() const { return cfg_.flavor != LossScalerFlavor::Static; }
  // One optimizer-step attempt finished; overflow = any inf/NaN in the gradients.
  void update(bool overflow);

  const State& state() const { return state_; }
  void set_state(const State& s) { state_ = s; }
  const LossScalerConfig& config() const { return cfg_; }

 private:
  LossScalerConfig cfg_;
  State state_;
};

}  // namespace zt
