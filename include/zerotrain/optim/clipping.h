// clipping.h — gradient unscaling and clipping, DeepSpeed's two formulas (docs/config.md §6).
//
// Which one the engine uses (as DeepSpeed does):
//   * ZeRO stages 1/2/3, and stage 0 with fp16 or bf16 (DeepSpeed's fused FP16_Optimizer, also
//     used in bf16 mode): zero_clip(). The norm is taken over the loss-SCALED gradients and the
//     unscale and the clip are folded into one multiplier applied before the optimizer update.
//   * Stage 0 in plain fp32 (no fp16/bf16): fp32_clip_coefficient() on the unscaled gradients;
//     DeepSpeed multiplies the gradients by it only when it is < 1.
// With loss_scale = 1 both give the same coefficient gradient_clipping / (norm + 1e-6) (up to
// rounding order). The reported grad norm is always the pre-clip, unscaled norm.
#pragma once

namespace zt {

struct ZeroClip {
  double unscaled_norm = 0;    // norm / loss_scale: the "grad norm" in logs and metrics
  double clip = 1;             // ((norm/loss_scale) + 1e-6) / gradient_clipping, clamped >= 1 (1 if clipping off)
  double coefficient = 1;      // 1 / clip: the factor the clip applies to the unscaled gradient (<= 1)
  double grad_multiplier = 1;  // 1 / (clip * loss_scale): multiply the scaled gradients by this
};

// scaled_norm: global L2 norm of the loss-scaled gradients (after the DP reduction, padding excluded).
// gradient_clipping <= 0: no clipping, grad_multiplier = 1/loss_scale.
// A non-finite norm (overflow) propagates into the result; the engine skips such steps anyway.
ZeroClip zero_clip(double scaled_norm, double loss_scale, double gradient_clipping);

// Plain fp32 (stage 0, no mixed precision): min(1, max_norm / (norm + 1e-6)); 1 when max_norm <= 0.
double fp32_clip_coefficient(double norm, double max_norm);

}  // namespace zt
