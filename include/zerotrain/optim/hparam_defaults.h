// hparam_defaults.h — DeepSpeed 0.19.5's defaults of the optimizer and LR-schedule
// hyper-parameters. optim/ owns them: OptimizerHparams and LrScheduleSpec start from them, and the
// config layer fills absent `optimizer.params` / `scheduler.params` keys from the same constants.
// Steps count optimizer steps.
#pragma once
#include <cstdint>

namespace zt::optim_defaults {

// FusedAdam / DeepSpeedCPUAdam; torch.optim.SGD
inline constexpr double kLr = 1e-3;
inline constexpr double kAdamBeta1 = 0.9;
inline constexpr double kAdamBeta2 = 0.999;
inline constexpr double kAdamEps = 1e-8;
inline constexpr double kWeightDecay = 0.0;
inline constexpr bool kAdamBiasCorrection = true;
inline constexpr bool kAdamWMode = true;      // "adam" is AdamW unless adam_w_mode: false
inline constexpr double kSgdMomentum = 0.0;
inline constexpr double kSgdDampening = 0.0;
inline constexpr double kLionBeta2 = 0.999;   // FusedLion / DeepSpeedCPULion: betas (0.9, 0.999)
inline constexpr double kAdagradLr = 1e-2;    // torch.optim.Adagrad / DeepSpeedCPUAdagrad
inline constexpr double kAdagradEps = 1e-10;
inline constexpr double kLambMaxCoeff = 10.0;  // FusedLamb
inline constexpr double kLambMinCoeff = 0.01;

}  // namespace zt::optim_defaults

namespace zt::sched_defaults {

inline constexpr int64_t kWarmupNumSteps = 1000;
inline constexpr double kWarmupMinLr = 0.0;
inline constexpr double kWarmupDecayMaxLr = 0.001;  // WarmupDecayLR; WarmupLR: the optimizer's lr
inline constexpr double kWarmupMinRatio = 0.0;      // WarmupCosineLR
inline constexpr double kCosMinRatio = 0.0001;      // WarmupCosineLR
inline constexpr double kLrRangeTestMinLr = 1e-3;
inline constexpr int64_t kLrRangeTestStepSize = 2000;
inline constexpr double kLrRangeTestStepRate = 1.0;
inline constexpr double kCycleFirstStepSize = 2000;  // OneCycle; second: null -> first
inline constexpr double kCycleMinMom = 0.8;
inline constexpr double kCycleMaxMom = 0.9;

}  // namespace zt::sched_defaults
