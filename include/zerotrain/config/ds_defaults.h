// ds_defaults.h — DeepSpeed 0.19.5's defaults for the keys zerotrain reads: the one table.
// The config reader fills absent keys from here, the typed config structs (ds_config.h), the
// optimizer / schedule inputs (optim/) and EngineOptions start from here, so a default is
// written once. Units as in DeepSpeed: bucket/group sizes and thresholds count elements
// (parameters), steps count optimizer steps. Where DeepSpeed changed a default, the value is
// the 0.19.5 one (docs/config.md §16 lists the drifts).
#pragma once
#include <cstdint>

namespace zt::ds_defaults {

// zero_optimization
inline constexpr int kStage = 0;
inline constexpr bool kOverlapComm = false;              // stage 3 resolves it to true
inline constexpr bool kContiguousGradients = true;
inline constexpr bool kReduceScatter = true;
inline constexpr bool kUseMultiRankBucketAllreduce = true;
inline constexpr bool kAllgatherPartitions = true;
inline constexpr bool kLoadFromFp32Weights = true;
inline constexpr bool kElasticCheckpoint = false;
inline constexpr bool kIgnoreUnusedParameters = true;
inline constexpr bool kRoundRobinGradients = false;
inline constexpr bool kMemoryEfficientLinear = true;
inline constexpr bool kPipelineLoadingCheckpoint = false;
inline constexpr int64_t kReduceBucketSize = 500000000;            // elements
inline constexpr int64_t kAllgatherBucketSize = 500000000;         // elements
inline constexpr int64_t kSubGroupSize = 1000000000;               // elements
inline constexpr int64_t kStage3PrefetchBucketSize = 50000000;     // elements
inline constexpr int64_t kStage3ParamPersistenceThreshold = 100000;  // elements
inline constexpr int64_t kStage3ModelPersistenceThreshold = INT64_MAX;  // elements (sys.maxsize)
inline constexpr int64_t kStage3MaxLiveParameters = 1000000000;    // elements
inline constexpr int64_t kStage3MaxReuseDistance = 1000000000;     // elements
inline constexpr int64_t kStage3ModuleGranularityThreshold = 0;    // 0: off
inline constexpr bool kStage3Gather16bitWeightsOnModelSave = false;
inline constexpr bool kStage3UseAllReduceForFetchParams = false;
inline constexpr bool kStage3AllgatherSequential = false;

// zero_optimization.offload_param / offload_optimizer
inline constexpr int64_t kOffloadParamBufferCount = 5;
inline constexpr int64_t kOffloadParamBufferSize = 100000000;      // elements
inline constexpr int64_t kMaxInCpu = 1000000000;                   // elements
inline constexpr int64_t kOffloadOptimizerBufferCount = 4;
inline constexpr bool kOffloadPinMemory = true;
inline constexpr double kOffloadOptimizerRatio = 1.0;              // fraction of the optimizer on the CPU
inline constexpr double kCpuadamCoresPerc = 0.8;                   // fraction of the cores

// top level
inline constexpr int kGradientAccumulationSteps = 1;
inline constexpr double kGradientClipping = 1.0;         // <= 0: off (DeepSpeed < 0.19.3: 0.0)
inline constexpr bool kPrescaleGradients = false;
inline constexpr double kGradientPredivideFactor = 1.0;
inline constexpr bool kManagedGradientAccumulation = true;
inline constexpr const char* kGradientAllreduceOp = "mean";

// fp16 / bf16
inline constexpr double kFp16LossScale = 0.0;            // 0: dynamic loss scaling
inline constexpr int64_t kFp16InitialScalePower = 16;    // initial dynamic scale 2^16
inline constexpr int64_t kFp16LossScaleWindow = 1000;    // steps without overflow before the scale doubles
inline constexpr int64_t kFp16Hysteresis = 2;            // overflows tolerated before the scale halves
inline constexpr int64_t kFp16MinLossScale = 1;
inline constexpr bool kBf16CheckGradOverflow = true;

// optimizer.params (FusedAdam / DeepSpeedCPUAdam; torch.optim.SGD)
inline constexpr double kLr = 1e-3;
inline constexpr double kAdamBeta1 = 0.9;
inline constexpr double kAdamBeta2 = 0.999;
inline constexpr double kAdamEps = 1e-8;
inline constexpr double kWeightDecay = 0.0;
inline constexpr bool kAdamBiasCorrection = true;
inline constexpr bool kAdamWMode = true;                 // "adam" is AdamW unless adam_w_mode: false
inline constexpr double kSgdMomentum = 0.0;
inline constexpr double kSgdDampening = 0.0;
inline constexpr double kLionBeta2 = 0.999;              // FusedLion / DeepSpeedCPULion: betas (0.9, 0.999)
inline constexpr double kAdagradLr = 1e-2;               // torch.optim.Adagrad / DeepSpeedCPUAdagrad
inline constexpr double kAdagradEps = 1e-10;
inline constexpr double kLambMaxCoeff = 10.0;            // FusedLamb
inline constexpr double kLambMinCoeff = 0.01;

// scheduler.params (steps: optimizer steps)
inline constexpr int64_t kWarmupNumSteps = 1000;
inline constexpr double kWarmupMinLr = 0.0;
inline constexpr double kWarmupDecayMaxLr = 0.001;       // WarmupDecayLR; WarmupLR: the optimizer's lr
inline constexpr double kWarmupMinRatio = 0.0;           // WarmupCosineLR
inline constexpr double kCosMinRatio = 0.0001;           // WarmupCosineLR
inline constexpr double kLrRangeTestMinLr = 1e-3;
inline constexpr int64_t kLrRangeTestStepSize = 2000;
inline constexpr double kLrRangeTestStepRate = 1.0;
inline constexpr double kCycleFirstStepSize = 2000;      // OneCycle; second: null -> first
inline constexpr double kCycleMinMom = 0.8;
inline constexpr double kCycleMaxMom = 0.9;

}  // namespace zt::ds_defaults
