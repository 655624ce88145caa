// ds_defaults.h — DeepSpeed 0.19.5's defaults for the config keys zerotrain reads outside
// zero_optimization, fp16 and bf16 (declared with their defaults in config/zero_keys.h and
// config/precision_keys.h) and the optimizer and
// scheduler params (whose defaults optim/ owns: optim/hparam_defaults.h). The config
// reader fills absent keys from here and the typed config structs (ds_config.h) start from here.
// EngineOptions (zero/engine.h) repeats the engine's share; tests/config/test_defaults_agree.cpp
// asserts that the options built from an empty config equal a default-constructed EngineOptions. Units as in DeepSpeed: bucket/group sizes and thresholds count elements
// (parameters), steps count optimizer steps. Where DeepSpeed changed a default, the value is
// the 0.19.5 one (docs/config.md §16 lists the drifts).
#pragma once
#include <cstdint>

#include "zerotrain/optim/hparam_defaults.h"

namespace zt::ds_defaults {

// top level
inline constexpr int kGradientAccumulationSteps = 1;
inline constexpr double kGradientClipping = 1.0;         // <= 0: off (DeepSpeed < 0.19.3: 0.0)
inline constexpr bool kPrescaleGradients = false;
inline constexpr double kGradientPredivideFactor = 1.0;
inline constexpr bool kManagedGradientAccumulation = true;
inline constexpr const char* kGradientAllreduceOp = "mean";

}  // namespace zt::ds_defaults
