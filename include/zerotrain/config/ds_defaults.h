// ds_defaults.h — DeepSpeed 0.19.5's defaults for the keys zerotrain reads: the one table.
// The config reader fills absent keys from here and EngineOptions starts from here, so a
// default is written once. Units as in DeepSpeed: bucket/group sizes count elements.
#pragma once
#include <cstdint>

namespace zt::ds_defaults {

// zero_optimization
inline constexpr int kStage = 0;
inline constexpr bool kOverlapComm = false;              // stage 3 resolves it to true
inline constexpr bool kContiguousGradients = true;
inline constexpr int64_t kReduceBucketSize = 500000000;            // elements
inline constexpr int64_t kAllgatherBucketSize = 500000000;         // elements
inline constexpr int64_t kSubGroupSize = 1000000000;               // elements
inline constexpr int64_t kStage3PrefetchBucketSize = 50000000;     // elements
inline constexpr int64_t kStage3ParamPersistenceThreshold = 100000;  // elements
inline constexpr int64_t kStage3MaxLiveParameters = 1000000000;    // elements
inline constexpr int64_t kStage3MaxReuseDistance = 1000000000;     // elements
inline constexpr int64_t kMaxInCpu = 1000000000;                   // elements

// top level
inline constexpr int kGradientAccumulationSteps = 1;
inline constexpr double kGradientClipping = 0.0;         // 0: off
inline constexpr bool kPrescaleGradients = false;
inline constexpr double kGradientPredivideFactor = 1.0;

}  // namespace zt::ds_defaults
