// optimizer_hparams.h — the DeepSpeed `optimizer` section's hyper-parameters, typed, and the
// per-step update parameters built from them (docs/config.md §4). config/optim_inputs.h
// reads them from the config.
//
// Supported types: "Adam"/"AdamW" (case-insensitive, DeepSpeed FusedAdam / DeepSpeedCPUAdam
// semantics), "SGD" (case-sensitive, a torch.optim name; torch semantics), and DeepSpeed's
// "Lion", "Adagrad" and "LAMB" (case-insensitive; optimizer_math.h). Every other type is an
// InputError saying it is not supported.
// Effective decoupled weight decay: adam_w_mode = (type == "adamw") || params.adam_w_mode (default
// true), so plain "Adam" is AdamW unless "adam_w_mode": false.
// Step numbering: `step` counts SUCCESSFUL optimizer steps including the current one (1, 2, …),
// as FusedAdam's per-group step counter; skipped (overflow) steps do not count.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "zerotrain/optim/hparam_defaults.h"
#include "zerotrain/kernels/math.h"
#include "zerotrain/optim/lr_schedule.h"
#include "zerotrain/kernels/optimizer_math.h"

namespace zt {

enum class OptimizerKind { Adam, SGD, Lion, Adagrad, Lamb };

struct OptimizerHparams {
  OptimizerKind kind = OptimizerKind::Adam;
  std::string type;        // resolved name: "adam", "adamw", "SGD", "lion", "adagrad" or "lamb"
  double lr = optim_defaults::kLr;  // base lr (before the schedule)
  // Adam / AdamW (defaults: FusedAdam's)
  double beta1 = optim_defaults::kAdamBeta1, beta2 = optim_defaults::kAdamBeta2, eps = optim_defaults::kAdamEps;
  double weight_decay = optim_defaults::kWeightDecay;
  bool bias_correction = optim_defaults::kAdamBiasCorrection;
  bool adam_w_mode = optim_defaults::kAdamWMode;  // effective (see above)
  // SGD (defaults: torch's)
  double momentum = optim_defaults::kSgdMomentum, dampening = optim_defaults::kSgdDampening;
  bool nesterov = false;
  // Adagrad (torch.optim.Adagrad's defaults; lr and eps default to 1e-2 and 1e-10)
  double lr_decay = 0.0, initial_accumulator_value = 0.0;
  // LAMB (FusedLamb's defaults; betas, eps, bias_correction as Adam's)
  double max_coeff = optim_defaults::kLambMaxCoeff, min_coeff = optim_defaults::kLambMinCoeff;
  bool eps_inside_sqrt = false;

  // OneCycle momentum cycling needs betas (it cycles beta1).
  bool has_betas() const { return kind == OptimizerKind::Adam || kind == OptimizerKind::Lion || kind == OptimizerKind::Lamb; }
  // Per-element optimizer states besides the master weights: Adam and LAMB 2 (exp_avg,
  // exp_avg_sq), SGD 1 with momentum else 0 (momentum), Lion 1 (exp_avg), Adagrad 1 (sum).
  int moment_count() const;
  // Checkpoint / report names of those states, in buffer order.
  std::vector<std::string> moment_names() const;
  // LAMB's trust ratio needs whole-parameter norms: at stages 1-3 one all-reduce per step.
  bool needs_param_norms() const { return kind == OptimizerKind::Lamb; }
  std::string describe() const;  // one line for the resolved-config printout
};

// Adam parameters for successful step `step` (>= 1), with the schedule's current values
// (lr, and beta1/beta2 when the schedule cycles momentum). Bias corrections 1 - beta^step are
// computed in double with the betas in effect for this step.
math::AdamParams adam_params_for_step(const OptimizerHparams& h, int64_t step, const LrValues& sched);

// SGD parameters with the schedule's current lr.
optim::SgdParams sgd_params_for_step(const OptimizerHparams& h, const LrValues& sched);

// Lion / Adagrad / LAMB parameters for successful step `step` (>= 1) with the schedule's values.
optim::LionParams lion_params_for_step(const OptimizerHparams& h, const LrValues& sched);
optim::AdagradParams adagrad_params_for_step(const OptimizerHparams& h, int64_t step, const LrValues& sched);
optim::LambParams lamb_params_for_step(const OptimizerHparams& h, int64_t step, const LrValues& sched);

// CPU loop of optim::sgd_update over n elements. momentum_buf may be null when momentum == 0.
// first_step: the momentum buffer has never been written (torch creates it on the first step).
void sgd_step_cpu(float* params, float* momentum_buf, const float* grads, int64_t n, const optim::SgdParams& s,
                  bool first_step);

}  // namespace zt
